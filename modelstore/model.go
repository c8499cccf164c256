package modelstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// Blob is a model's bytes with the ONNX Runtime session compiled from
// them. Keys whose model bytes and session options are identical share one
// Blob: the bytes are held once and the session is created once.
type Blob struct {
	SHA256  [32]byte
	Data    []byte
	Opts    SessionOptions
	Session *Session
	// Weights says whether the session reads the large initializers in
	// Data (SharedBytes of them) or holds its own copy.
	Weights     WeightsMode
	SharedBytes int64

	buf *ModelBuffer // Data's memory, when the model came in through one

	reg  *Registry
	refs int // guarded by reg.mu: stored models plus runs in flight
}

// SHA256Hex is the model's digest in hex.
func (b *Blob) SHA256Hex() string { return hex.EncodeToString(b.SHA256[:]) }

type blobKey struct {
	sum  [32]byte
	opts SessionOptions
}

// Registry deduplicates model blobs and reference-counts their sessions.
// A session is closed when the last model using it is gone and no run is
// in flight.
type Registry struct {
	mu    sync.Mutex
	blobs map[blobKey]*Blob
	bytes atomic.Int64
	// compile creates sessions; tests may replace it.
	compile func(data []byte, buf *ModelBuffer, opts SessionOptions) (*Session, error)
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{blobs: make(map[blobKey]*Blob), compile: NewSharedSession}
}

// Bytes is the memory held by distinct model blobs.
func (r *Registry) Bytes() int64 { return r.bytes.Load() }

// Len is the number of distinct blobs.
func (r *Registry) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.blobs)
}

// Acquire returns the Blob for data and opts, compiling a session only if
// no identical blob is registered; the caller owns one reference. data is
// retained (not copied) when a new Blob is made. Compilation runs without
// the registry lock: two clients storing the same new model at once may
// both compile, and the second session is dropped.
func (r *Registry) Acquire(data []byte, opts SessionOptions) (*Blob, error) {
	return r.AcquireIfRoom(data, opts, nil)
}

// AcquireIfRoom is Acquire with a memory check: room (if not nil) is asked
// for the bytes a new blob would add, before it is compiled, and only when
// no identical blob is registered, since sharing one adds nothing.
func (r *Registry) AcquireIfRoom(data []byte, opts SessionOptions, room func(n int64) error) (*Blob, error) {
	return r.acquire(data, nil, sha256.Sum256(data), opts, room)
}

// AcquireBuffer is AcquireIfRoom for a model in a ModelBuffer, using the
// digest computed while it filled. A new Blob (and its session) take
// references to buf; the caller keeps its own, to drop when done.
func (r *Registry) AcquireBuffer(buf *ModelBuffer, opts SessionOptions, room func(n int64) error) (*Blob, error) {
	return r.acquire(buf.Bytes(), buf, buf.Sum(), opts, room)
}

func (r *Registry) acquire(data []byte, buf *ModelBuffer, sum [32]byte, opts SessionOptions, room func(n int64) error) (*Blob, error) {
	k := blobKey{sum, opts}
	if b := r.ref(k); b != nil {
		return b, nil
	}
	if room != nil {
		if err := room(int64(len(data))); err != nil {
			return nil, err
		}
	}
	if err := CheckModelBlob(data); err != nil {
		return nil, err
	}
	sess, err := r.compile(data, buf, opts)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	if b, ok := r.blobs[k]; ok {
		b.refs++
		r.mu.Unlock()
		sess.Close()
		return b, nil
	}
	b := &Blob{SHA256: k.sum, Data: data, Opts: opts, Session: sess, reg: r, refs: 1, buf: buf}
	b.Weights, b.SharedBytes = sess.Weights()
	if buf != nil {
		buf.Ref()
	}
	r.blobs[k] = b
	r.bytes.Add(int64(len(data)))
	r.mu.Unlock()
	return b, nil
}

func (r *Registry) ref(k blobKey) *Blob {
	r.mu.Lock()
	defer r.mu.Unlock()
	if b, ok := r.blobs[k]; ok {
		b.refs++
		return b
	}
	return nil
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
		delete(r.blobs, blobKey{b.SHA256, b.Opts})
		r.bytes.Add(-int64(len(b.Data)))
	}
	r.mu.Unlock()
	if last {
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

// Refs is the current reference count (for tests and AI.MODELINFO).
func (b *Blob) Refs() int {
	b.reg.mu.Lock()
	defer b.reg.mu.Unlock()
	return b.refs
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
	Created         time.Time
}

// Model is the value stored at a model key. It is immutable but for its
// statistics; storing again at the key makes a new Model with fresh stats.
type Model struct {
	ModelMeta
	Blob  *Blob
	Stats Stats

	batcher  *batcher // nil unless BatchSize > 0
	released atomic.Bool
}

// NewModel wraps an acquired blob; the model owns that reference.
func NewModel(meta ModelMeta, blob *Blob) *Model {
	m := &Model{ModelMeta: meta, Blob: blob}
	if meta.BatchSize > 0 {
		m.batcher = newBatcher(m)
	}
	return m
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
		if m.batcher != nil {
			m.batcher.stop()
		}
		m.Blob.Release()
	}
}

// Inputs and Outputs describe the model's graph inputs and outputs.
func (m *Model) Inputs() []IOInfo  { return m.Blob.Session.Inputs() }
func (m *Model) Outputs() []IOInfo { return m.Blob.Session.Outputs() }

// ErrTimedOut is returned when a run waited in the queue longer than the
// request's TIMEOUT (RedisAI replies TIMEDOUT).
var ErrTimedOut = errors.New("timed out")

// ErrBatchSize is RedisAI's error when a batched run's outputs do not keep
// the batch dimension.
var ErrBatchSize = errors.New("model did not generate the expected batch size")

// RunRequest is one model execution.
type RunRequest struct {
	Inputs []*Tensor
	// Queued is when the request entered the queue; Timeout (0 = none)
	// bounds the wait before the run starts, as RedisAI's TIMEOUT does.
	Queued  time.Time
	Timeout time.Duration
	// ExecTimeout bounds the run itself (MODEL_EXECUTION_TIMEOUT): ONNX
	// Runtime is told to terminate when it passes.
	ExecTimeout time.Duration
}

// Runner limits how many model runs execute at once (THREADS_PER_QUEUE);
// requests beyond that wait, in order, and may time out while waiting.
type Runner struct {
	slots chan struct{}
}

// NewRunner allows n concurrent runs.
func NewRunner(n int) *Runner {
	if n < 1 {
		n = 1
	}
	return &Runner{slots: make(chan struct{}, n)}
}

func (r *Runner) acquire(req *RunRequest) error {
	if req.Timeout <= 0 {
		r.slots <- struct{}{}
		return nil
	}
	left := req.Timeout - time.Since(req.Queued)
	if left <= 0 {
		return ErrTimedOut
	}
	t := time.NewTimer(left)
	defer t.Stop()
	select {
	case r.slots <- struct{}{}:
		return nil
	case <-t.C:
		return ErrTimedOut
	}
}

func (r *Runner) release() { <-r.slots }

// Run executes the model on req and returns its outputs (nil entries for
// outputs that are not tensors). Batched models merge concurrent requests.
// The caller holds no lock.
func (r *Runner) Run(m *Model, req *RunRequest) ([]*Tensor, error) {
	if req.Queued.IsZero() {
		req.Queued = time.Now()
	}
	// The model may have been deleted since the caller fetched it: then its
	// session is closed (or closing) and it reads as missing.
	if !m.Blob.TryRetain() {
		return nil, ErrNoModel
	}
	defer m.Blob.Release()
	if m.batcher != nil {
		return m.batcher.submit(r, req)
	}
	if err := r.acquire(req); err != nil {
		return nil, err
	}
	defer r.release()
	start := time.Now()
	outs, err := m.runSession(req.Inputs, req.ExecTimeout)
	m.account(start, outs, err)
	return outs, err
}

func (m *Model) runSession(inputs []*Tensor, execTimeout time.Duration) ([]*Tensor, error) {
	ctx := context.Background()
	if execTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, execTimeout)
		defer cancel()
	}
	return m.Blob.Session.Run(ctx, inputs)
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
