package commands

import (
	"cmp"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/enclaveai/enclaveai/modelstore"
	"github.com/enclaveai/enclaveai/persistence"
)

// The sealed append-only log (docs/DURABILITY.md): with `appendonly yes`
// (the default) every change to the keyspace is queued, in keyspace order,
// through a modelstore.Journal, and the dispatcher commits the log before a
// write's reply leaves (run): write(2) under everysec and no, write(2) and
// fsync under always. Model bytes go to sealed model files that MODEL
// records name: by the model's SHA-256 for a file written while the model
// compiles (compileModel), by a random id for a large upload's file written
// as it arrives (modelStream). BGREWRITEAOF and the auto-aof-rewrite rules
// replace the log by a base holding the keyspace plus a fresh incr file.
func init() {
	register(&Spec{Name: "bgrewriteaof", Arity: 1, Flags: Admin | NoTxLock, Group: "server",
		Summary: "Rewrites the append-only log in the background.", Parse: parseBgrewriteaof})
}

// aofState is the log's state beside the persistence.Log.
type aofState struct {
	// mu orders a rewrite's start against CloseLog: closing is set, and a
	// rewrite started (done made), under it.
	mu      sync.Mutex
	closing atomic.Bool   // CloseLog has begun: no rewrite starts, one under way stops
	done    chan struct{} // closed when the rewrite started last has ended

	rewriting      atomic.Bool
	rewriteOK      atomic.Bool // the last rewrite's status
	rewrites       atomic.Int64
	lastRewriteSec atomic.Int64
	rewriteStart   atomic.Int64 // unix ms of the rewrite in progress
	syncing        atomic.Bool  // an everysec fsync is running
	lastSync       atomic.Int64 // unix ms of the last everysec fsync started
	lastRetry      atomic.Int64 // unix ms of the last recovery attempt
	delayedFsync   atomic.Int64
	// failures counts the rewrites that failed in a row; past
	// rewriteFailuresFree of them, the automatic ones wait until
	// limitedUntil (unix ms): rewriteFailed.
	failures     atomic.Int64
	limitedUntil atomic.Int64
}

// After rewriteFailuresFree rewrites failed in a row, the automatic ones
// (auto-aof-rewrite-percentage, and the rewrite that mends a broken file)
// wait a minute, then twice as long after each further failure, up to an
// hour, as Redis 7's aofRewriteLimited. They began again at every tick
// and every second: on a full disk each rewrite's half-written base took
// the room the appends needed (durability review: 554 of 914 writes
// refused with MISCONF in 10 s, none without the rewrites), and each left
// an incr file in the manifest. BGREWRITEAOF is never held back.
const (
	rewriteFailuresFree = 3
	rewriteDelayFirst   = 60_000    // ms
	rewriteDelayMax     = 3_600_000 // ms
)

// rewriteFailed counts a failed rewrite at nowMs and sets how long the
// automatic ones wait.
func (st *aofState) rewriteFailed(nowMs int64) {
	n := st.failures.Add(1)
	if n < rewriteFailuresFree {
		return
	}
	delay := int64(rewriteDelayFirst)
	for i := int64(rewriteFailuresFree); i < n && delay < rewriteDelayMax; i++ {
		delay *= 2
	}
	st.limitedUntil.Store(nowMs + min(delay, rewriteDelayMax))
}

// autoRewriteHeld reports whether automatic rewrites wait at nowMs.
func (st *aofState) autoRewriteHeld(nowMs int64) bool { return nowMs < st.limitedUntil.Load() }

// ErrRewriteInProgress answers BGREWRITEAOF while one runs.
var ErrRewriteInProgress = Reply("ERR Background append only file rewriting already in progress")

// errLogOff answers BGREWRITEAOF with appendonly no.
var errLogOff = Reply("ERR the append-only log is off (appendonly no)")

// misconf is the reply to writes while the log or the snapshot cannot be written.
func misconf(err error) Reply {
	return Reply("MISCONF Errors writing to the AOF file: " + errCause(err))
}

// errCause is the root of an error chain, as strerror would say it
// (no space left on device, input/output error): no paths.
func errCause(err error) string {
	for {
		u := errors.Unwrap(err)
		if u == nil {
			return err.Error()
		}
		err = u
	}
}

// persistErr is why writes are refused now: the log cannot be written, or
// a save rule's snapshot failed. Nil when writes may go ahead.
func (s *App) persistErr() error {
	if l := s.aof(); l != nil {
		if err := l.Err(); err != nil {
			return misconf(err)
		}
	}
	if !s.Snapshot.lastStatus.Load() && s.SaveRulesConfigured() {
		return Reply("MISCONF Errors writing the sealed snapshot: " + s.Snapshot.lastErr() +
			". Writes are refused until a snapshot succeeds (see the server log)")
	}
	return nil
}

// CommitClient commits the log records that c's pending replies wait
// for; the front end calls it before it sends them, so that one commit
// covers a whole pipeline. If the log cannot be written, every reply from
// the first write's on is replaced by -MISCONF: those changes are in memory
// and stay queued for the log, but none is acknowledged (nor is any reply
// that followed them); the error is returned.
func (s *App) CommitClient(c *Client) error {
	if c.logSeq == 0 {
		return nil
	}
	err := s.aof().Commit(c.logSeq)
	if err != nil {
		err = misconf(err)
		c.W.truncate(c.logMark)
		for range c.logReplies {
			s.replyError(c.W, err)
		}
	}
	c.logSeq, c.logReplies = 0, 0
	return err
}

// journal adapts keyspace changes to log records. Its methods run under
// the keyspace lock and only queue.
type journal struct{ log *persistence.Log }

func (j journal) Set(key string, v modelstore.Value) {
	switch v := v.(type) {
	case *modelstore.Tensor:
		// The record holds the tensor's data until the log encodes it.
		v.Hold()
		j.log.Append(persistence.Op{Tensor: tensorRecord(key, v, 0), Held: v})
	case *modelstore.Model:
		if rec, ok := modelRecord(key, v, 0); ok {
			j.log.Append(persistence.Op{Model: rec})
		} else {
			// Not persisted (NOPERSIST): whatever the key held is gone.
			j.log.Append(persistence.Op{Del: key})
		}
	}
}

func (j journal) Delete(key string) { j.log.Append(persistence.Op{Del: key}) }

func (j journal) Expire(key string, at int64) {
	j.log.Append(persistence.Op{Expire: &persistence.ExpireOp{Key: key, AtUnixMs: at}})
}

func (j journal) Rename(src, dst string) {
	j.log.Append(persistence.Op{Rename: &[2]string{src, dst}})
}

func (j journal) Flush() { j.log.Append(persistence.Op{Flush: true}) }

// Check refuses a value whose record the log could not hold
// (persistence.Loggable): a tensor whose record passes a frame's 4 GiB, a
// key over 512 MiB (proto-max-bulk-len allows both).
func (j journal) Check(key string, v modelstore.Value) error {
	switch v := v.(type) {
	case *modelstore.Tensor:
		// On the stack: every AI.TENSORSET asks.
		rec := persistence.TensorRecord{Key: key, Owner: v.Owner, Shape: v.Shape, Data: v.Data}
		return persistence.Loggable(persistence.Op{Tensor: &rec})
	case *modelstore.Model:
		if rec, ok := modelRecord(key, v, 0); ok {
			return persistence.Loggable(persistence.Op{Model: rec})
		}
		return persistence.Loggable(persistence.Op{Del: key})
	}
	return nil
}

func (j journal) Begin() { j.log.BeginUnit() }

func (j journal) End() { j.log.EndUnit() }

func tensorRecord(key string, t *modelstore.Tensor, expireAt int64) *persistence.TensorRecord {
	return &persistence.TensorRecord{Key: key, Owner: t.Owner, ExpireAtUnixMs: expireAt,
		DType: uint8(t.DType), Shape: t.Shape, Data: t.Data}
}

// modelRecord is m's MODEL record; false for a model that is not
// persisted. It does not wait: a model names its model file by an id of
// its own (LogFile), or else compileModel waited for the digest before the
// model could reach the keyspace, and loaded models come with theirs.
func modelRecord(key string, m *modelstore.Model, expireAt int64) (*persistence.LogModel, bool) {
	file, digest, ok := modelFileOf(m)
	if !ok {
		return nil, false
	}
	return &persistence.LogModel{ModelRecord: persistence.ModelRecord{Key: key, ExpireAtUnixMs: expireAt,
		Backend: m.Backend, Device: m.Device, Tag: m.Tag, BatchSize: uint32(m.BatchSize),
		MinBatchSize: uint32(m.MinBatchSize), MinBatchTimeoutMs: uint64(m.MinBatchTimeout),
		Optimize: m.Blob.Opts.Optimize, ID: m.ID, CreatedUnixMs: m.Created.UnixMilli(), Owner: m.Owner},
		File: file, Digest: digest, Size: int64(len(m.Blob.Data))}, true
}

// dropUnstored releases a compiled model that will not be stored after
// all, and gives up the claim on its model file (persistence.Log.Unclaim),
// which a later rewrite then removes unless a record names it.
func (x *Ctx) dropUnstored(m *modelstore.Model) {
	if l := x.aof(); l != nil {
		if file, _, ok := modelFileOf(m); ok {
			l.Unclaim(file)
		}
	}
	m.Release()
}

// modelFileOf is the LogModel.File naming m's model file, and whether it is
// the model's SHA-256; false for a model that is not persisted.
func modelFileOf(m *modelstore.Model) (file [32]byte, digest, ok bool) {
	if m.NoPersist {
		return file, false, false
	}
	if m.LogFile != nil {
		return *m.LogFile, false, true
	}
	file, ok = m.Blob.SHA256()
	return file, true, ok
}

// baseSource yields the records of a base holding items.
func baseSource(items []modelstore.Item) func(yield func(persistence.Op) error) error {
	return func(yield func(persistence.Op) error) error {
		for _, it := range items {
			var op persistence.Op
			switch v := it.Value.(type) {
			case *modelstore.Tensor:
				op.Tensor = tensorRecord(it.Key, v, it.ExpireAt)
			case *modelstore.Model:
				rec, ok := modelRecord(it.Key, v, it.ExpireAt)
				if !ok {
					continue
				}
				op.Model = rec
			default:
				continue
			}
			if err := yield(op); err != nil {
				return err
			}
		}
		return nil
	}
}

// modelFile seals a model's bytes into its file in the background, while
// the model compiles.
type modelFile struct {
	w     *persistence.ModelWriter
	stop  atomic.Bool
	done  chan error
	start time.Time
}

// startModelFile begins writing data's model file; nil without a log or
// for a model that is not persisted.
func (x *Ctx) startModelFile(data []byte, noPersist bool) (*modelFile, error) {
	l := x.aof()
	if l == nil || noPersist {
		return nil, nil
	}
	w, err := l.NewModelWriter()
	if err != nil {
		l.NoteError(err)
		return nil, misconf(err)
	}
	mf := &modelFile{w: w, done: make(chan error, 1), start: time.Now()}
	go func() {
		for len(data) > 0 && !mf.stop.Load() {
			k := min(len(data), 4<<20)
			if _, err := w.Write(data[:k]); err != nil {
				mf.done <- err
				return
			}
			data = data[k:]
		}
		mf.done <- nil
	}()
	return mf, nil
}

// abort stops the writing and removes the file; the bytes are no longer read.
func (mf *modelFile) abort() {
	if mf == nil {
		return
	}
	mf.stop.Store(true)
	<-mf.done
	mf.w.Abort()
}

// finish waits for the bytes and the blob's digest, and puts the file in place.
func (mf *modelFile) finish(x *Ctx, b *modelstore.Blob) error {
	if mf == nil {
		return nil
	}
	if err := <-mf.done; err != nil {
		mf.w.Abort()
		x.aof().NoteError(err)
		return misconf(err)
	}
	sum, ok := b.SHA256()
	if !ok {
		mf.w.Abort()
		return errors.New("model digest unavailable")
	}
	if err := mf.w.Finish(sum); err != nil {
		return misconf(err)
	}
	return nil
}

// modelStream is a large upload's model file, sealed and written as the
// upload's buffer fills: once the last byte is in, only the tail is left
// to seal. The file is named by a random id (LogModel.File), not by the
// model's SHA-256, so that the upload is acknowledged without waiting for
// the digest, which the blob computes afterwards as it does without a log
// (0.6 s a GB, and the CPU the upload's socket reads need on a small
// machine). Its Stretch runs on the buffer's fingerprinting goroutine (a
// modelstore.Tap) and only queues; the sealing and writing run on a
// goroutine of their own, so that the file's writes, which wait for the
// disk, hold up neither the fingerprint nor the socket reads.
type modelStream struct {
	l    *persistence.Log
	ch   chan []byte   // stretches for write; nil until the first
	stop atomic.Bool   // End(false): write stops reading the buffer
	out  chan struct{} // closed when write returns
	once sync.Once
	done chan struct{}
	ok   bool // every byte went into the file (set before done closes)
	// Owned by write until out closes.
	w   *persistence.ModelWriter // created by the first stretch
	err error
}

// tapUpload makes a large upload's buffer write its model file as it
// fills (Upload.NewBuffer).
func (s *App) tapUpload(buf *modelstore.ModelBuffer) {
	if l := s.aof(); l != nil {
		buf.SetTap(&modelStream{l: l, done: make(chan struct{})})
	}
}

// streamPiece is how much write seals and writes between checks for a stop.
const streamPiece = 4 << 20

// Stretch implements modelstore.Tap.
func (m *modelStream) Stretch(p []byte) {
	if m.ch == nil {
		// The stretches are views of the buffer, not copies: a deep queue
		// costs no memory.
		m.ch = make(chan []byte, 256)
		m.out = make(chan struct{})
		go m.write()
	}
	m.ch <- p
}

// write seals and writes the stretches, in order, into the model file.
func (m *modelStream) write() {
	defer close(m.out)
	for p := range m.ch {
		for len(p) > 0 && m.err == nil && !m.stop.Load() {
			if m.w == nil {
				if m.w, m.err = m.l.NewModelWriter(); m.err != nil {
					break
				}
			}
			k := min(len(p), streamPiece)
			_, m.err = m.w.Write(p[:k])
			p = p[k:]
		}
	}
}

// End implements modelstore.Tap. It returns once write no longer reads
// the buffer.
func (m *modelStream) End(complete bool) {
	m.once.Do(func() {
		if m.ch != nil {
			if !complete {
				m.stop.Store(true)
			}
			close(m.ch)
			<-m.out
		}
		m.ok = complete && m.err == nil && m.w != nil
		if !m.ok && m.w != nil {
			m.w.Abort()
		}
		close(m.done)
	})
}

// complete waits for the stream's end: true if the file holds every byte,
// false if the caller must write the file itself.
func (m *modelStream) complete() bool {
	<-m.done
	return m.ok
}

// finish puts the file in place under a new random id, which it returns
// for the model's LogFile; abort drops the file.
func (m *modelStream) finish() (*[32]byte, error) {
	id := new([32]byte)
	rand.Read(id[:])
	if err := m.w.Finish(*id); err != nil {
		return nil, misconf(err)
	}
	return id, nil
}

func (m *modelStream) abort() {
	if m.complete() {
		m.w.Abort()
	}
}

// streamedModelFile returns buf's model stream once it has every byte
// (ending the fingerprint, which the registry would end anyway), or nil.
func (x *Ctx) streamedModelFile(buf *modelstore.ModelBuffer, noPersist bool) *modelStream {
	m, ok := buf.Tap().(*modelStream)
	if !ok || x.aof() == nil {
		return nil
	}
	buf.Fingerprint()
	if !m.complete() {
		return nil
	}
	if noPersist {
		m.w.Abort()
		return nil
	}
	return m
}

func parseBgrewriteaof(a Args) (Runner, error) {
	return bgrewriteaofCmd{}, nil
}

// bgrewriteaofCmd is BGREWRITEAOF.
type bgrewriteaofCmd struct{}

// Run implements Runner.
func (bgrewriteaofCmd) Run(x *Ctx) error {
	if x.aof() == nil {
		return errLogOff
	}
	if !x.startRewrite() {
		return ErrRewriteInProgress
	}
	x.W.Simple("Background append only file rewriting started")
	return nil
}

// startRewrite starts rewriteLog in the background, unless a rewrite is
// under way or the log is being closed.
func (s *App) startRewrite() bool {
	st := &s.aofState
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.closing.Load() || !st.rewriting.CompareAndSwap(false, true) {
		return false
	}
	done := make(chan struct{})
	st.done = done
	go func() {
		defer close(done)
		s.rewriteLog()
	}()
	return true
}

// errRewriteStopped ends a rewrite that CloseLog stopped.
var errRewriteStopped = errors.New("the append-only log rewrite stopped: the log is closing")

// rewriteLog replaces the log by a base holding the keyspace and a fresh
// incr file. The caller has set aofState.rewriting (startRewrite).
func (s *App) rewriteLog() error {
	st := &s.aofState
	defer st.rewriting.Store(false)
	start := time.Now()
	st.rewriteStart.Store(start.UnixMilli())
	err := s.rewriteLogNow()
	st.lastRewriteSec.Store(int64(time.Since(start).Seconds()))
	st.rewriteOK.Store(err == nil)
	if errors.Is(err, errRewriteStopped) || errors.Is(err, persistence.ErrLogClosed) {
		s.Log.Info("append-only log rewrite abandoned at shutdown: the log stays as it was")
		return err
	}
	if err != nil {
		st.rewriteFailed(time.Now().UnixMilli())
		s.Log.Error("append-only log rewrite failed", "err", err, "failures_in_a_row", st.failures.Load())
		return err
	}
	st.failures.Store(0)
	st.limitedUntil.Store(0)
	st.rewrites.Add(1)
	s.Log.Info("append-only log rewritten", "seconds", time.Since(start).Seconds(), "bytes", s.aof().Size())
	return nil
}

func (s *App) rewriteLogNow() error {
	l := s.aof()
	cut, err := l.BeginRewrite()
	if err != nil {
		if !errors.Is(err, persistence.ErrCutWaiting) { // the write error stays the one to report
			l.NoteError(err)
		}
		return err
	}
	// Under the write side of the transaction lock, as EXEC: the cut
	// never falls inside a transaction, whose records are one atomic unit
	// of the log (persistence.Log.BeginUnit), and a base holding half of
	// one would bring that half back if the rest were lost.
	s.tx.Lock()
	items := s.Keys.Cut(retainBlob, func() { l.Append(cut) })
	s.tx.Unlock()
	defer s.releaseItems(items)
	live := map[[32]byte]bool{}
	for _, it := range items {
		if m, ok := it.Value.(*modelstore.Model); ok {
			if file, _, ok := modelFileOf(m); ok {
				live[file] = true
			}
		}
	}
	src := baseSource(items)
	return l.FinishRewrite(cut, func(yield func(persistence.Op) error) error {
		return src(func(op persistence.Op) error {
			if s.aofState.closing.Load() {
				return errRewriteStopped // what is written so far is removed
			}
			return yield(op)
		})
	}, live)
}

func retainBlob(v modelstore.Value) {
	if m, ok := v.(*modelstore.Model); ok {
		m.Blob.Retain()
	}
}

// applyFsyncPolicy gives the log appendfsync as configured now. CONFIG
// SET runs it before its OK, so that a write after it is fsynced as
// `always` says, not only from the next tick on (durability review: up
// to three writes after the OK were acknowledged unsynced).
func (s *App) applyFsyncPolicy(l *persistence.Log) {
	p, err := persistence.ParseFsyncPolicy(*s.Opts.AppendFsync.Load())
	if err != nil {
		return
	}
	l.SetPolicy(p)
	if p == persistence.FsyncAlways && l.Fsynced() < l.Written() && l.Err() == nil {
		// Records written under another policy are fsynced now, as
		// Redis's always does, not at the next write: a WAITAOF for them
		// would wait for another client's (diff review).
		l.SyncEverysec()
	}
}

// maxIncrFiles is how many incr files the log may name before a rewrite
// folds them into a base: each start that cuts a torn tail adds one, and
// below auto-aof-rewrite-min-size nothing else rewrote the log (durability
// review: 40 crashes left 41 incr files).
const maxIncrFiles = 8

// aofTick runs from Tick: the everysec fsync, recovery after a write
// error, the auto-aof-rewrite rule, and (unless auto-aof-rewrite-percentage
// is 0) a rewrite once the incr files are more than maxIncrFiles.
func (s *App) aofTick(nowMs int64) {
	l, st := s.aof(), &s.aofState
	s.applyFsyncPolicy(l)
	if l.Err() != nil {
		if nowMs-st.lastRetry.Load() >= 1000 {
			st.lastRetry.Store(nowMs)
			if l.Flush() != nil && !st.autoRewriteHeld(nowMs) {
				s.startRewrite() // a broken file is only mended by a new one
			}
		}
		return
	}
	if l.Policy() == persistence.FsyncEverysec && nowMs-st.lastSync.Load() >= 1000 {
		if st.syncing.CompareAndSwap(false, true) {
			st.lastSync.Store(nowMs)
			go func() {
				defer st.syncing.Store(false)
				if err := l.SyncEverysec(); err != nil {
					s.Log.Error("append-only log fsync failed", "err", err)
				}
			}()
		} else {
			st.delayedFsync.Add(1)
		}
	}
	pct, minSize := s.Opts.AutoAOFRewritePercentage.Load(), s.Opts.AutoAOFRewriteMinSize.Load()
	base, size := l.BaseSize(), l.Size()
	grown := pct > 0 && size >= minSize && base > 0 && (size-base)*100/base >= pct
	if (grown || pct > 0 && l.IncrFiles() > maxIncrFiles) && !st.autoRewriteHeld(nowMs) {
		if !st.rewriting.Load() && s.startRewrite() {
			s.Log.Info("starting automatic rewrite of the append-only log", "size", size, "base_size", base)
		}
	}
}

// CloseLog writes, fsyncs and closes the log (at shutdown). A rewrite
// under way is stopped first and waited for, as Redis kills its rewriting
// child: it stops at its next record, and the log stays as it was before
// it (its old files, then the cut's incr file). Closed under it, the log
// was read by a rewrite ending after it (a nil dereference at SHUTDOWN
// during BGREWRITEAOF: concurrency review).
func (s *App) CloseLog() {
	st := &s.aofState
	st.mu.Lock()
	st.closing.Store(true)
	done := st.done
	st.mu.Unlock()
	if done != nil {
		<-done
	}
	if l := s.aof(); l != nil {
		s.Keys.SetJournal(nil)
		if err := l.Close(); err != nil {
			s.Log.Error("closing the append-only log", "err", err)
		}
	}
}

func aofInfo(s *App) [][2]string {
	l := s.aof()
	if l == nil {
		// As Redis with appendonly no: the rewrite and write fields are
		// there, at rest (operator review: tools found only aof_enabled).
		return [][2]string{
			{"aof_enabled", "0"}, {"aof_rewrite_in_progress", "0"}, {"aof_rewrite_scheduled", "0"},
			{"aof_last_rewrite_time_sec", "-1"}, {"aof_current_rewrite_time_sec", "-1"},
			{"aof_last_bgrewrite_status", "ok"}, {"aof_rewrites", "0"}, {"aof_rewrites_consecutive_failures", "0"},
			{"aof_last_write_status", "ok"},
		}
	}
	st := &s.aofState
	status := func(ok bool) string {
		if ok {
			return "ok"
		}
		return "err"
	}
	cur := int64(-1)
	if st.rewriting.Load() {
		cur = (time.Now().UnixMilli() - st.rewriteStart.Load()) / 1000
	}
	last := int64(-1)
	if st.rewrites.Load() > 0 || !st.rewriteOK.Load() {
		last = st.lastRewriteSec.Load()
	}
	return [][2]string{
		{"aof_enabled", "1"},
		{"aof_rewrite_in_progress", itoa(b2i(st.rewriting.Load()))},
		{"aof_rewrite_scheduled", "0"},
		{"aof_last_rewrite_time_sec", itoa(last)},
		{"aof_current_rewrite_time_sec", itoa(cur)},
		{"aof_last_bgrewrite_status", status(st.rewriteOK.Load())},
		{"aof_rewrites", itoa(st.rewrites.Load())},
		{"aof_rewrites_consecutive_failures", itoa(st.failures.Load())},
		{"aof_last_write_status", status(l.Err() == nil)},
		{"aof_current_size", itoa(l.Size())},
		{"aof_base_size", itoa(l.BaseSize())},
		{"aof_pending_rewrite", "0"},
		{"aof_buffer_length", itoa(int64(l.Seq() - l.Written()))},
		{"aof_pending_bio_fsync", itoa(b2i(st.syncing.Load()))},
		{"aof_delayed_fsync", itoa(st.delayedFsync.Load())},
		{"aof_fsync", l.Policy().String()},
	}
}

// ---- loading ----

// LoadData loads what the server starts with: the append-only log if
// appendonly is on and a log exists, else the snapshot (then, with
// appendonly on, a new log starts from it). The log then records every
// change from this point on.
func (s *App) LoadData() error {
	if !s.Opts.AppendOnly {
		return s.LoadSnapshot()
	}
	if len(s.Snapshot.SealKey) == 0 {
		return errors.New("appendonly yes needs a seal key")
	}
	dir := filepath.Join(s.Opts.Dir, s.Opts.AppendDirName)
	l, err := persistence.OpenLog(persistence.LogOptions{Dir: dir, SealKey: s.Snapshot.SealKey,
		FS: s.LogFS, Busy: modelstore.Busy})
	if err != nil {
		return err
	}
	if p, err := persistence.ParseFsyncPolicy(*s.Opts.AppendFsync.Load()); err == nil {
		l.SetPolicy(p)
	}
	s.Snapshot.lastSave.CompareAndSwap(0, s.started.Unix())
	if l.Exists() {
		if l, err = s.replayLog(l, dir); err != nil {
			return err
		}
	} else {
		if err := s.LoadSnapshot(); err != nil {
			return err
		}
		if err := s.createLog(l); err != nil {
			return err
		}
	}
	s.aofState.rewriteOK.Store(true)
	s.aofLog.Store(l)
	s.Keys.SetJournal(journal{l})
	return nil
}

// createLog starts a log whose base is the keyspace (a loaded snapshot or
// nothing), writing the model files it needs.
func (s *App) createLog(l *persistence.Log) error {
	items := s.retainItems()
	defer s.releaseItems(items)
	var claimed [][32]byte
	for _, it := range items {
		m, ok := it.Value.(*modelstore.Model)
		if !ok {
			continue
		}
		file, _, ok := modelFileOf(m)
		if !ok || l.HasModel(file) {
			continue
		}
		w, err := l.NewModelWriter()
		if err == nil {
			if _, err = w.Write(m.Blob.Data); err != nil {
				w.Abort()
			} else if err = w.Finish(file); err == nil {
				claimed = append(claimed, file)
			}
		}
		if err != nil {
			return fmt.Errorf("append-only log: writing model file: %w", err)
		}
	}
	err := l.Create(baseSource(items))
	for _, file := range claimed {
		l.Unclaim(file) // the base names them, or nothing will
	}
	if err != nil {
		return err
	}
	s.Log.Info("append-only log created", "dir", filepath.Join(s.Opts.Dir, s.Opts.AppendDirName), "keys", len(items))
	return nil
}

// replayLog loads the keyspace from the log. A bad log stops the start
// unless load-bad-snapshot is set: then its directory is moved aside and
// a new log starts from the snapshot, if any.
func (s *App) replayLog(l *persistence.Log, dir string) (*persistence.Log, error) {
	start := time.Now()
	ld := &logLoader{s: s, l: l, keys: map[string]*logEntry{}}
	info, err := l.Replay(ld, s.Opts.AOFLoadTruncated)
	var items []modelstore.Item
	compiled := false
	if err == nil {
		items, err = ld.items()
		compiled = err != nil
	}
	if err != nil {
		s.Release(itemValues(items))
		if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
			// The log is sound: a start that cuts a torn tail opens a new
			// incr file, which a full disk refuses. Moved aside, a sound
			// log was lost (durability review: the hint said to).
			return nil, fmt.Errorf("append-only log %s cannot be started: %w (the log is intact: free space on its disk and start again; --load-bad-snapshot does not apply)", dir, err)
		}
		if !s.Opts.LoadBadSnapshot {
			if compiled {
				// The log is sound: what failed is a model's compile,
				// which a setting may cause (durability review: the hint
				// offered only to move the whole log aside).
				return nil, fmt.Errorf("append-only log %s cannot be loaded: %w (the log is intact but a model in it did not compile: with engine workers, engine-worker-memory may be too small for it; --load-bad-snapshot yes would move the whole log aside and start from the snapshot)", dir, err)
			}
			return nil, fmt.Errorf("append-only log %s cannot be loaded: %w (start with --load-bad-snapshot yes to move it aside and start from the snapshot)", dir, err)
		}
		aside := fmt.Sprintf("%s.bad-%d", dir, time.Now().Unix())
		if rerr := os.Rename(dir, aside); rerr != nil {
			return nil, fmt.Errorf("append-only log %s cannot be loaded (%v) nor moved aside: %w", dir, err, rerr)
		}
		s.Log.Warn("append-only log could not be loaded: moved aside", "dir", dir, "moved_to", aside, "err", err)
		nl, err := persistence.OpenLog(persistence.LogOptions{Dir: dir, SealKey: s.Snapshot.SealKey,
			FS: s.LogFS, Busy: modelstore.Busy})
		if err != nil {
			return nil, err
		}
		nl.SetPolicy(l.Policy())
		if err := s.LoadSnapshot(); err != nil {
			return nil, err
		}
		return nl, s.createLog(nl)
	}
	if info.CutBytes > 0 {
		s.Log.Warn("append-only log ended in a write cut short by a crash (a torn record, or a transaction without its end): cut it off",
			"file", info.CutFile, "bytes_cut", info.CutBytes)
	}
	s.Release(s.Keys.Replace(items))
	s.Log.Info("append-only log loaded", "dir", dir, "files", info.Files, "records", info.Records,
		"keys", len(items), "seconds", time.Since(start).Seconds())
	return l, nil
}

// logEntry is one key while the log replays: models stay records until the
// replay is over, so that only the models still there are read and compiled.
type logEntry struct {
	tensor   *modelstore.Tensor
	model    *persistence.LogModel
	expireAt int64
}

// logLoader applies log records to a fresh map of keys.
type logLoader struct {
	s    *App
	l    *persistence.Log
	keys map[string]*logEntry
}

func (ld *logLoader) Tensor(r persistence.TensorRecord) error {
	t, err := modelstore.NewTensorFromBlob(modelstore.DType(r.DType), r.Shape, r.Data)
	if err != nil {
		return fmt.Errorf("tensor %q: %w", r.Key, err)
	}
	t.Owner = r.Owner
	ld.keys[r.Key] = &logEntry{tensor: t, expireAt: r.ExpireAtUnixMs}
	return nil
}

func (ld *logLoader) Model(m persistence.LogModel) error {
	ld.keys[m.Key] = &logEntry{model: &m, expireAt: m.ExpireAtUnixMs}
	return nil
}

func (ld *logLoader) Delete(key string) error { delete(ld.keys, key); return nil }

func (ld *logLoader) Expire(key string, at int64) error {
	if e, ok := ld.keys[key]; ok {
		e.expireAt = at
	}
	return nil
}

func (ld *logLoader) Rename(src, dst string) error {
	e, ok := ld.keys[src]
	delete(ld.keys, src)
	if ok {
		ld.keys[dst] = e
	} else {
		delete(ld.keys, dst) // src held something not logged (NOPERSIST)
	}
	return nil
}

func (ld *logLoader) Flush() error { clear(ld.keys); return nil }

// items builds the keyspace: expired keys dropped, each model file read
// (once per content) and compiled.
func (ld *logLoader) items() ([]modelstore.Item, error) {
	now := time.Now().UnixMilli()
	out := make([]modelstore.Item, 0, len(ld.keys))
	// Each model file is read once, straight into a model buffer that the
	// model's blob and session then share: the model is held once, not
	// read into Go memory and copied into a buffer for the engine.
	bufs := map[[32]byte]*modelstore.ModelBuffer{}
	defer func() {
		for _, b := range bufs {
			b.Unref() // the blobs took their own references
		}
	}()
	type pending struct {
		key string
		rec persistence.ModelRecord
		buf *modelstore.ModelBuffer
		lf  *[32]byte
		// first: the first key of its model file, which compiles it
		first bool
	}
	var models []pending
	for key, e := range ld.keys {
		if e.expireAt != 0 && e.expireAt <= now {
			continue
		}
		if e.tensor != nil {
			out = append(out, modelstore.Item{Key: key, Value: e.tensor, ExpireAt: e.expireAt})
			continue
		}
		r := e.model
		buf, seen := bufs[r.File]
		if !seen {
			var err error
			if buf, err = ld.readModel(r.File, r.Size); err != nil {
				return out, fmt.Errorf("model %q: %w", key, err)
			}
			bufs[r.File] = buf
		}
		rec := r.ModelRecord
		rec.Key = key
		rec.ExpireAtUnixMs = e.expireAt
		var lf *[32]byte
		if r.Digest {
			rec.BlobSHA256 = &r.File
		} else {
			lf = &r.File // the file is named by its id, and stays so
		}
		models = append(models, pending{key, rec, buf, lf, !seen})
	}
	// The models compile side by side, as many at a time as there are
	// cores: one after another, two models that compile for 45 s each
	// kept the server LOADING for 100 s.
	// Keys that share a model file compile it once: the first of each
	// compiles beside the others' firsts, the rest then find its session.
	done := make([]*modelstore.Model, len(models))
	errs := make([]error, len(models))
	compile := func(i int) {
		done[i], errs[i] = ld.s.modelFromBuffer(models[i].rec, models[i].buf)
		if errs[i] == nil {
			done[i].LogFile = models[i].lf
		}
	}
	var rest []int
	sem := make(chan struct{}, max(runtime.GOMAXPROCS(0), 1))
	var wg sync.WaitGroup
	for i, p := range models {
		if !p.first {
			rest = append(rest, i)
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			compile(i)
		}()
	}
	wg.Wait()
	// A model that failed beside others is compiled again, alone, before
	// the start gives up: side by side, compiles take more memory at once
	// than the stores did one at a time, and under engine-worker-memory a
	// set of models every store of which had succeeded failed the start
	// (durability review: std::bad_alloc, 1 start in 3 with 5 models).
	for i, p := range models {
		if p.first && errs[i] != nil {
			compile(i)
		}
	}
	for _, i := range rest {
		compile(i)
	}
	var first error
	for i, m := range done {
		if errs[i] != nil {
			first = cmp.Or(first, errs[i])
			continue
		}
		out = append(out, modelstore.Item{Key: models[i].key, Value: m, ExpireAt: models[i].rec.ExpireAtUnixMs})
	}
	if first != nil {
		return out, first
	}
	return out, nil
}

// readModel reads the model file for sum into a new, sealed model buffer;
// the caller holds its one reference.
func (ld *logLoader) readModel(sum [32]byte, size int64) (*modelstore.ModelBuffer, error) {
	buf, err := modelstore.NewModelBuffer(size, size)
	if err != nil {
		return nil, err
	}
	dst, err := buf.Extend(size)
	if err == nil {
		_, err = ld.l.ReadModelInto(sum, size, dst)
	}
	if err != nil {
		buf.Unref()
		return nil, err
	}
	buf.Filled(len(dst))
	buf.Seal()
	return buf, nil
}

// aof is the append-only log, nil with appendonly no and until the data
// is loaded (LoadData).
func (s *App) aof() *persistence.Log { return s.aofLog.Load() }
