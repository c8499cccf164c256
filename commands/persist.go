package commands

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/enclaveai/enclaveai/config"
	"github.com/enclaveai/enclaveai/modelstore"
	"github.com/enclaveai/enclaveai/persistence"
)

// SAVE, BGSAVE, LASTSAVE; `save` rules run from Tick; SHUTDOWN saves
// through Snapshotter.Save. The snapshot is the sealed file of package
// persistence at <dir>/<dbfilename>.
func init() {
	p := func(s *Spec) *Spec { s.Group = "server"; return s }
	register(
		p(&Spec{Name: "save", Arity: 1, Flags: Admin | NoTxLock | NoMulti,
			Summary: "Writes the sealed snapshot synchronously.", Parse: parseSave}),
		p(&Spec{Name: "bgsave", Arity: -1, Flags: Admin | NoTxLock,
			Summary: "Writes the sealed snapshot in the background.", Syntax: "[SCHEDULE]", Parse: parseBgsave}),
		p(&Spec{Name: "lastsave", Arity: 1, Flags: Fast | LoadingOK,
			Summary: "Returns the unix time of the last successful snapshot.", Parse: parseLastsave}),
	)
	RegisterInfoSection(InfoSection{Name: "Persistence", Fields: func(s *App) [][2]string {
		return append(persistenceInfo(s), aofInfo(s)...)
	}})
}

// Snapshotter writes and loads the sealed snapshot. A save copies the
// key→value map under the keyspace lock (values are immutable, so no bytes
// are copied) and streams it to disk with no lock held: the snapshot is
// consistent as of that instant while the server keeps serving.
//
// One save holds the save slot at a time (cur), except that the saves of
// FLUSHALL, SHUTDOWN and SIGTERM supersede the one under way (saveOver):
// the one superseded stops at its next record and never replaces the
// file, nor counts as a save.
type Snapshotter struct {
	SealKey []byte // 32 bytes from the enclave layer

	// mu orders the saves: a claim of the slot, and each save's check
	// that it still holds the slot with what follows, its rename and the
	// outcome's record (snapshot.Replace, snapshot.end). It is held across
	// the rename and the fsync of the directory: checked and then renamed
	// without it, a superseded save could rename its older file over the
	// newer one.
	mu      sync.Mutex
	cur     atomic.Pointer[snapshot] // the save holding the slot; written under mu
	writing atomic.Int32             // saves not yet ended, superseded ones included

	lastSave   atomic.Int64 // unix seconds of the last success
	lastStatus atomic.Bool  // true = ok
	lastTry    atomic.Int64 // unix seconds when the last save began
	lastSecs   atomic.Int64 // duration of the last save
	saves      atomic.Int64
	lastError  atomic.Pointer[error] // the last failed save's error
}

// lastErr is the cause of the last failed save, as MISCONF shows it.
func (sn *Snapshotter) lastErr() string {
	if p := sn.lastError.Load(); p != nil {
		return errCause(*p)
	}
	return "unknown error"
}

// errNoSealKey refuses a save where the enclave layer gave no seal key.
var errNoSealKey = Reply("ERR snapshots are disabled: no seal key")

// ErrSaveInProgress is returned when a save is already running.
var ErrSaveInProgress = Reply("ERR Background save already in progress")

// errSuperseded ends a save that a newer one superseded (saveOver).
var errSuperseded = errors.New("a newer save superseded this one")

// Path is the snapshot's file path.
func (s *App) snapshotPath() string { return filepath.Join(s.Opts.Dir, s.Opts.DBFilename) }

// snapshotSource adapts keyspace items to persistence.Source.
type snapshotSource []modelstore.Item

func (src snapshotSource) Tensors(yield func(persistence.TensorRecord) error) error {
	for _, it := range src {
		if t, ok := it.Value.(*modelstore.Tensor); ok {
			if err := yield(persistence.TensorRecord{Key: it.Key, Owner: t.Owner, ExpireAtUnixMs: it.ExpireAt,
				DType: uint8(t.DType), Shape: t.Shape, Data: t.Data}); err != nil {
				return err
			}
		}
	}
	return nil
}

func (src snapshotSource) Models(yield func(persistence.ModelRecord, []byte) error) error {
	for _, it := range src {
		m, ok := it.Value.(*modelstore.Model)
		if !ok || m.NoPersist {
			continue
		}
		if err := yield(snapshotModelRecord(it.Key, it.ExpireAt, m), m.Blob.Data); err != nil {
			return err
		}
	}
	return nil
}

// snapshotModelRecord is a model key's snapshot record. The blob stays referenced
// while it is written, so its digest (computed once, after the upload) is
// there or on its way.
func snapshotModelRecord(key string, expireAt int64, m *modelstore.Model) persistence.ModelRecord {
	rec := persistence.ModelRecord{Key: key, ExpireAtUnixMs: expireAt, Backend: m.Backend,
		Device: m.Device, Tag: m.Tag, BatchSize: uint32(m.BatchSize), MinBatchSize: uint32(m.MinBatchSize),
		MinBatchTimeoutMs: uint64(m.MinBatchTimeout), Optimize: m.Blob.Opts.Optimize, ID: m.ID,
		CreatedUnixMs: m.Created.UnixMilli(), Owner: m.Owner}
	if sum, ok := m.Blob.SHA256(); ok {
		rec.BlobSHA256 = &sum
	}
	return rec
}

// savingSource is the snapshot being saved: it logs its progress every
// log-progress-bytes written (persistence.Progress).
type savingSource struct {
	snapshotSource
	snap *snapshot
	s    *App
	next int64 // bytes at which the next line is due; 0: none
}

// Tensors implements persistence.Source; a superseded save stops at the
// next record.
func (src *savingSource) Tensors(yield func(persistence.TensorRecord) error) error {
	return src.snapshotSource.Tensors(func(r persistence.TensorRecord) error {
		if err := src.snap.superseded(); err != nil {
			return err
		}
		return yield(r)
	})
}

// Models implements persistence.Source, as Tensors.
func (src *savingSource) Models(yield func(persistence.ModelRecord, []byte) error) error {
	return src.snapshotSource.Models(func(r persistence.ModelRecord, blob []byte) error {
		if err := src.snap.superseded(); err != nil {
			return err
		}
		return yield(r, blob)
	})
}

// Replace implements persistence.Replacer: the file replaces the snapshot
// only while its save holds the slot, and the outcome is recorded before
// another save can claim it.
func (src *savingSource) Replace(replace func() error) error {
	sn := &src.s.Snapshot
	sn.mu.Lock()
	defer sn.mu.Unlock()
	if err := src.snap.superseded(); err != nil {
		return err
	}
	err := replace()
	src.snap.end(err)
	return err
}

// Written implements persistence.Progress.
func (src *savingSource) Written(n int64) {
	step := src.s.Opts.LogProgressBytes.Load()
	if step <= 0 || src.next <= 0 || n < src.next {
		return
	}
	src.next = n - n%step + step
	secs := time.Since(src.snap.start).Seconds()
	src.s.Log.Info("saving snapshot", "file", src.s.snapshotPath(), "written_bytes", n,
		"seconds", float64(int64(secs*1000))/1000, "mb_per_s", float64(int64(float64(n)/secs/1e5))/10)
}

// Save writes the snapshot now. The blobs it streams stay referenced by
// the items until it returns, so a model deleted meanwhile is still saved
// as it was at the snapshot instant. Superseded by the save of FLUSHALL
// or SHUTDOWN, it returns that save's outcome once it has one.
func (s *App) Save() error {
	snap, err := s.takeSnapshot()
	if err != nil {
		return err
	}
	snap.write()
	return snap.result()
}

// saveOver is the save of FLUSHALL, SHUTDOWN and SIGTERM (by names it in
// the log): it takes the slot from the save under way, if any, which is
// abandoned (Redis kills its saving child), and saves now. It never waits
// for that save: inside EXEC, under the transaction lock, FLUSHALL held up
// every client until the save ended, and would not save at all (diff
// review); its own save, of what EXEC's lock leaves after it, is short.
// The abandoned save never replaces the file, nor changes LASTSAVE, the
// changes since the last save or INFO's rdb_*
// outcome fields, as Redis's killed child does not.
func (s *App) saveOver(by string) error {
	sn := &s.Snapshot
	if len(sn.SealKey) == 0 {
		return errNoSealKey
	}
	sn.mu.Lock()
	old := sn.cur.Load()
	snap := s.claim()
	if old != nil {
		old.next = snap // for old.result, once old.end has seen it superseded
		s.Log.Info(by+" abandons the save under way: its own save supersedes it", "file", s.snapshotPath())
	}
	sn.mu.Unlock()
	snap.write()
	return snap.result()
}

// FinalSave is the save of SHUTDOWN and SIGTERM: the snapshot is written
// with every write acknowledged until now, and a save under way is
// abandoned for it (saveOver), as Redis kills its saving child and saves
// in the foreground. Its error is that of the save, or of the save that
// superseded it in turn (a FLUSHALL's). It waited for the save under way
// to end, then saved everything again: SHUTDOWN right after a BGSAVE of
// 48 tensors of 4 MiB took 0.42 s to exit, now 0.23 s; of 48 of 16 MiB,
// 1.6 s, now 0.8 s.
//
// Writes stop before the snapshot's instant and stay stopped until the
// process exits (errShuttingDown), as no other command runs beside
// Redis's SHUTDOWN: a write acknowledged during or after the copy was
// lost (durability review: 1,585 of 4,332 writes acknowledged during a
// SHUTDOWN were missing after the restart). A save that fails leaves the
// server serving, writes again included.
//
// While the data is still loading there is no final save, as in Redis: the
// keyspace, not yet filled, was saved over the snapshot being loaded, and
// a SHUTDOWN sent during a start lost every key (diff review).
func (s *App) FinalSave() error {
	if s.loading.Load() {
		s.Log.Warn("the final save is skipped: the data is still loading, and what is on disk stays as it is")
		return nil
	}
	s.stopWrites(1)
	err := s.saveOver("the final save (SHUTDOWN, SIGTERM)")
	if err != nil {
		s.stopWrites(-1)
	}
	return err
}

// stopWrites adds by to the final saves that refuse writes, under the
// transaction lock's write side: the writes under way (which hold its
// read side) end first, and every write after it sees the count
// (Ctx.Update, App.run, EXEC).
func (s *App) stopWrites(by int32) {
	s.tx.Lock()
	s.stopping.Add(by)
	s.tx.Unlock()
}

// errShuttingDown refuses a write once the final save has its instant.
var errShuttingDown = Reply("ERR the server is shutting down: the write was not applied")

// snapshot is a save claimed and its instant taken: the keyspace's items
// retained and the change count they include. write streams it and gives
// the save slot back.
type snapshot struct {
	s     *App
	start time.Time
	dirty int64
	items []modelstore.Item

	// Under Snapshotter.mu: whether the outcome is recorded, and the save
	// that superseded this one.
	ended bool
	next  *snapshot
	err   error         // the outcome, set before done is closed
	done  chan struct{} // closed once the outcome is recorded
}

// takeSnapshot claims the one save slot (ErrSaveInProgress when taken)
// and copies the keyspace: the snapshot's instant. BGSAVE calls it before
// it answers, so that INFO shows rdb_bgsave_in_progress:1 from its reply
// on and no write acknowledged after the reply is in the file, as with
// Redis's fork.
func (s *App) takeSnapshot() (*snapshot, error) {
	sn := &s.Snapshot
	if len(sn.SealKey) == 0 {
		return nil, errNoSealKey
	}
	sn.mu.Lock()
	defer sn.mu.Unlock()
	if sn.cur.Load() != nil {
		return nil, ErrSaveInProgress
	}
	return s.claim(), nil
}

// claim takes the free save slot, under Snapshotter.mu, and the
// snapshot's instant.
func (s *App) claim() *snapshot {
	sn := &s.Snapshot
	snap := &snapshot{s: s, start: time.Now(), dirty: s.Keys.Dirty(), items: s.retainItems(), done: make(chan struct{})}
	sn.lastTry.Store(snap.start.Unix())
	sn.cur.Store(snap)
	sn.writing.Add(1)
	return snap
}

// superseded is errSuperseded once a newer save has taken the slot.
func (snap *snapshot) superseded() error {
	if snap.s.Snapshot.cur.Load() != snap {
		return errSuperseded
	}
	return nil
}

// write streams the snapshot to disk with no lock held but
// Snapshotter.mu around its rename, and records the outcome.
func (snap *snapshot) write() {
	s, sn := snap.s, &snap.s.Snapshot
	defer sn.writing.Add(-1)
	sn.mu.Lock()
	err := snap.superseded()
	if err == nil {
		// What saves cut short by a crash left. Not while a save that
		// superseded this one writes: its file would go too.
		err = persistence.RemoveTemporaryFiles(s.Opts.Dir, s.Opts.DBFilename)
	}
	sn.mu.Unlock()
	if err == nil {
		err = persistence.SaveFile(s.Opts.Dir, s.Opts.DBFilename, sn.SealKey,
			&savingSource{snapshotSource: snap.items, snap: snap, s: s, next: s.Opts.LogProgressBytes.Load()})
	}
	s.releaseItems(snap.items)
	sn.mu.Lock()
	snap.end(err)
	sn.mu.Unlock()
}

// end records the outcome of the save, once (Replace records it after
// the rename), under Snapshotter.mu, and frees the slot. A superseded
// save records nothing.
func (snap *snapshot) end(err error) {
	if snap.ended {
		return
	}
	snap.ended = true
	defer close(snap.done)
	s, sn := snap.s, &snap.s.Snapshot
	if snap.superseded() != nil {
		snap.err = errSuperseded
		s.Log.Info("snapshot abandoned: a newer save superseded it", "file", s.snapshotPath(), "seconds", time.Since(snap.start).Seconds())
		return
	}
	sn.cur.Store(nil)
	snap.err = err
	sn.lastSecs.Store(int64(time.Since(snap.start).Seconds()))
	sn.lastStatus.Store(err == nil)
	if err != nil {
		sn.lastError.Store(&err)
		s.Log.Error("snapshot failed", "file", s.snapshotPath(), "err", err)
		return
	}
	s.Keys.ResetDirty(snap.dirty)
	sn.lastSave.Store(time.Now().Unix())
	sn.saves.Add(1)
	s.Log.Info("snapshot saved", "file", s.snapshotPath(), "keys", len(snap.items), "seconds", time.Since(snap.start).Seconds())
}

// result waits for the outcome of the save, or, superseded, of the save
// that superseded it.
func (snap *snapshot) result() error {
	for {
		<-snap.done
		if !errors.Is(snap.err, errSuperseded) {
			return snap.err
		}
		snap.s.Snapshot.mu.Lock()
		next := snap.next
		snap.s.Snapshot.mu.Unlock()
		snap = next
	}
}

// retainItems copies the keyspace map and pins each model blob so that a
// concurrent delete cannot close what the save still reads. The pins are
// taken under the keyspace lock: taken after it, a DEL or an overwrite
// could drop a blob's last reference in between, and the save would then
// revive and read a blob already released.
func (s *App) retainItems() []modelstore.Item {
	return s.Keys.ItemsRetained(func(v modelstore.Value) {
		if m, ok := v.(*modelstore.Model); ok {
			m.Blob.Retain()
		}
	})
}

func (s *App) releaseItems(items []modelstore.Item) {
	for _, it := range items {
		if m, ok := it.Value.(*modelstore.Model); ok {
			m.Blob.Release()
		}
	}
}

// BackgroundSave takes the snapshot's instant now and writes it in a
// goroutine.
func (s *App) BackgroundSave() error {
	snap, err := s.takeSnapshot()
	if err != nil {
		return err
	}
	go snap.write() // a failure is logged and shown by INFO and MISCONF
	return nil
}

func parseSave(a Args) (Runner, error) {
	return saveCmd{}, nil
}

// saveCmd is SAVE.
type saveCmd struct{}

// Run implements Runner.
func (saveCmd) Run(x *Ctx) error {
	if err := x.Save(); err != nil {
		if err == ErrSaveInProgress || err == errNoSealKey {
			return err
		}
		return Reply("ERR snapshot failed: see the server log")
	}
	x.W.OK()
	return nil
}

func parseBgsave(a Args) (Runner, error) {
	if a.More() && !a.Match("SCHEDULE") || a.More() {
		return nil, errSyntax
	}
	return bgsaveCmd{}, nil
}

// bgsaveCmd is BGSAVE [SCHEDULE].
type bgsaveCmd struct{}

// Run implements Runner.
func (bgsaveCmd) Run(x *Ctx) error {
	if err := x.BackgroundSave(); err != nil {
		return err
	}
	x.W.Simple("Background saving started")
	return nil
}

func parseLastsave(a Args) (Runner, error) {
	return lastsaveCmd{}, nil
}

// lastsaveCmd is LASTSAVE.
type lastsaveCmd struct{}

// Run implements Runner.
func (lastsaveCmd) Run(x *Ctx) error {
	x.W.Int(x.Snapshot.lastSave.Load())
	return nil
}

// saveRulesSet reports whether `save` rules are set and snapshots can be
// written (a seal key).
func (s *App) saveRulesSet() bool {
	rules, err := config.ParseSaveRules(*s.Opts.Save.Load())
	return err == nil && len(rules) > 0 && len(s.Snapshot.SealKey) > 0
}

// saveRetryDelay is how long, in seconds, the save rules wait after a
// failed save before they try again, as Redis's CONFIG_BGSAVE_RETRY_DELAY:
// they retried at every tick, ten a second, and each attempt on a full
// disk filled it again before it was removed (durability review: 97 failed
// saves in 10 s against Redis's 2).
const saveRetryDelay = 5

// saveRulesDue reports whether a `save` rule asks for a snapshot now.
func (s *App) saveRulesDue(now int64) bool {
	rules, err := config.ParseSaveRules(*s.Opts.Save.Load())
	if err != nil || len(rules) == 0 || len(s.Snapshot.SealKey) == 0 {
		return false
	}
	if !s.Snapshot.lastStatus.Load() && now-s.Snapshot.lastTry.Load() <= saveRetryDelay {
		return false
	}
	dirty := s.Keys.Dirty()
	last := s.Snapshot.lastSave.Load()
	if last == 0 {
		last = s.started.Unix()
	}
	for _, r := range rules {
		if dirty >= r.Changes && now-last >= r.Seconds {
			return true
		}
	}
	return false
}

func persistenceInfo(s *App) [][2]string {
	sn := &s.Snapshot
	status := "ok"
	if !sn.lastStatus.Load() {
		status = "err"
	}
	return [][2]string{
		{"loading", itoa(b2i(s.loading.Load()))},
		{"rdb_changes_since_last_save", itoa(s.Keys.Dirty())},
		{"rdb_bgsave_in_progress", itoa(b2i(sn.writing.Load() > 0))},
		{"rdb_last_save_time", itoa(sn.lastSave.Load())},
		{"rdb_last_bgsave_status", status},
		{"rdb_last_bgsave_time_sec", itoa(sn.lastSecs.Load())},
		{"rdb_saves", itoa(sn.saves.Load())},
		{"rdb_filename", s.snapshotPath()},
	}
}

// snapshotLoader builds a fresh keyspace from a snapshot; models are
// compiled as they arrive. Nothing is swapped in unless the whole file
// verifies.
type snapshotLoader struct {
	s     *App
	items []modelstore.Item
	log   func(done, total int64)
	// bufs are the model buffers the blobs were read into (AllocBlob), by
	// their first byte; the loader holds one reference each until release.
	bufs map[*byte]*loadedBlob
}

// loadedBlob is a blob read into a model buffer.
type loadedBlob struct {
	buf    *modelstore.ModelBuffer
	sealed bool // Filled and sealed, once its first model takes it
}

// AllocBlob implements persistence.BlobAllocator: each blob is read into a
// model buffer that its models' blobs and sessions then share, so a model
// is held once, not read into Go memory and copied for the engine.
func (l *snapshotLoader) AllocBlob(n int64) ([]byte, error) {
	if n == 0 {
		return []byte{}, nil
	}
	buf, err := modelstore.NewModelBuffer(n, n)
	if err != nil {
		return nil, err
	}
	dst, err := buf.Extend(n)
	if err != nil {
		buf.Unref()
		return nil, err
	}
	if l.bufs == nil {
		l.bufs = map[*byte]*loadedBlob{}
	}
	l.bufs[&dst[0]] = &loadedBlob{buf: buf}
	return dst, nil
}

// model compiles a model record, from the model buffer its blob was read
// into when there is one.
func (l *snapshotLoader) model(r persistence.ModelRecord, blob []byte) (*modelstore.Model, error) {
	var lb *loadedBlob
	if len(blob) > 0 {
		lb = l.bufs[&blob[0]]
	}
	if lb == nil {
		return l.s.modelFromRecord(r, blob)
	}
	if !lb.sealed {
		lb.buf.Filled(len(blob))
		lb.buf.Seal()
		lb.sealed = true
	}
	return l.s.modelFromBuffer(r, lb.buf)
}

// release drops the loader's references to the buffers (the blobs that
// use them hold their own).
func (l *snapshotLoader) release() {
	for _, lb := range l.bufs {
		lb.buf.Unref()
	}
	l.bufs = nil
}

func (l *snapshotLoader) Tensor(r persistence.TensorRecord) error {
	t, err := modelstore.NewTensorFromBlob(modelstore.DType(r.DType), r.Shape, r.Data)
	if err != nil {
		return fmt.Errorf("tensor %q: %w", r.Key, err)
	}
	t.Owner = r.Owner
	l.items = append(l.items, modelstore.Item{Key: r.Key, Value: t, ExpireAt: r.ExpireAtUnixMs})
	return nil
}

func (l *snapshotLoader) Model(r persistence.ModelRecord, blob []byte) error {
	m, err := l.model(r, blob)
	if err != nil {
		return err
	}
	l.items = append(l.items, modelstore.Item{Key: r.Key, Value: m, ExpireAt: r.ExpireAtUnixMs})
	return nil
}

// modelFromRecord compiles a model loaded from disk. The loader verified
// the blob's digest (r.BlobSHA256): the blob takes it as is.
func (s *App) modelFromRecord(r persistence.ModelRecord, blob []byte) (*modelstore.Model, error) {
	return s.modelFrom(r, blob, nil)
}

// modelFromBuffer is modelFromRecord for a model read into buf (the log's
// model files): the blob and its session share buf. Without
// r.BlobSHA256 (a model file named by an id) the blob computes its digest.
func (s *App) modelFromBuffer(r persistence.ModelRecord, buf *modelstore.ModelBuffer) (*modelstore.Model, error) {
	return s.modelFrom(r, buf.Bytes(), buf)
}

func (s *App) modelFrom(r persistence.ModelRecord, blob []byte, buf *modelstore.ModelBuffer) (*modelstore.Model, error) {
	opts := modelstore.SessionOptions{Optimize: r.Optimize,
		IntraOpThreads: int(s.AI.IntraOpParallelism.Load()), InterOpThreads: int(s.AI.InterOpParallelism.Load())}
	from := modelstore.Origin{Owner: r.Owner, Key: r.Key, Loaded: true}
	var b *modelstore.Blob
	var err error
	switch {
	case r.BlobSHA256 == nil && buf != nil: // a model file named by an id
		b, err = s.Models.AcquireBuffer(buf, from, opts, nil)
	case r.BlobSHA256 == nil:
		b, err = s.Models.AcquireIfRoom(blob, from, opts, nil)
	case buf != nil:
		b, err = s.Models.AcquireBufferVerified(buf, *r.BlobSHA256, from, opts, nil)
	default:
		b, err = s.Models.AcquireVerified(blob, *r.BlobSHA256, from, opts)
	}
	if err != nil {
		return nil, fmt.Errorf("model %q: %w", r.Key, err)
	}
	return modelstore.NewModel(modelstore.ModelMeta{Backend: r.Backend, Device: r.Device, Tag: r.Tag,
		BatchSize: int64(r.BatchSize), MinBatchSize: int64(r.MinBatchSize), MinBatchTimeout: int64(r.MinBatchTimeoutMs),
		ID: r.ID, Created: time.UnixMilli(r.CreatedUnixMs), Owner: r.Owner}, b), nil
}

func (l *snapshotLoader) Progress(done, total int64) { l.log(done, total) }

// SaveRulesConfigured reports whether `save` rules exist; SHUTDOWN and
// SIGTERM then save by default, as Redis does.
func (s *App) SaveRulesConfigured() bool {
	rules, err := config.ParseSaveRules(*s.Opts.Save.Load())
	return err == nil && len(rules) > 0 && len(s.Snapshot.SealKey) > 0
}

// snapshotValueBound is the largest tensor or model a snapshot may hold
// when it is read (persistence.LoadFile checks each size against it before
// allocating): the largest of the limits that bound a value when it is
// written, so that a tensor over max-model-size (proto-max-bulk-len bounds
// tensors) no longer stops the start. A value over all three as they are
// now is refused (ErrTooLarge gives the limit): raised, the start loads it.
func (s *App) snapshotValueBound() int64 {
	return max(s.Opts.MaxModelSize.Load(), s.Opts.ProtoMaxBulkLen.Load(), s.Opts.ClientQueryBufferLimit.Load())
}

// LoadSnapshot loads <dir>/<dbfilename> if it exists. A bad snapshot stops
// the start with an error naming the file and the reason, unless
// load-bad-snapshot is set: then the file is moved aside (never
// overwritten) and the server starts empty.
func (s *App) LoadSnapshot() error {
	// As in Redis, the data a server starts with counts as saved at start:
	// LASTSAVE and rdb_last_save_time are never 0.
	s.Snapshot.lastSave.CompareAndSwap(0, s.started.Unix())
	path := s.snapshotPath()
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	start := time.Now()
	lastLog := start
	l := &snapshotLoader{s: s, log: func(done, total int64) {
		if time.Since(lastLog) > time.Second {
			lastLog = time.Now()
			s.Log.Info("loading snapshot", "file", path, "done_bytes", done, "total_bytes", total)
		}
	}}
	err := persistence.LoadFile(path, s.Snapshot.SealKey, s.snapshotValueBound(), l)
	l.release()
	if err != nil {
		s.Release(itemValues(l.items))
		if !s.Opts.LoadBadSnapshot {
			return fmt.Errorf("snapshot %s cannot be loaded: %w (start with --load-bad-snapshot yes to move it aside and start empty)", path, err)
		}
		aside := fmt.Sprintf("%s.bad-%d", path, time.Now().Unix())
		if rerr := os.Rename(path, aside); rerr != nil {
			return fmt.Errorf("snapshot %s cannot be loaded (%v) nor moved aside: %w", path, err, rerr)
		}
		s.Log.Warn("snapshot could not be loaded: moved aside, starting empty", "file", path, "moved_to", aside, "err", err)
		return nil
	}
	s.Release(s.Keys.Replace(l.items))
	s.Snapshot.lastSave.Store(time.Now().Unix())
	s.Log.Info("snapshot loaded", "file", path, "keys", len(l.items), "seconds", time.Since(start).Seconds())
	return nil
}

func itemValues(items []modelstore.Item) []modelstore.Value {
	out := make([]modelstore.Value, len(items))
	for i, it := range items {
		out[i] = it.Value
	}
	return out
}
