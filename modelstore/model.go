package modelstore

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Blob is a model's bytes with the session an Engine compiled from them.
// Keys whose model bytes, session options and owner are identical share
// one Blob: the bytes are held once and the session is created once. Two
// users never share one, whatever the engine: a shared session would tell
// each that the other holds the model (AI.MODELINFO's shared_with) and
// when the other runs it (the runs take turns on it, and its count moved
// with them), and a run that breaks a session (the pure-Go engine's
// quarantine) would break it for both.
type Blob struct {
	Data    []byte
	Opts    SessionOptions
	Session EngineSession
	// Weights says whether the session reads the large initializers in
	// Data (SharedBytes of them) or holds its own copy.
	Weights     WeightsMode
	SharedBytes int64
	// Engine names the engine that compiled Session (Engine.Name()).
	Engine string

	buf *ModelBuffer // Data's memory, when the model came in through one
	key blobKey
	sha digest

	reg    *Registry
	refs   int // guarded by reg.mu: stored models plus runs in flight
	models int // guarded by reg.mu: the Models holding it (NewModel)
}

// digest is a Blob's SHA-256, computed by a goroutine once the Blob is
// registered, off the path of the upload that made it: the model is
// runnable (and the client answered) without waiting for it.
type digest struct {
	done  chan struct{} // closed when sum is set or the hashing gave up
	sum   [32]byte
	ok    bool // sum is set (written before done is closed)
	abort atomic.Bool
}

// hash computes the digest of data. It ends early when the blob's last
// reference is dropped; release (if not nil) runs when data is no longer
// read.
func (d *digest) hash(data []byte, release func()) {
	defer close(d.done)
	if release != nil {
		defer release()
	}
	h := sha256.New()
	for len(data) > 0 {
		if d.abort.Load() {
			return
		}
		k := min(len(data), hashPiece)
		h.Write(data[:k])
		data = data[k:]
	}
	h.Sum(d.sum[:0])
	d.ok = true
}

// SHA256 returns the model's SHA-256, waiting for it if it is still being
// computed (about 0.6 s a GB). The caller must hold a reference (TryRetain):
// the digest of a blob released meanwhile may never be computed, and ok is
// then false.
func (b *Blob) SHA256() (sum [32]byte, ok bool) {
	<-b.sha.done
	return b.sha.sum, b.sha.ok
}

// SHA256Hex is the model's digest in hex, "" when SHA256 reports none.
func (b *Blob) SHA256Hex() string {
	sum, ok := b.SHA256()
	if !ok {
		return ""
	}
	return hex.EncodeToString(sum[:])
}

// blobKey indexes blobs; blobs with equal keys may still differ (the
// fingerprint is 64 bits) and are told apart by their bytes.
type blobKey struct {
	fp    uint64
	size  int
	opts  SessionOptions
	owner string // Origin.Owner
}

// Registry deduplicates model blobs and reference-counts their sessions.
// A session is closed when the last model using it is gone and no run is
// in flight.
type Registry struct {
	mu    sync.Mutex
	blobs map[blobKey][]*Blob
	gen   uint64 // guarded by mu: counts the blobs added, for acquire
	bytes atomic.Int64
	// engine compiles sessions; set before the first Acquire.
	engine Engine
}

// NewRegistry returns an empty registry whose models are compiled by
// engine (InProcess when nil).
func NewRegistry(engine Engine) *Registry {
	if engine == nil {
		engine = InProcess{}
	}
	return &Registry{blobs: make(map[blobKey][]*Blob), engine: engine}
}

// SetEngine replaces the engine; only before the first model is acquired
// (the server picks one at start, from its configuration).
func (r *Registry) SetEngine(e Engine) { r.engine = e }

// Engine is the engine that compiles the registry's models.
func (r *Registry) Engine() Engine { return r.engine }

// BufferEngine is implemented by engines that need every model in a
// shareable ModelBuffer (a worker process maps it): the Registry copies
// bytes that arrive in Go memory (a snapshot, a model file) into one
// before compiling, and keeps only that copy.
type BufferEngine interface {
	Engine
	NeedsBuffer() bool
}

// Bytes is the memory held by distinct model blobs.
func (r *Registry) Bytes() int64 { return r.bytes.Load() }

// Len is the number of distinct blobs.
func (r *Registry) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, bs := range r.blobs {
		n += len(bs)
	}
	return n
}

// AcquireIfRoom returns the Blob for data and opts, compiling a session
// only if no identical blob is registered; the caller owns one reference.
// data is retained (not copied) when a new Blob is made. room (if not nil)
// is asked for the bytes a new blob would add, before it is compiled, and
// only when no identical blob is registered, since sharing one adds
// nothing. Compilation runs without the registry lock: two clients storing
// the same new model at once may both compile, and the second session is
// dropped. from names who stores it: the owner is part of what makes two
// blobs identical.
func (r *Registry) AcquireIfRoom(data []byte, from Origin, opts SessionOptions, room func(n int64) error) (*Blob, error) {
	return r.acquire(data, nil, Fingerprint(data), nil, from, opts, room)
}

// AcquireVerified is AcquireIfRoom, without a memory check, for bytes whose
// SHA-256 the caller has already verified (a snapshot's blob): a new Blob
// takes that digest instead of hashing the bytes again.
func (r *Registry) AcquireVerified(data []byte, sum [32]byte, from Origin, opts SessionOptions) (*Blob, error) {
	return r.acquire(data, nil, Fingerprint(data), &sum, from, opts, nil)
}

// AcquireBuffer is AcquireIfRoom for a model in a ModelBuffer, using the
// fingerprint computed while it filled. A new Blob (and its session) take
// references to buf; the caller keeps its own, to drop when done.
func (r *Registry) AcquireBuffer(buf *ModelBuffer, from Origin, opts SessionOptions, room func(n int64) error) (*Blob, error) {
	return r.acquire(buf.Bytes(), buf, buf.Fingerprint(), nil, from, opts, room)
}

// AcquireBufferVerified is AcquireBuffer for a buffer whose SHA-256 the
// caller computed as it arrived (a Tap): a new Blob takes it instead of
// hashing the bytes again.
func (r *Registry) AcquireBufferVerified(buf *ModelBuffer, sum [32]byte, from Origin, opts SessionOptions, room func(n int64) error) (*Blob, error) {
	return r.acquire(buf.Bytes(), buf, buf.Fingerprint(), &sum, from, opts, room)
}

// acquire does the work of the Acquire methods; sum, if not nil, is the
// bytes' verified SHA-256.
func (r *Registry) acquire(data []byte, buf *ModelBuffer, fp uint64, sum *[32]byte, from Origin, opts SessionOptions, room func(n int64) error) (*Blob, error) {
	k := blobKey{fp, len(data), opts, from.Owner}
	if b, _ := r.find(k, data); b != nil {
		return b, nil
	}
	if room != nil {
		if err := room(int64(len(data))); err != nil {
			return nil, err
		}
	}
	if err := CheckModel(data); err != nil {
		return nil, err
	}
	if be, ok := r.engine.(BufferEngine); ok && be.NeedsBuffer() && (buf == nil || !buf.Shareable()) {
		copied, err := CopyToBuffer(data)
		if err != nil {
			return nil, err
		}
		defer copied.Unref() // the Blob and session take their own
		data, buf = copied.Bytes(), copied
	}
	src := ModelSource{Data: data, Buf: buf, Origin: from}
	if sum != nil {
		src.SHA256 = hex.EncodeToString(sum[:])
	}
	sess, err := r.engine.Compile(src, opts)
	if err != nil {
		return nil, err
	}
	for {
		b, gen := r.find(k, data)
		if b != nil {
			sess.Close()
			return b, nil
		}
		r.mu.Lock()
		if r.gen != gen {
			r.mu.Unlock()
			continue // a blob was added since find looked: it may be this one
		}
		b = &Blob{Data: data, Opts: opts, Session: sess, Engine: r.engine.Name(), reg: r, refs: 1, buf: buf, key: k}
		b.sha.done = make(chan struct{})
		b.Weights, b.SharedBytes = sess.Weights()
		if buf != nil {
			buf.Ref() // the Blob's
		}
		if sum != nil {
			b.sha.sum, b.sha.ok = *sum, true
			close(b.sha.done)
		}
		r.blobs[k] = append(r.blobs[k], b)
		r.gen++
		r.bytes.Add(int64(len(data)))
		r.mu.Unlock()
		if sum == nil {
			var release func()
			if buf != nil {
				buf.Ref() // the digest's, dropped when it is done reading
				release = buf.Unref
			}
			go b.sha.hash(data, release)
		}
		return b, nil
	}
}

// find returns a registered blob with key k and bytes data, with a new
// reference, or nil; and the registry's generation when it looked. The
// bytes are compared without the registry lock, which model runs take
// (comparing a large model takes a while), holding references to the
// candidates meanwhile.
func (r *Registry) find(k blobKey, data []byte) (*Blob, uint64) {
	r.mu.Lock()
	gen := r.gen
	cands := slices.Clone(r.blobs[k])
	for _, b := range cands {
		b.refs++
	}
	r.mu.Unlock()
	var found *Blob
	for _, b := range cands {
		if found == nil && b.Quarantined() == nil && bytes.Equal(b.Data, data) {
			found = b
		} else {
			b.Release()
		}
	}
	return found, gen
}

// Quarantined returns the error runs of a model that crashed its engine
// get (the session implements Quarantiner), or nil.
func (b *Blob) Quarantined() error {
	if q, ok := b.Session.(Quarantiner); ok {
		return q.Quarantined()
	}
	return nil
}

// Holds reports whether b's bytes are data itself: not a copy of it, nor
// the same bytes that another upload brought first.
func (b *Blob) Holds(data []byte) bool {
	return len(data) > 0 && len(b.Data) == len(data) && &b.Data[0] == &data[0]
}

// Retain adds a reference (a run in flight, a second model).
func (b *Blob) Retain() {
	b.reg.mu.Lock()
	b.refs++
	b.reg.mu.Unlock()
}

// Release drops a reference; the last one closes the session.
func (b *Blob) Release() {
	r := b.reg
	r.mu.Lock()
	b.refs--
	last := b.refs == 0
	if last {
		bs := slices.DeleteFunc(r.blobs[b.key], func(x *Blob) bool { return x == b })
		if len(bs) == 0 {
			delete(r.blobs, b.key)
		} else {
			r.blobs[b.key] = bs
		}
		r.bytes.Add(-int64(len(b.Data)))
	}
	r.mu.Unlock()
	if last {
		b.sha.abort.Store(true)
		b.Session.Close()
		if b.buf != nil {
			b.buf.Unref() // the session may hold its own until its runs end
		}
	}
}

// TryRetain adds a reference unless the last one is already gone (the
// model was deleted since the caller found it), for readers of Data that
// must keep it valid: the memory of a ModelBuffer is unmapped with the
// last reference.
func (b *Blob) TryRetain() bool {
	b.reg.mu.Lock()
	defer b.reg.mu.Unlock()
	if b.refs == 0 {
		return false
	}
	b.refs++
	return true
}

// Refs is the current reference count (for tests).
func (b *Blob) Refs() int {
	b.reg.mu.Lock()
	defer b.reg.mu.Unlock()
	return b.refs
}

// Models is how many Models hold b (AI.MODELINFO's shared_with is the
// others): its keys, where runs, replies and snapshots in flight, which
// also take references, do not count.
func (b *Blob) Models() int {
	b.reg.mu.Lock()
	defer b.reg.mu.Unlock()
	return b.models
}

// Stats are a model key's AI.INFO counters.
type Stats struct {
	Duration atomic.Int64 // microseconds, cumulative
	Samples  atomic.Int64
	Calls    atomic.Int64
	Errors   atomic.Int64
}

// Reset zeroes the counters (AI.INFO RESETSTAT).
func (s *Stats) Reset() {
	s.Duration.Store(0)
	s.Samples.Store(0)
	s.Calls.Store(0)
	s.Errors.Store(0)
}

// ModelMeta is what a client declares when storing a model.
type ModelMeta struct {
	Backend         string // "ONNX"
	Device          string // as given, e.g. "CPU" or "cpu:0"
	Tag             string
	BatchSize       int64
	MinBatchSize    int64
	MinBatchTimeout int64 // milliseconds
	NoPersist       bool
	ID              string // UUID when stored with key "*"
	Owner           string // the user who stored it ("" = default; commands/owner.go)
	Created         time.Time
	// LogFile, when set, is the id naming the append-only log's model
	// file that holds Blob's bytes, where the file is not named by their
	// SHA-256 (persistence.LogModel.File): a large upload is sealed into a
	// file of its own as it arrives, and acknowledged before its digest is
	// computed.
	LogFile *[32]byte
}

// Model is the value stored at a model key. It is immutable but for its
// statistics; storing again at the key makes a new Model with fresh stats.
type Model struct {
	ModelMeta
	Blob  *Blob
	Stats Stats

	released atomic.Bool
	// batching counts the batches of this (batched) model running now;
	// guarded by the lock of the RunQueue that runs it.
	batching int
}

// NewModel wraps an acquired blob; the model owns that reference.
func NewModel(meta ModelMeta, blob *Blob) *Model {
	blob.reg.mu.Lock()
	blob.models++
	blob.reg.mu.Unlock()
	return &Model{ModelMeta: meta, Blob: blob}
}

// TypeName implements Value.
func (m *Model) TypeName() string { return "AI__MODEL" }

// MemSize implements Value. The blob's bytes are accounted once by the
// Registry, however many keys share them.
func (m *Model) MemSize() int64 { return 512 + int64(len(m.Tag)+len(m.Device)) }

// Release drops the model's reference to its blob; called once the model
// has left the keyspace.
func (m *Model) Release() {
	if m.released.CompareAndSwap(false, true) {
		m.Blob.reg.mu.Lock()
		m.Blob.models--
		m.Blob.reg.mu.Unlock()
		m.Blob.Release()
	}
}

// Inputs describes the model's graph inputs, in the graph's order.
func (m *Model) Inputs() []IOInfo { return m.Blob.Session.Inputs() }

// Outputs describes the model's graph outputs, in the graph's order.
func (m *Model) Outputs() []IOInfo { return m.Blob.Session.Outputs() }

func (m *Model) runSession(inputs []*Tensor, execTimeout time.Duration, maxOutput int64) ([]*Tensor, error) {
	ctx, rc := execContext(execTimeout)
	defer rc.Release()
	outs, err := m.Blob.Session.Run(WithOutputLimit(ctx, maxOutput), inputs)
	if err == nil {
		// In process the outputs exist already: they are only not kept.
		if err = checkOutputs(outs, maxOutput); err != nil {
			outs = nil
		}
	}
	return outs, err
}

// meanRun is the mean time of m's successful runs so far (false before
// the first).
func (m *Model) meanRun() (time.Duration, bool) {
	n := m.Stats.Calls.Load() - m.Stats.Errors.Load()
	if n <= 0 {
		return 0, false
	}
	return time.Duration(m.Stats.Duration.Load()/n) * time.Microsecond, true
}

// account updates AI.INFO statistics as RedisAI does: samples are the
// first output's dim 0.
func (m *Model) account(start time.Time, outs []*Tensor, err error) {
	m.Stats.Calls.Add(1)
	if err != nil {
		m.Stats.Errors.Add(1)
		return
	}
	m.Stats.Duration.Add(time.Since(start).Microseconds())
	if len(outs) > 0 && outs[0] != nil && len(outs[0].Shape) > 0 {
		m.Stats.Samples.Add(outs[0].Shape[0])
	}
}
