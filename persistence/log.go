package persistence

import (
	"bufio"
	"bytes"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// FsyncPolicy is appendfsync: when the log is fsynced.
type FsyncPolicy int32

// The fsync policies, as Redis names them.
const (
	// FsyncEverysec: written to the OS before the reply, fsynced every second.
	FsyncEverysec FsyncPolicy = iota
	// FsyncAlways: written and fsynced before the reply.
	FsyncAlways
	// FsyncNo: written to the OS before the reply; the OS decides when to flush.
	FsyncNo
)

// ParseFsyncPolicy parses always, everysec or no.
func ParseFsyncPolicy(s string) (FsyncPolicy, error) {
	switch strings.ToLower(s) {
	case "always":
		return FsyncAlways, nil
	case "everysec":
		return FsyncEverysec, nil
	case "no":
		return FsyncNo, nil
	}
	return 0, errors.New("argument must be 'always', 'everysec' or 'no'")
}

// String returns the policy as the appendfsync directive names it.
func (p FsyncPolicy) String() string {
	return [...]string{"everysec", "always", "no"}[p]
}

// LogOptions configure a Log.
type LogOptions struct {
	Dir     string // the log's own directory (appenddirname under dir)
	SealKey []byte
	FS      FS // nil means OSFS
	// Busy, if set, tells a commit about to lead a write that other
	// clients' commands are executing, which may queue records of their
	// own: it then lets them run first (runtime.Gosched), so that one
	// write covers them, as Redis writes its AOF buffer once per pass of
	// its event loop. With 32 clients in the inference loop the log's
	// writes fell 2.7x (docs/BENCHMARKS.md). A client alone does not
	// yield (a connection still counts while part of its next command is
	// buffered or its replies wait for the client to read them: a yield
	// then costs well under a microsecond).
	Busy func() bool
}

// Log is the sealed append-only log (see the package doc): a manifest
// naming a base file and incr files, and sealed model files (LogModel.File).
//
// Appending is split in two so that records keep the order of the
// keyspace changes they describe while the I/O happens outside the
// keyspace lock: Append, under the caller's lock, only queues the record
// and returns its sequence number; Commit(seq), before the caller replies,
// writes everything queued so far in one write(2) (a group commit: the
// records of every client that queued meanwhile), and under appendfsync
// always fsyncs it too. The first client to call Commit writes for the
// others queued behind it.
//
// Lock order (docs/LOCKS.md): the caller's locks, then mu (Append); wmu,
// then mu; wmu, then syncMu. Nothing else is taken while mu is held.
type Log struct {
	o      LogOptions
	fs     FS
	policy atomic.Int32

	mu      sync.Mutex // guards pending, leading, waiters and the unit fields, and writes of appended
	pending []Op
	spare   []Op // the other queue (writeLocked)
	// units counts the atomic units open (BeginUnit, EndUnit: they nest);
	// while it is above 0, the records after unitFrom are not taken for a
	// write (writeLocked), and unitDone, made by a Commit that must wait
	// for them, is closed when the unit ends.
	units    int
	unitFrom uint64
	unitDone chan struct{}
	// appended is the last record's sequence number: written under mu,
	// read without it (Seq, which every logged command calls twice: no
	// lock for the writes of two CPUs to meet on).
	appended atomic.Uint64
	leading  bool     // a Commit is writing for everyone (Commit)
	waiters  []waiter // Commits waiting for the leader's write

	wmu       sync.Mutex // one writer at a time; guards the fields below
	cur       *logFile   // the incr file appended to
	plain     []byte     // the frame being built: logFrameHdr bytes of room for its header, then its plaintext
	plainMore bool       // the frame being built ends inside a unit (its last record's Op.more): flagged frameUnitMore
	unwritten []byte     // sealed frames not yet written (kept for a retry)
	upto      uint64     // seq the unwritten frames reach
	broken    error      // the current file's tail is unknown: only a rewrite recovers
	// held is set (to the broken file's error) when a rewrite's cut has
	// moved appends off a broken file (switchLocked), until that
	// rewrite's base is in place (finishLocked): the manifest still names
	// the broken file, whose tail may be torn, before the new incr file,
	// and a start refuses a torn file with a written one after it. So
	// the records after the cut stay queued meanwhile (their Commits
	// fail: MISCONF), and are written once the broken file is no longer
	// named. Records before a later cut are dropped, as under broken:
	// that cut's base holds them.
	held   error
	man    manifest
	recent map[string]bool // model files named by records written since the last rewrite
	// waiting is the incr file of a rewrite's cut not yet reached by the
	// writes (switchLocked): while a write error holds records before the
	// cut, no other rewrite begins, each with a new incr file.
	waiting string
	// unnamed counts the claims on model files put in place (Finish)
	// whose record is not yet written: a MULTI's stores compile, and so
	// write their files, before any of them is stored, and a rewrite
	// that finished in between removed a file that recent no longer held
	// (the record naming it came after, and the next start failed).
	unnamed  map[string]int
	baseSize int64
	oldSize  int64 // bytes of the incr files before cur

	syncMu sync.Mutex // held around an fsync of cur outside wmu

	written atomic.Uint64
	synced  atomic.Uint64
	// fsynced: the records up to it are on disk (synced also counts, under
	// appendfsync no, the records written to the OS).
	fsynced atomic.Uint64
	werr    atomic.Pointer[error] // the last write or fsync error; nil once one succeeds
	size    atomic.Int64          // all log files (base and incr), for INFO
}

// logFile is an open incr file.
type logFile struct {
	f      File
	name   string
	h      *logHeader
	index  uint64 // next frame index
	size   int64  // bytes known written whole
	closed bool   // guarded by syncMu
}

// OpenLog prepares a Log over o.Dir, creating the directory. It reads
// nothing: Replay loads an existing log, Create starts a new one.
func OpenLog(o LogOptions) (*Log, error) {
	if err := checkSealKey(o.SealKey); err != nil {
		return nil, err
	}
	if o.FS == nil {
		o.FS = OSFS{}
	}
	if err := os.MkdirAll(filepath.Join(o.Dir, modelsDir), 0o700); err != nil {
		return nil, fmt.Errorf("persistence: log directory: %w", err)
	}
	// The directories' own entries must survive a power cut too, or the
	// first fsynced record could sit in a directory that is not there.
	for _, d := range []string{filepath.Dir(o.Dir), o.Dir} {
		if err := o.FS.SyncDir(d); err != nil {
			return nil, fmt.Errorf("persistence: log directory: %w", err)
		}
	}
	l := &Log{o: o, fs: o.FS, recent: map[string]bool{}, unnamed: map[string]int{}}
	// Temporary files are what a crash left of a model file or a
	// manifest being written.
	for _, d := range []string{o.Dir, filepath.Join(o.Dir, modelsDir)} {
		entries, _ := os.ReadDir(d)
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), ".tmp-") {
				os.Remove(filepath.Join(d, e.Name()))
			}
		}
	}
	return l, nil
}

// Exists reports whether the directory holds a log: its manifest, or log
// files without one that hold what no snapshot may (an incr file with
// records, a base a rewrite wrote), which Replay refuses: starting afresh
// would load an older snapshot and write over them. A base.1 and a
// header-only incr.1 are what a first Create cut short left (its
// manifest is written last): they hold nothing the snapshot lacks, and a
// new Create replaces them.
func (l *Log) Exists() bool {
	if _, err := os.Stat(filepath.Join(l.o.Dir, manifestName)); err == nil {
		return true
	}
	for _, name := range l.logFiles() {
		st, err := os.Stat(filepath.Join(l.o.Dir, name))
		if name != "base.1.log" && (strings.HasPrefix(name, "base.") || err != nil || st.Size() > logHeaderSize) {
			return true
		}
	}
	return false
}

// logFiles lists the base and incr files in the directory.
func (l *Log) logFiles() []string {
	var names []string
	entries, _ := os.ReadDir(l.o.Dir)
	for _, e := range entries {
		if isLogFile(e.Name()) {
			names = append(names, e.Name())
		}
	}
	return names
}

// isLogFile reports whether name is a base or incr file's: base.N.log or
// incr.N.log.
func isLogFile(name string) bool {
	rest, ok := strings.CutPrefix(name, "base.")
	if !ok {
		rest, ok = strings.CutPrefix(name, "incr.")
	}
	n, ok2 := strings.CutSuffix(rest, ".log")
	if !ok || !ok2 || n == "" {
		return false
	}
	_, err := strconv.ParseUint(n, 10, 32)
	return err == nil
}

// unnamedFiles lists the base and incr files m does not name: what a
// crash during a rewrite left (its base, half written), the files a
// rewrite replaced, and those an earlier one could not remove. No file of
// theirs is named again: a new file's number is the manifest's next.
func (l *Log) unnamedFiles(m manifest) []string {
	var names []string
	for _, name := range l.logFiles() {
		if name != m.base && !contains(m.incrs, name) {
			names = append(names, name)
		}
	}
	return names
}

// removeFiles removes the named files of the log's directory.
func (l *Log) removeFiles(names []string) {
	for _, name := range names {
		l.fs.Remove(filepath.Join(l.o.Dir, name))
	}
}

// SetPolicy sets appendfsync.
func (l *Log) SetPolicy(p FsyncPolicy) { l.policy.Store(int32(p)) }

// Policy is appendfsync.
func (l *Log) Policy() FsyncPolicy { return FsyncPolicy(l.policy.Load()) }

// Err is the last write or fsync error, nil once a write succeeds again
// (after an fsync error, once a rewrite succeeds).
func (l *Log) Err() error {
	if p := l.werr.Load(); p != nil {
		return *p
	}
	return nil
}

func (l *Log) setErr(err error) { l.werr.Store(&err) }

// NoteError records an error met writing for the log outside it (a model
// file that could not be created): writes are refused until one succeeds.
func (l *Log) NoteError(err error) { l.setErr(err) }

// Written is the sequence number of the last record written to the OS.
func (l *Log) Written() uint64 { return l.written.Load() }

// Size is the bytes of the base and incr files; BaseSize the base's.
func (l *Log) Size() int64 { return l.size.Load() }

// BaseSize is the size of the base file.
func (l *Log) BaseSize() int64 {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	return l.baseSize
}

// IncrFiles is the number of incr files the manifest names.
func (l *Log) IncrFiles() int {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	return len(l.man.incrs)
}

// Append queues op and returns its sequence number. Call it under the lock
// that orders the changes op records, and Commit the number before
// acknowledging the change.
func (l *Log) Append(op Op) uint64 {
	l.mu.Lock()
	op.more = l.units > 0 // EndUnit clears it on the unit's last record
	l.pending = append(l.pending, op)
	seq := l.appended.Add(1)
	l.mu.Unlock()
	return seq
}

// BeginUnit opens an atomic unit: the records appended from now until the
// matching EndUnit (a MULTI/EXEC's, a multi-key update's) are replayed all
// or none, whatever their size. Units nest; the outermost one counts. The
// records go into frames as any others do, every frame but the unit's last
// flagged frameUnitMore (frames are authenticated whole, flags included),
// and Replay holds a unit's records until its last frame is read and
// drops them if the file ends first: see the package doc. None of them is
// written before EndUnit: a group commit meanwhile writes the records
// before the unit only, and a Commit of a record inside it waits for
// EndUnit. So the caller must not Commit its own records before it ends
// the unit. A record another caller appends meanwhile joins the unit.
func (l *Log) BeginUnit() {
	l.mu.Lock()
	if l.units == 0 {
		l.unitFrom = l.appended.Load()
	}
	l.units++
	l.mu.Unlock()
}

// EndUnit closes the unit BeginUnit opened.
func (l *Log) EndUnit() {
	l.mu.Lock()
	l.units--
	if l.units == 0 {
		// The unit's records are still all queued (writeLocked takes none
		// of them while it is open): the last one queued is its last.
		if n := len(l.pending); n > 0 && l.appended.Load() > l.unitFrom {
			l.pending[n-1].more = false
		}
		if l.unitDone != nil {
			close(l.unitDone)
			l.unitDone = nil
		}
	}
	l.mu.Unlock()
}

// openUnitHolds reports whether seq is a record of the unit open now, which
// no write may take before the unit ends. mu is held.
func (l *Log) openUnitHolds(seq uint64) bool { return l.units > 0 && seq > l.unitFrom }

// Seq is the sequence number of the last record appended.
func (l *Log) Seq() uint64 { return l.appended.Load() }

// Fsynced is the sequence number of the last record an fsync has put on
// disk (under appendfsync no, none but those of an earlier policy).
func (l *Log) Fsynced() uint64 { return l.fsynced.Load() }

// Commit returns once the records up to seq are written to the OS (and,
// under appendfsync always, fsynced), or with the error that stopped them.
// Records that failed to be written stay queued: the next Commit retries.
//
// One caller at a time writes, for every record queued so far (the
// leader); the others wait on channels of their own, not on a lock, and
// are woken together once a write covers them; if records queued during a
// write are still waiting, the first of their callers leads the next one.
func (l *Log) Commit(seq uint64) error {
	if l.satisfied(seq) {
		return nil
	}
	l.mu.Lock()
	for l.openUnitHolds(seq) {
		// A write now would leave seq queued (writeLocked): wait for the
		// unit's end. A unit opened after this one ends begins after seq.
		if l.unitDone == nil {
			l.unitDone = make(chan struct{})
		}
		ch := l.unitDone
		l.mu.Unlock()
		<-ch
		l.mu.Lock()
	}
	if l.satisfied(seq) {
		l.mu.Unlock()
		return nil
	}
	if l.leading {
		ch := make(chan error, 1)
		l.waiters = append(l.waiters, waiter{seq, ch})
		l.mu.Unlock()
		if err := <-ch; err != errLead {
			return err
		}
		// Handed the lead (leading is still true).
	} else {
		l.leading = true
		l.mu.Unlock()
		if l.o.Busy != nil && l.o.Busy() {
			runtime.Gosched()
		}
	}
	err := l.commitNow()
	l.mu.Lock()
	keep := l.waiters[:0]
	for _, w := range l.waiters {
		switch {
		case err != nil:
			w.ch <- err
		case l.satisfied(w.seq):
			w.ch <- nil
		default:
			keep = append(keep, w)
		}
	}
	if len(keep) > 0 {
		keep[0].ch <- errLead
		l.waiters = append(l.waiters[:0], keep[1:]...)
	} else {
		l.waiters = keep
		l.leading = false
	}
	l.mu.Unlock()
	return err
}

// waiter is a Commit waiting for the leader.
type waiter struct {
	seq uint64
	ch  chan error
}

// errLead hands the lead of the next write to a waiter.
var errLead = errors.New("lead the next write")

func (l *Log) satisfied(seq uint64) bool {
	return l.written.Load() >= seq && (l.Policy() != FsyncAlways || l.synced.Load() >= seq)
}

// commitNow writes everything queued, and fsyncs it under always.
func (l *Log) commitNow() error {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if err := l.writeLocked(); err != nil {
		return err
	}
	if l.Policy() == FsyncAlways && l.synced.Load() < l.written.Load() {
		return l.syncLocked()
	}
	return nil
}

// Flush writes whatever is queued; the server's tick calls it to retry
// after an error.
func (l *Log) Flush() error {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	return l.writeLocked()
}

// frameTarget is the plaintext size at which a frame is sealed and a new
// one begun, so that one large batch does not make one huge frame (a var:
// the golden log's writer lowers it to spread a unit over frames).
var frameTarget = 1 << 20

// writeLocked encodes what is queued into frames and writes them. wmu is held.
//
// The records of an atomic unit (BeginUnit) go into frames as any others
// do, sealed at frameTarget and written every drainAt, and a frame sealed
// after a record that has more of its unit after it (Op.more) is flagged
// frameUnitMore: Replay applies none of a unit whose last frame is
// missing, so the unit's head may reach the file before its tail. Units
// gathered whole in one frame were held a second time until sealed:
// 150 AI.TENSORSETs of 4 MB in one redis-py pipeline (a transaction by
// default) took the server to 1,204 MB against 698 before units (diff
// review), and split into frames of 16 MiB were atomic only frame by
// frame. The records of a unit still open are left queued, not taken:
// EndUnit marks the last one queued as the unit's end, and no Commit
// waits on them before then.
func (l *Log) writeLocked() error {
	if l.cur == nil {
		return ErrLogClosed
	}
	defer l.trimBuffersLocked()
	l.mu.Lock()
	all := l.pending
	n := len(all)
	if l.units > 0 {
		n -= int(l.appended.Load() - l.unitFrom)
	}
	ops := all[:n]
	// The two queues swap: Append fills one while this fills frames from
	// the other, and neither is allocated again. An open unit's records
	// stay queued, at the head of the other queue.
	l.pending, l.spare = append(l.spare[:0], all[n:]...), nil
	// The last record taken: written once the frames are.
	last := l.appended.Load() - uint64(len(all)-n)
	l.mu.Unlock()
	defer func() {
		clear(all) // the values are written or queued again: let them go
		l.mu.Lock()
		if l.spare == nil {
			l.spare = all[:0]
		}
		l.mu.Unlock()
	}()
	lastCut := -1 // the last cut taken, while a switch may hold the rest (held)
	if l.broken != nil || l.held != nil {
		for i := range ops {
			if ops[i].cut != nil {
				lastCut = i
			}
		}
	}
	for i, op := range ops {
		if op.cut != nil {
			if err := l.switchLocked(op.cut); err != nil {
				l.requeue(ops[i:]) // the cut and what follows wait for the next try
				return err
			}
			continue
		}
		if l.held != nil && i > lastCut {
			l.requeue(ops[i:]) // written once the rewrite's base is in place
			return heldError{l.held}
		}
		if op.Model != nil {
			name := l.ModelFileName(op.Model.File)
			l.unclaimLocked(name)
			l.recent[name] = true
		}
		if l.broken != nil || l.held != nil {
			ops[i].release()
			continue // a rewrite's base will cover it (see switchLocked)
		}
		if err := Loggable(op); err != nil {
			// Cannot happen: the keyspace asks Loggable before it takes a
			// value. Should it all the same, returning here dropped the
			// record and every one queued after it, though their changes
			// were made, and a record over the limit would not have read
			// back. Broken, the file takes nothing more, their Commits
			// fail (MISCONF), and only a rewrite, whose base holds the
			// keyspace, goes on.
			ops[i].release()
			l.broken = fmt.Errorf("logging a record: %w", err)
			l.setErr(l.broken)
			continue
		}
		if len(l.plain) > 0 && len(l.plain)-logFrameHdr+opSize(op)+tagSize > frameLimit {
			// The frame cannot take the record: sealed before it.
			if err := l.closeFrameLocked(); err != nil {
				l.requeue(ops[i:])
				return err
			}
		}
		if len(l.plain) == 0 {
			l.plain = append(l.plain, make([]byte, logFrameHdr)...) // the frame header's room (sealLocked)
		}
		l.plain, _ = appendOp(l.plain, op) // Loggable has checked what it refuses
		l.plainMore = op.more
		ops[i].release() // its bytes are in the frame
		if len(l.plain) >= frameTarget {
			if err := l.closeFrameLocked(); err != nil {
				l.requeue(ops[i+1:])
				return err
			}
		}
	}
	l.sealLocked()
	if l.broken != nil {
		return l.broken
	}
	if l.held != nil {
		// Records were dropped for a rewrite's base not yet in place:
		// they are not written yet.
		return heldError{l.held}
	}
	if err := l.drainLocked(); err != nil {
		return err
	}
	if last > l.upto {
		l.upto = last
	}
	l.written.Store(l.upto)
	if l.Policy() == FsyncNo {
		l.synced.Store(l.upto)
	}
	l.werr.Store(nil)
	return nil
}

// drainAt is how many sealed bytes writeLocked holds before writing them.
const drainAt = 8 << 20

// closeFrameLocked seals the frame being built, and writes the sealed
// frames once they reach drainAt.
func (l *Log) closeFrameLocked() error {
	// A large frame is sealed in place when no frame waits before it
	// (sealLocked).
	if len(l.plain) >= drainAt && len(l.unwritten) > 0 {
		if err := l.drainLocked(); err != nil {
			return err
		}
	}
	l.sealLocked()
	// Large values go out as they are sealed, so that a batch of them is
	// never all held a second time.
	if len(l.unwritten) >= drainAt {
		return l.drainLocked()
	}
	return nil
}

// requeue puts ops back at the head of the queue, for the next write.
func (l *Log) requeue(ops []Op) {
	l.mu.Lock()
	l.pending = append(slices.Clone(ops), l.pending...)
	l.mu.Unlock()
}

// sealLocked turns the frame being built (l.plain: its header's room, then
// its plaintext) into a sealed frame awaiting its write. A large one (of
// drainAt bytes or more: one large record), with no frame waiting before
// it, is sealed where it lies and that buffer is the one written: a large record was held three times (the value, its
// plaintext, its frame), and a 500 MB AI.TENSORSET took RSS to 1.5 GB with
// the log on against 516 MB without (resource review).
func (l *Log) sealLocked() {
	if len(l.plain) == 0 {
		return
	}
	var flags byte
	if l.plainMore {
		flags = frameUnitMore
	}
	if len(l.unwritten) == 0 && len(l.plain) >= drainAt {
		l.unwritten, l.plain = l.cur.h.sealFrameInPlace(l.plain, l.cur.index, flags), l.unwritten[:0]
	} else {
		l.unwritten = l.cur.h.sealFrame(l.unwritten, l.cur.index, flags, l.plain[logFrameHdr:])
		l.plain = l.plain[:0]
	}
	l.plainMore = false
	l.cur.index++
}

// drainLocked writes the sealed frames. A failed write is cut back to the
// last whole frame, so that the frames can be written again; if that fails
// too the file is broken until a rewrite.
func (l *Log) drainLocked() error {
	if len(l.unwritten) == 0 {
		return nil
	}
	n, err := l.cur.f.Write(l.unwritten)
	if err == nil && n < len(l.unwritten) {
		err = io.ErrShortWrite
	}
	if err != nil {
		err = fmt.Errorf("writing %s: %w", l.cur.name, err)
		if n > 0 {
			if terr := l.cur.f.Truncate(l.cur.size); terr != nil {
				l.broken = fmt.Errorf("%v; cutting back the partial write failed: %w", err, terr)
				l.unwritten = l.unwritten[:0]
				l.setErr(l.broken)
				return l.broken
			}
		}
		l.setErr(err)
		return err
	}
	l.cur.size += int64(n)
	l.size.Add(int64(n))
	l.unwritten = l.unwritten[:0]
	return nil
}

// trimBuffersLocked lets go of a frame buffer grown past 2 × drainAt (a
// huge record's) once a write is done with it, not at each frame: a batch
// of large records then reuses its two buffers, where dropping them after
// every frame had each new one faulted in afresh and collected (a MULTI
// of 600 MB took twice as long to commit).
func (l *Log) trimBuffersLocked() {
	if cap(l.unwritten) > 2*drainAt && len(l.unwritten) == 0 {
		l.unwritten = nil
	}
	if cap(l.plain) > 2*drainAt && len(l.plain) == 0 {
		l.plain = nil
	}
}

// syncLocked fsyncs the current incr file.
func (l *Log) syncLocked() error {
	target := l.written.Load()
	if err := l.cur.f.Sync(); err != nil {
		return l.syncFailedLocked(err)
	}
	raise(&l.synced, target)
	raise(&l.fsynced, target)
	return nil
}

// syncFailedLocked: after a failed fsync the kernel may have dropped the
// dirty pages, so nothing written to the file can be trusted to be on
// disk: the log is broken until a rewrite writes it afresh.
func (l *Log) syncFailedLocked(err error) error {
	l.broken = fmt.Errorf("fsync of %s: %w", l.cur.name, err)
	l.setErr(l.broken)
	return l.broken
}

// SyncEverysec is appendfsync everysec's fsync, which the server runs
// about every second in the background: it writes what is queued, then
// fsyncs without holding up writers.
func (l *Log) SyncEverysec() error {
	l.wmu.Lock()
	if l.broken != nil {
		l.wmu.Unlock()
		return l.broken
	}
	if err := l.writeLocked(); err != nil {
		l.wmu.Unlock()
		return err
	}
	cur, target := l.cur, l.written.Load()
	l.wmu.Unlock()
	if l.fsynced.Load() >= target {
		return nil
	}
	if err := l.syncOutside(cur); err != nil {
		return err
	}
	raise(&l.synced, target)
	raise(&l.fsynced, target)
	return nil
}

// syncOutside fsyncs cur, the current incr file when the caller last held
// wmu, without holding wmu: writers go on meanwhile. A file closed since
// was fsynced by whoever closed it (switchLocked, Close). A failure
// breaks the file if it is still the current one.
func (l *Log) syncOutside(cur *logFile) error {
	l.syncMu.Lock()
	var err error
	if !cur.closed {
		err = cur.f.Sync()
	}
	l.syncMu.Unlock()
	if err != nil {
		l.wmu.Lock()
		defer l.wmu.Unlock()
		if l.cur == cur {
			return l.syncFailedLocked(err)
		}
		return err
	}
	return nil
}

// raise sets v to n if that is higher: an fsync under always may have
// stored a later record's number meanwhile (diff review).
func raise(v *atomic.Uint64, n uint64) {
	for {
		old := v.Load()
		if old >= n || v.CompareAndSwap(old, n) {
			return
		}
	}
}

// Close writes what is queued, fsyncs and closes the log.
func (l *Log) Close() error {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if l.cur == nil {
		return nil
	}
	err := l.writeLocked()
	if err == nil {
		err = l.syncLocked()
	}
	l.syncMu.Lock()
	l.cur.closed = true
	l.syncMu.Unlock()
	if cerr := l.cur.f.Close(); err == nil {
		err = cerr
	}
	l.cur = nil
	return err
}

// ---- files and the manifest ----

const (
	manifestName  = "manifest"
	modelsDir     = "models"
	manifestMagic = "EnclaveAI log manifest v1"
	manifestLabel = "EnclaveAI log manifest key v1"
	modelLabel    = "EnclaveAI model file name v1"
)

// manifest names the files of the log, in order.
type manifest struct {
	base  string
	incrs []string
	next  int // number for the next file name
}

func (l *Log) manifestMAC(body []byte) string {
	key, _ := hkdf.Key(sha256.New, l.o.SealKey, nil, manifestLabel, 32)
	m := hmac.New(sha256.New, key)
	m.Write(body)
	return hex.EncodeToString(m.Sum(nil))
}

func (l *Log) encodeManifest(m manifest) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s\nnext %d\nbase %s\n", manifestMagic, m.next, m.base)
	for _, f := range m.incrs {
		fmt.Fprintf(&b, "incr %s\n", f)
	}
	fmt.Fprintf(&b, "mac %s\n", l.manifestMAC(b.Bytes()))
	return b.Bytes()
}

func (l *Log) readManifest() (manifest, error) {
	var m manifest
	b, err := os.ReadFile(filepath.Join(l.o.Dir, manifestName))
	if err != nil {
		return m, err
	}
	i := bytes.LastIndex(b, []byte("mac "))
	if i < 0 || !hmac.Equal(bytes.TrimSpace(b[i+4:]), []byte(l.manifestMAC(b[:i]))) {
		return m, fmt.Errorf("%w: manifest fails its MAC (another seal key, or tampering)", ErrLogCorrupt)
	}
	lines := strings.Split(strings.TrimSpace(string(b[:i])), "\n")
	if lines[0] != manifestMagic {
		return m, fmt.Errorf("%w: manifest header", ErrLogCorrupt)
	}
	for _, line := range lines[1:] {
		k, v, _ := strings.Cut(line, " ")
		switch {
		case k == "next":
			m.next, err = strconv.Atoi(v)
		case k == "base" && plainName(v):
			m.base = v
		case k == "incr" && plainName(v):
			m.incrs = append(m.incrs, v)
		default:
			err = fmt.Errorf("%w: manifest line %q", ErrLogCorrupt, line)
		}
		if err != nil {
			return m, err
		}
	}
	if m.base == "" || len(m.incrs) == 0 {
		return m, fmt.Errorf("%w: manifest names no base or no incr file", ErrLogCorrupt)
	}
	return m, nil
}

func plainName(s string) bool {
	return s != "" && !strings.ContainsAny(s, "/\\") && s != "." && s != ".."
}

// writeManifest replaces the manifest atomically.
func (l *Log) writeManifest(m manifest) error {
	return l.writeFileAtomic(l.o.Dir, manifestName, l.encodeManifest(m))
}

// writeFileAtomic writes data to dir/name through a temporary file,
// fsynced, renamed into place, and the directory fsynced.
func (l *Log) writeFileAtomic(dir, name string, data []byte) error {
	tmp := filepath.Join(dir, ".tmp-"+name)
	f, err := l.fs.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = l.fs.Rename(tmp, filepath.Join(dir, name))
	}
	if err != nil {
		l.fs.Remove(tmp)
		return err
	}
	return l.fs.SyncDir(dir)
}

// newIncr creates incr file number n with its header, fsynced.
func (l *Log) newIncr(n int) (*logFile, error) {
	return l.createIncr(fmt.Sprintf("incr.%d.log", n))
}

// createIncr creates (or empties) the incr file name and writes and
// fsyncs its header.
func (l *Log) createIncr(name string) (*logFile, error) {
	h, err := newLogHeader(l.o.SealKey, KindIncr)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(l.o.Dir, name)
	f, err := l.fs.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	if _, err = f.Write(h.raw[:]); err == nil {
		err = f.Sync()
	}
	if err != nil {
		f.Close()
		l.fs.Remove(path)
		return nil, err
	}
	return &logFile{f: f, name: name, h: h, size: logHeaderSize}, nil
}

// writeBase writes base file number n from src, fsynced.
func (l *Log) writeBase(n int, src func(yield func(Op) error) error) (string, int64, error) {
	h, err := newLogHeader(l.o.SealKey, KindBase)
	if err != nil {
		return "", 0, err
	}
	name := fmt.Sprintf("base.%d.log", n)
	path := filepath.Join(l.o.Dir, name)
	f, err := l.fs.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return "", 0, err
	}
	size := int64(logHeaderSize)
	_, err = f.Write(h.raw[:])
	var plain, sealed []byte
	var index uint64
	emit := func() error {
		sealed = h.sealFrame(sealed[:0], index, 0, plain)
		index++
		plain = plain[:0]
		size += int64(len(sealed))
		_, err := f.Write(sealed)
		return err
	}
	if err == nil {
		err = src(func(op Op) error {
			if err := Loggable(op); err != nil {
				return err
			}
			if len(plain) > 0 && len(plain)+opSize(op)+tagSize > frameLimit {
				if err := emit(); err != nil {
					return err
				}
			}
			plain, _ = appendOp(plain, op)
			if len(plain) >= frameTarget {
				return emit()
			}
			return nil
		})
	}
	if err == nil && len(plain) > 0 {
		err = emit()
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		l.fs.Remove(path)
		return "", 0, err
	}
	return name, size, nil
}

// Create starts a new log whose base holds src's records (the keyspace
// the server starts with), replacing any files in the directory.
func (l *Log) Create(src func(yield func(Op) error) error) error {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	base, size, err := l.writeBase(1, src)
	if err != nil {
		return fmt.Errorf("persistence: creating the log: %w", err)
	}
	cur, err := l.newIncr(1)
	if err != nil {
		return fmt.Errorf("persistence: creating the log: %w", err)
	}
	m := manifest{base: base, incrs: []string{cur.name}, next: 2}
	if err := l.writeManifest(m); err != nil {
		cur.f.Close()
		return fmt.Errorf("persistence: creating the log: %w", err)
	}
	l.man, l.cur, l.baseSize = m, cur, size
	l.size.Store(size + cur.size)
	return nil
}

// ReplayInfo says what Replay found.
type ReplayInfo struct {
	Files   int   // base and incr files read
	Records int64 // records handed to the sink
	// CutBytes is what was cut off a torn incr file (0 if none).
	CutBytes int64
	CutFile  string
}

// countingSink counts records on their way to a LogSink.
type countingSink struct {
	LogSink
	n *int64
}

func (c countingSink) Tensor(t TensorRecord) error { *c.n++; return c.LogSink.Tensor(t) }
func (c countingSink) Model(m LogModel) error      { *c.n++; return c.LogSink.Model(m) }
func (c countingSink) Delete(k string) error       { *c.n++; return c.LogSink.Delete(k) }
func (c countingSink) Expire(k string, at int64) error {
	*c.n++
	return c.LogSink.Expire(k, at)
}
func (c countingSink) Rename(s, d string) error { *c.n++; return c.LogSink.Rename(s, d) }
func (c countingSink) Flush() error             { *c.n++; return c.LogSink.Flush() }

// Replay verifies the log and hands its records to sink in order, then
// opens the last incr file for appending. A torn last frame of an incr
// file (a write cut short by a crash), and the frames of an atomic unit
// the file ends inside (BeginUnit: a write cut short between two of
// them), are cut off the file when loadTruncated is set, and are an error
// wrapping ErrLogTruncated otherwise, as Redis reverts a MULTI/EXEC cut
// short in its AOF; any other damage is an error wrapping ErrLogCorrupt,
// ErrWrongKey or ErrVersion. Appends then go to a new incr file, listed
// in the manifest before anything is cut, when the last one was cut
// (frames cut off may have reached the disk whole, and a new frame of the
// same index would be sealed with their nonce) or is of an older version
// (it cannot hold what this build writes). The torn file need not be the
// last: a rewrite lists its new incr file (BeginRewrite) while writes queued
// before the cut still go to the old one, so a crash can tear the old
// file's tail while the new one holds only its header. Each file after the
// torn one must hold only its header (newIncr writes and fsyncs it before
// the manifest names the file); one written to means frames followed the
// torn one, which is damage.
func (l *Log) Replay(sink LogSink, loadTruncated bool) (ReplayInfo, error) {
	var info ReplayInfo
	sink = countingSink{sink, &info.Records}
	m, err := l.readManifest()
	if errors.Is(err, fs.ErrNotExist) {
		err = fmt.Errorf("%w: the manifest is missing, but log files are there (%s)", ErrLogCorrupt, strings.Join(l.logFiles(), ", "))
	}
	if err != nil {
		return info, fmt.Errorf("persistence: %w", err)
	}
	var total int64
	files := append([]string{m.base}, m.incrs...)
	// cut is the file with a torn tail, cut off only once every file has
	// verified: a start refused leaves the files as they were.
	var last, cut *logFile
	for i, name := range files {
		kind := byte(KindIncr)
		if i == 0 {
			kind = KindBase
		}
		lf, good, err := l.replayFile(name, kind, sink)
		info.Files++
		if err != nil && errors.Is(err, ErrLogTruncated) && kind == KindIncr {
			if later, size := l.writtenAfter(files[i+1:]); later != "" {
				return info, fmt.Errorf("persistence: %s: %w: a write cut short (%d bytes from frame %d), yet %s after it is not a bare header (%d bytes)",
					name, ErrLogCorrupt, lf.size-good, lf.index, later, size)
			}
			if !loadTruncated {
				return info, fmt.Errorf("persistence: %s: %w (start with aof-load-truncated yes to cut it off)", name, err)
			}
			info.CutBytes, info.CutFile = lf.size-good, name
			lf.size = good
			cut = lf
			err = nil
		}
		if err != nil {
			return info, fmt.Errorf("persistence: %s: %w", name, err)
		}
		if i == 0 {
			l.baseSize = lf.size
		}
		total += lf.size
		last = lf
	}
	if last.h != nil && (cut == last || last.h.version < logVersion) {
		fresh, err := l.newIncr(m.next)
		if err == nil {
			m.incrs = append(m.incrs, fresh.name)
			m.next++
			if err = l.writeManifest(m); err != nil {
				fresh.f.Close()
				l.fs.Remove(filepath.Join(l.o.Dir, fresh.name))
			}
		}
		if err != nil {
			return info, fmt.Errorf("persistence: starting a new incr file: %w", err)
		}
		total += fresh.size
		last = fresh
	}
	switch {
	case cut != nil && cut.h == nil:
		// Its header itself is torn, which only damage does (newIncr
		// fsyncs it before the manifest names the file): the file gets a
		// new one, for appends to seal their frames with.
		fresh, err := l.createIncr(cut.name)
		if err != nil {
			return info, fmt.Errorf("persistence: writing a new header for %s: %w", cut.name, err)
		}
		fresh.f.Close()
		fresh.f = nil
		total += fresh.size - cut.size
		*cut = *fresh
	case cut != nil:
		if err := l.cutTail(cut); err != nil {
			return info, fmt.Errorf("persistence: cutting the torn tail of %s: %w", cut.name, err)
		}
	}
	if last.f == nil {
		f, err := l.fs.OpenFile(filepath.Join(l.o.Dir, last.name), os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			return info, fmt.Errorf("persistence: %w", err)
		}
		last.f = f
	}
	l.wmu.Lock()
	l.removeFiles(l.unnamedFiles(m))
	l.man, l.cur = m, last
	l.oldSize = total - last.size
	l.wmu.Unlock()
	l.size.Store(total)
	return info, nil
}

// cutTail cuts the incr file lf back to lf.size and fsyncs it before any
// append is written to a later file: the kernel may write the later one
// back first, and a power loss then left the torn tail behind its frames,
// which the next start refused as damage.
func (l *Log) cutTail(lf *logFile) error {
	f, err := l.fs.OpenFile(filepath.Join(l.o.Dir, lf.name), os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	err = f.Truncate(lf.size)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// writtenAfter names the first of the incr files that holds anything but
// its header, and its size. Files it cannot stat are left to their own
// replay to report.
func (l *Log) writtenAfter(files []string) (string, int64) {
	for _, name := range files {
		st, err := os.Stat(filepath.Join(l.o.Dir, name))
		if err == nil && st.Size() != logHeaderSize {
			return name, st.Size()
		}
	}
	return "", 0
}

// replayFile reads one log file: it returns the file (its header, frame
// count and size) and the offset where its last whole frame ends, or,
// if the file ends inside an atomic unit, where the unit's first frame
// begins (an error wrapping ErrLogTruncated, as for a torn frame).
//
// It reads a frame at a time, not the whole file: what it holds is the
// frame being verified (whole: its tag authenticates all of it, and
// nothing of it is handed on before), decrypted in place, and the values
// decoded from it. The values of a unit's frames flagged frameUnitMore
// are held, decoded (unitHold), until its last frame is read, and are
// then handed on: a unit is applied all or none, and its values are
// copied out of their frames once, as any others. A frame's length is
// believed only as far as the bytes left in the file: a longer one is
// torn, whatever it says, so a torn tail's garbage length allocates
// nothing. Only a bad frame's tail, which tornTail judges, is read whole.
func (l *Log) replayFile(name string, kind byte, sink LogSink) (*logFile, int64, error) {
	f, err := os.Open(filepath.Join(l.o.Dir, name))
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, 0, err
	}
	size := fi.Size()
	lf := &logFile{name: name, size: size}
	r := bufio.NewReaderSize(f, 1<<20)
	hb := make([]byte, min(size, logHeaderSize))
	if _, err := io.ReadFull(r, hb); err != nil {
		return lf, 0, err
	}
	h, err := parseLogHeader(hb, l.o.SealKey, kind)
	if err != nil {
		return lf, 0, err
	}
	lf.h = h
	off := int64(logHeaderSize)
	var buf []byte
	var unit unitHold
	for off < size {
		// frame is the whole frame at off, or nil if the file ends first.
		var frame []byte
		if left := size - off; left >= logFrameHdr {
			var hdr [logFrameHdr]byte
			if _, err := io.ReadFull(r, hdr[:]); err != nil {
				return lf, off, err
			}
			if n := int64(binary.BigEndian.Uint32(hdr[:])); n >= tagSize && n <= left-logFrameHdr {
				if int64(cap(buf)) < logFrameHdr+n {
					buf = nil // not kept while the larger one is allocated
					buf = make([]byte, logFrameHdr+n)
				}
				frame = buf[:logFrameHdr+n]
				copy(frame, hdr[:])
				if _, err := io.ReadFull(r, frame[logFrameHdr:]); err != nil {
					return lf, off, err
				}
			}
		}
		st := frameTorn
		var pt []byte
		var n int
		var flags byte
		if frame != nil {
			pt, flags, n, st = h.openFrame(frame, lf.index)
		}
		switch st {
		case frameBad:
			return lf, off, fmt.Errorf("%w: frame %d at offset %d fails authentication", ErrLogCorrupt, lf.index, off)
		case frameTorn:
			tail := make([]byte, size-off)
			if _, err := f.ReadAt(tail, off); err != nil {
				return lf, off, err
			}
			if kind == KindBase || !tornTail(tail) {
				return lf, off, fmt.Errorf("%w: frame %d at offset %d is damaged", ErrLogCorrupt, lf.index, off)
			}
			if unit.open {
				// The torn frame belongs to a unit: all of it goes.
				lf.index = unit.index
				return lf, unit.off, fmt.Errorf("%w: %d bytes after frame %d, a torn frame ending an atomic unit", ErrLogTruncated, size-unit.off, lf.index)
			}
			return lf, off, fmt.Errorf("%w: %d bytes after frame %d", ErrLogTruncated, size-off, lf.index)
		}
		more, ok := h.unitFlags(flags)
		if !ok {
			return lf, off, fmt.Errorf("%w: frame %d at offset %d has flags %#02x", ErrLogCorrupt, lf.index, off, flags)
		}
		to := sink
		if more || unit.open {
			if !unit.open {
				unit = unitHold{open: true, off: off, index: lf.index}
			}
			to = &unit
		}
		if err := decodeFrame(pt, kind, to); err != nil {
			var se sinkError
			if errors.As(err, &se) {
				return lf, off, se.err
			}
			return lf, off, fmt.Errorf("frame %d: %w", lf.index, err)
		}
		if unit.open && !more {
			if err := unit.apply(sink); err != nil {
				return lf, off, err
			}
		}
		off += int64(n)
		lf.index++
	}
	if unit.open {
		// A write cut short between two of the unit's frames.
		lf.index = unit.index
		return lf, unit.off, fmt.Errorf("%w: %d bytes after frame %d, an atomic unit without its last frame", ErrLogTruncated, size-unit.off, lf.index)
	}
	return lf, off, nil
}

// unitHold is a LogSink that holds the records of an atomic unit whose
// last frame replayFile has not read yet, as decodeFrame decoded them
// (a tensor's bytes copied out of the frame once), until apply hands them
// to the real sink.
type unitHold struct {
	open  bool
	off   int64  // where the unit's first frame begins
	index uint64 // that frame's index
	ops   []Op
}

func (u *unitHold) Tensor(t TensorRecord) error { u.ops = append(u.ops, Op{Tensor: &t}); return nil }
func (u *unitHold) Model(m LogModel) error      { u.ops = append(u.ops, Op{Model: &m}); return nil }
func (u *unitHold) Delete(k string) error       { u.ops = append(u.ops, Op{Del: k}); return nil }
func (u *unitHold) Expire(k string, at int64) error {
	u.ops = append(u.ops, Op{Expire: &ExpireOp{Key: k, AtUnixMs: at}})
	return nil
}
func (u *unitHold) Rename(s, d string) error {
	u.ops = append(u.ops, Op{Rename: &[2]string{s, d}})
	return nil
}
func (u *unitHold) Flush() error { u.ops = append(u.ops, Op{Flush: true}); return nil }

// apply hands the unit's records to sink, in order, letting go of each
// as it goes, and closes the unit.
func (u *unitHold) apply(sink LogSink) error {
	ops := u.ops
	*u = unitHold{}
	for i, op := range ops {
		ops[i] = Op{}
		var err error
		switch {
		case op.Tensor != nil:
			err = sink.Tensor(*op.Tensor)
		case op.Model != nil:
			err = sink.Model(*op.Model)
		case op.Expire != nil:
			err = sink.Expire(op.Expire.Key, op.Expire.AtUnixMs)
		case op.Rename != nil:
			err = sink.Rename(op.Rename[0], op.Rename[1])
		case op.Flush:
			err = sink.Flush()
		default:
			err = sink.Delete(op.Del)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// tornTail reports whether the bytes from a bad frame on look like a write
// cut short rather than damage in the middle of the file: no whole frame
// follows, and the frame claims more bytes than the file has, or nothing
// but zeros follows its claimed end.
func tornTail(b []byte) bool {
	if len(b) < logFrameHdr {
		return true
	}
	if frameFollows(b) {
		return false
	}
	l := int(uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3]))
	if l < tagSize || logFrameHdr+l >= len(b) {
		return true
	}
	return !bytes.ContainsFunc(b[logFrameHdr+l:], func(r rune) bool { return r != 0 })
}

// frameFollows reports whether a whole frame (its length within the file,
// its flags 0 or frameUnitMore, its checksum right) starts anywhere in b
// after its first byte. The bad frame's own length cannot tell: a damaged
// length field, or a frame overwritten with zeros, reads as a frame cut
// short, and cutting there dropped every acknowledged record after it.
// The checksum is not authenticated, and need not be: a forged one only
// makes the start refuse. b is the rest of an incr file, whose frames all
// have one of those flags (only model files use others).
//
// A torn tail is ciphertext as long as the write cut short, up to
// maxLogFrame, and at about one offset in 2^8 of it the next 4 bytes read
// as a length that fits: checking the CRC of each such frame over its
// length made a 32 MiB tail take 105 s. The flags byte rules out all but
// two in 2^8 of those, and the rest cost O(log length) each, not O(length):
// one pass over b records the CRC of b's prefix at each candidate's
// ciphertext start s and end e, and by the CRC's linearity (crc.go) the
// frame's checksum, over its 5 header bytes h and b[s:e], is
//
//	CRC(h‖b[s:e]) = crcShift(CRC(h) ^ CRC(b[:s]), e-s) ^ CRC(b[:e]).
//
// Memory grows with the candidates, not with b.
func frameFollows(b []byte) bool {
	var cands []int // offsets of plausible frame headers
	var marks []int // prefix lengths whose CRC a candidate needs
	for j := 1; j+logFrameHdr <= len(b); j++ {
		l := int(binary.BigEndian.Uint32(b[j:]))
		if (b[j+4] != 0 && b[j+4] != frameUnitMore) || l < tagSize || l > maxLogFrame || l > len(b)-j-logFrameHdr {
			continue
		}
		cands = append(cands, j)
		marks = append(marks, j+logFrameHdr, j+logFrameHdr+l)
	}
	if len(cands) == 0 {
		return false
	}
	slices.Sort(marks)
	marks = slices.Compact(marks)
	prefix := make([]uint32, len(marks))
	var crc uint32
	from := 0
	for i, m := range marks {
		crc = crc32.Update(crc, castagnoli, b[from:m])
		prefix[i], from = crc, m
	}
	at := func(m int) uint32 {
		i, _ := slices.BinarySearch(marks, m)
		return prefix[i]
	}
	for _, j := range cands {
		l := int(binary.BigEndian.Uint32(b[j:]))
		s, e := j+logFrameHdr, j+logFrameHdr+l
		h := crc32.Checksum(b[j:j+5], castagnoli)
		if crcShift(h^at(s), l)^at(e) == binary.BigEndian.Uint32(b[j+5:]) {
			return true
		}
	}
	return false
}

// ---- rewrite ----

// cutOp is the switch to a rewrite's new incr file.
type cutOp struct {
	next *logFile
	done bool // appends have switched to next (guarded by wmu)
}

// heldError is a write's error while appends wait for a rewrite's base
// (Log.held); it wraps the broken file's error.
type heldError struct{ cause error }

func (e heldError) Error() string {
	return "appends wait for the rewrite of the log after: " + e.cause.Error()
}

func (e heldError) Unwrap() error { return e.cause }

// BeginRewrite starts a rewrite: it creates the next incr file, lists it
// in the manifest after the current ones, and returns the op that switches
// appends to it. The caller appends that op (Append) at the instant it
// copies the keyspace, under the lock that orders appends, so that every
// record before it is in the copy and every record after it in the new
// incr file; then it calls FinishRewrite with the copy.
//
// Before it returns it fsyncs the current incr file, without holding up
// writers, so that the fsync the switch makes while they wait
// (switchLocked) has little left to write.
func (l *Log) BeginRewrite() (Op, error) {
	l.wmu.Lock()
	next, err := l.beginLocked()
	old, whole := l.cur, l.broken == nil
	l.wmu.Unlock()
	if err != nil {
		return Op{}, err
	}
	if whole {
		// A failure breaks the file (syncOutside), which this rewrite mends.
		l.syncOutside(old)
	}
	return Op{cut: &cutOp{next: next}}, nil
}

// beginLocked is BeginRewrite's work under wmu: it creates the next incr
// file and lists it in the manifest.
func (l *Log) beginLocked() (*logFile, error) {
	if l.cur == nil {
		return nil, ErrLogClosed
	}
	if l.waiting != "" {
		return nil, fmt.Errorf("%w (%s)", ErrCutWaiting, l.waiting)
	}
	m := l.man
	next, err := l.newIncr(m.next)
	if err != nil {
		return nil, err
	}
	m.incrs = append(append([]string(nil), m.incrs...), next.name)
	m.next++
	if err := l.writeManifest(m); err != nil {
		next.f.Close()
		l.fs.Remove(filepath.Join(l.o.Dir, next.name))
		return nil, err
	}
	l.man = m
	l.waiting = next.name
	return next, nil
}

// switchLocked moves appends to the cut's file. The frames of the old file
// are written and fsynced first, under every appendfsync policy; if the
// old file is broken they are dropped, since the rewrite's base holds
// everything before the cut.
//
// The fsync comes before any frame reaches the new file, while writers
// wait on wmu: the kernel writes dirty pages back in any order between
// files, and left to everysec's next fsync (or, under no, to the kernel)
// the old file's tail could still be in memory when the new file's first
// frames were on disk. A power loss then left the old file torn behind a
// written one, which a start refuses as damage, or cut at a frame with
// the new file's records replayed after the gap. An fsync writes about
// 1 ms a MiB here (ext4 on the shared 2-core machine's virtual disk), and
// under everysec the file holds up to a second of writes, under no more:
// BeginRewrite has fsynced it just before the cut, without holding up
// writers, so this one writes only the frames since. With 8 or 64 MiB
// written since the last fsync, the commit that carries the switch takes
// 0.4-2.5 ms (BenchmarkLogRewriteSwitch, two runs); without
// BeginRewrite's fsync it took 10-12 ms with 8 MiB and 79-80 ms with
// 64 MiB, and without any fsync here 0.04 ms.
//
// A unit never spans two files: Replay drops one unfinished at the end of
// a file. The caller appends the cut under the locks that units are made
// under, never inside one; should a cut fall inside a unit all the same,
// the unit's records before it end in the old file, as the rewrite's
// base, copied at the cut, holds their changes.
func (l *Log) switchLocked(c *cutOp) error {
	l.plainMore = false
	l.sealLocked()
	if l.broken == nil {
		if err := l.drainLocked(); err != nil {
			return err
		}
	}
	l.unwritten = l.unwritten[:0]
	if l.broken == nil {
		if err := l.cur.f.Sync(); err != nil {
			l.syncFailedLocked(err)
		}
	}
	l.syncMu.Lock()
	l.cur.closed = true
	l.syncMu.Unlock()
	l.cur.f.Close()
	l.oldSize += l.cur.size
	l.cur = c.next
	c.done = true
	if l.waiting == c.next.name {
		l.waiting = ""
	}
	l.size.Add(c.next.size)
	// The new file is whole; the old one's trouble ends with it. The
	// error stays until FinishRewrite has the base in place, and until
	// then nothing is written to the new file (held).
	if l.broken != nil && l.held == nil {
		l.held = l.broken
	}
	l.broken = nil
	return nil
}

// FinishRewrite completes a rewrite: it writes the base from src (the
// keyspace copied when the cut was appended), makes the manifest name that
// base and the incr files from the cut's on, and removes the files no
// longer named and the model files that neither the base nor a later
// record refers to (live tells which model files, by LogModel.File, the
// base refers to). On error the log stays as BeginRewrite left it: the
// old files, then the new incr; after Close, the error is ErrLogClosed.
func (l *Log) FinishRewrite(cut Op, src func(yield func(Op) error) error, live map[[32]byte]bool) error {
	// Records before the cut must be out of the old files before those go
	// (or, from a broken file, dropped: the base holds them). Those after
	// the cut off a broken file wait for the base (held).
	err := l.Commit(l.Seq())
	l.wmu.Lock()
	if err != nil && !(errors.As(err, new(heldError)) && cut.cut.done) {
		l.wmu.Unlock()
		return err
	}
	n := l.man.next
	l.man.next++
	l.wmu.Unlock()
	base, size, err := l.writeBase(n, src)
	if err != nil {
		return err
	}
	l.wmu.Lock()
	gone, err := l.finishLocked(cut, base, size, live)
	l.wmu.Unlock()
	// The files replaced go once writers no longer wait for it: removing
	// an incr file frees its page cache, 30-76 ms for 64 MiB here.
	l.removeFiles(gone)
	return err
}

// finishLocked is FinishRewrite's work under wmu once the base is
// written: it makes the manifest name the base and the incr files from
// the cut's on, removes the model files no longer referred to, and
// returns the base and incr files to remove.
func (l *Log) finishLocked(cut Op, base string, size int64, live map[[32]byte]bool) ([]string, error) {
	if l.cur == nil {
		// Closed meanwhile (a shutdown does not wait for a rewrite that
		// is not told to stop): the manifest stays as Close left it.
		return []string{base}, ErrLogClosed
	}
	i := 0
	for i < len(l.man.incrs) && l.man.incrs[i] != cut.cut.next.name {
		i++
	}
	m := manifest{base: base, incrs: append([]string(nil), l.man.incrs[i:]...), next: l.man.next}
	if err := l.writeManifest(m); err != nil {
		return []string{base}, err
	}
	l.man = m
	l.baseSize = size
	l.oldSize = 0
	for _, name := range m.incrs[:len(m.incrs)-1] {
		if st, err := os.Stat(filepath.Join(l.o.Dir, name)); err == nil {
			l.oldSize += st.Size()
		}
	}
	l.size.Store(size + l.oldSize + l.cur.size)
	l.removeModelsLocked(live)
	if l.broken == nil {
		l.werr.Store(nil)
	}
	if l.held != nil {
		// The broken file is no longer named: the records that waited
		// go to the new incr file (a failure is the log's error, Err).
		l.held = nil
		l.writeLocked()
	}
	return l.unnamedFiles(m), nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// ---- model files ----

// ModelFileName is the name of the sealed model file that id names (a
// LogModel's File: the model's SHA-256, or a random id): keyed by the seal
// key, so that the name does not tell which publicly known model is stored.
func (l *Log) ModelFileName(id [32]byte) string {
	m := hmac.New(sha256.New, l.o.SealKey)
	m.Write([]byte(modelLabel))
	m.Write(id[:])
	return hex.EncodeToString(m.Sum(nil)[:16]) + ".model"
}

func (l *Log) modelPath(id [32]byte) string {
	return filepath.Join(l.o.Dir, modelsDir, l.ModelFileName(id))
}

// HasModel reports whether the model file id names exists.
func (l *Log) HasModel(id [32]byte) bool {
	_, err := os.Stat(l.modelPath(id))
	return err == nil
}

// ModelWriter seals one model's bytes into its file as they are handed
// over, so that a model can be written while it arrives or compiles.
type ModelWriter struct {
	l     *Log
	f     File
	d     *directWriter // f written with direct I/O (OSFS only: direct.go), or nil
	tmp   string
	h     *logHeader
	index uint64
	buf   []byte
	err   error
}

// NewModelWriter starts a model file.
func (l *Log) NewModelWriter() (*ModelWriter, error) {
	h, err := newLogHeader(l.o.SealKey, kindModel)
	if err != nil {
		return nil, err
	}
	var rnd [8]byte
	copy(rnd[:], h.raw[28:36]) // the salt is random: a fine temporary name
	tmp := filepath.Join(l.o.Dir, modelsDir, ".tmp-"+hex.EncodeToString(rnd[:]))
	w := &ModelWriter{l: l, tmp: tmp, h: h}
	if _, ok := l.fs.(OSFS); ok {
		// The tail left pending between frames is under a block.
		if w.d, err = openDirect(tmp, logHeaderSize+logFrameHdr+modelFramePlain+tagSize); err != nil {
			return nil, err
		}
		w.f = w.d.f
		err = w.d.Commit(append(w.d.Stage(), h.raw[:]...))
	} else {
		if w.f, err = l.fs.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600); err != nil {
			return nil, err
		}
		_, err = w.f.Write(h.raw[:])
	}
	if err != nil {
		w.Abort()
		return nil, err
	}
	return w, nil
}

// Write seals and writes p, a frame at a time.
func (w *ModelWriter) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 && w.err == nil {
		k := min(len(p), modelFramePlain)
		w.frame(0, p[:k])
		p = p[k:]
	}
	if w.err != nil {
		return 0, w.err
	}
	return n, nil
}

func (w *ModelWriter) frame(flags byte, pt []byte) {
	var err error
	if w.d != nil {
		b := w.h.sealFrame(w.d.Stage(), w.index, flags, pt)
		err = w.d.Commit(b)
	} else {
		w.buf = w.h.sealFrame(w.buf[:0], w.index, flags, pt)
		_, err = w.f.Write(w.buf)
	}
	w.index++
	if err != nil {
		w.fail(err)
	}
}

// fail records err and removes the file at once: a writer that failed
// never finishes, and its bytes would otherwise hold the disk (a full one,
// often) until the caller's Abort, which for a resumable upload comes only
// when its session ends.
func (w *ModelWriter) fail(err error) {
	w.err = err
	w.f.Close()
	w.l.fs.Remove(w.tmp)
}

// Finish writes the last frame, holding id (the LogModel.File that will
// name the file: the model's SHA-256 or a random id), and renames the
// file into place, fsyncing the file and then its directory under every
// appendfsync policy: a record, or a rewrite's base, that names a model
// file is written only once the file is on disk. Otherwise the OS could
// write the record back before the file (everysec, no), and a power cut
// would leave a log whose next start fails on a missing model file rather
// than one that lost its last second. The file is mostly written with
// direct I/O, so its fsync has little left to write. The file is claimed
// until a record naming it is written or the caller calls Unclaim
// (removeModelsLocked).
func (w *ModelWriter) Finish(id [32]byte) error {
	if w.err == nil {
		w.frame(lastFrame, id[:])
	}
	if w.err == nil && w.d != nil {
		if err := w.d.Flush(); err != nil {
			w.fail(err)
		}
	}
	err := w.err
	l := w.l
	if err == nil {
		err = w.f.Sync()
	}
	if cerr := w.f.Close(); err == nil {
		err = cerr
	}
	final := l.modelPath(id)
	if err == nil {
		// Claimed before it is in place, not after: a rewrite that lists
		// the directory in between would take it for a file nothing names
		// and remove it, and the record that names it would follow.
		l.wmu.Lock()
		l.unnamed[filepath.Base(final)]++
		l.wmu.Unlock()
		err = l.fs.Rename(w.tmp, final)
	}
	if err == nil {
		err = l.fs.SyncDir(filepath.Join(l.o.Dir, modelsDir))
	}
	if err != nil {
		l.fs.Remove(w.tmp)
		l.Unclaim(id) // the caller stores nothing: the next rewrite may remove it
		err = fmt.Errorf("writing model file: %w", err)
		l.setErr(err)
		return err
	}
	return nil
}

// Abort removes the unfinished file.
func (w *ModelWriter) Abort() {
	w.f.Close()
	w.l.fs.Remove(w.tmp)
}

// ReadModel reads and verifies the model file id names, of size bytes.
func (l *Log) ReadModel(id [32]byte, size int64) ([]byte, error) {
	return l.ReadModelInto(id, size, nil)
}

// ReadModelInto is ReadModel into dst, which has room for size bytes (a
// model buffer the caller made, so that the model is held once); nil dst
// allocates. It returns dst's first size bytes.
func (l *Log) ReadModelInto(id [32]byte, size int64, dst []byte) ([]byte, error) {
	if dst != nil && int64(cap(dst)) < size {
		return nil, fmt.Errorf("persistence: model file: %d bytes of room for %d", cap(dst), size)
	}
	path := l.modelPath(id)
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("persistence: model file %s: %w", filepath.Base(path), err)
	}
	defer f.Close()
	// The file holds at least the model's bytes: size is checked against
	// it before anything is allocated.
	if st, err := f.Stat(); err != nil || st.Size() < size {
		return nil, fmt.Errorf("persistence: model file %s: %w: shorter than the %d bytes the log says", filepath.Base(path), ErrLogCorrupt, size)
	}
	var hb [logHeaderSize]byte
	if _, err := io.ReadFull(f, hb[:]); err != nil {
		return nil, fmt.Errorf("persistence: model file %s: %w: %v", filepath.Base(path), ErrLogCorrupt, err)
	}
	h, err := parseLogHeader(hb[:], l.o.SealKey, kindModel)
	if err != nil {
		return nil, fmt.Errorf("persistence: model file %s: %w", filepath.Base(path), err)
	}
	bad := func(what string) error {
		return fmt.Errorf("persistence: model file %s: %w: %s", filepath.Base(path), ErrLogCorrupt, what)
	}
	var data []byte
	if dst == nil {
		data = make([]byte, 0, size)
	} else {
		data = dst[:0:size]
	}
	frame := make([]byte, logFrameHdr+modelFramePlain+tagSize)
	for index := uint64(0); ; index++ {
		if _, err := io.ReadFull(f, frame[:logFrameHdr]); err != nil {
			return nil, bad("ends before its last frame")
		}
		n := int(uint32(frame[0])<<24 | uint32(frame[1])<<16 | uint32(frame[2])<<8 | uint32(frame[3]))
		if n < tagSize || n > modelFramePlain+tagSize {
			return nil, bad("frame length")
		}
		if _, err := io.ReadFull(f, frame[logFrameHdr:logFrameHdr+n]); err != nil {
			return nil, bad("ends before its last frame")
		}
		pt, flags, _, st := h.openFrame(frame[:logFrameHdr+n], index)
		if st != frameOK {
			return nil, bad(fmt.Sprintf("frame %d fails verification", index))
		}
		if flags == lastFrame {
			if !bytes.Equal(pt, id[:]) || int64(len(data)) != size {
				return nil, bad("is not the model the log names")
			}
			var one [1]byte
			if k, _ := f.Read(one[:]); k != 0 {
				return nil, bad("data after the last frame")
			}
			return data, nil
		}
		if int64(len(data)+len(pt)) > size {
			return nil, bad("longer than the log says")
		}
		data = append(data, pt...)
	}
}

// Unclaim gives up the claim that Finish made on model file id, for a
// model that will not be stored after all (a refused store, a discarded
// transaction, a base that names it): the next rewrite then removes the
// file unless a record names it.
func (l *Log) Unclaim(id [32]byte) {
	l.wmu.Lock()
	l.unclaimLocked(l.ModelFileName(id))
	l.wmu.Unlock()
}

// unclaimLocked drops one claim on the model file name, if any. wmu is held.
func (l *Log) unclaimLocked(name string) {
	if n := l.unnamed[name]; n > 1 {
		l.unnamed[name] = n - 1
	} else {
		delete(l.unnamed, name)
	}
}

// removeModelsLocked removes model files that live does not name, that no
// record written since the last rewrite names, and that no store still
// claims: a model file is claimed before it is renamed into place
// (ModelWriter.Finish) until the record naming it is written, or its
// store gives it up (Unclaim), however many rewrites finish meanwhile.
func (l *Log) removeModelsLocked(live map[[32]byte]bool) {
	keep := map[string]bool{}
	for id := range live {
		keep[l.ModelFileName(id)] = true
	}
	dir := filepath.Join(l.o.Dir, modelsDir)
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		name := e.Name()
		if strings.HasSuffix(name, ".model") && !keep[name] && !l.recent[name] && l.unnamed[name] == 0 {
			l.fs.Remove(filepath.Join(dir, name))
		}
	}
	l.recent = map[string]bool{}
}
