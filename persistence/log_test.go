package persistence

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// logState is a LogSink that applies records to a map, as the server does.
type logState struct {
	keys   map[string]string // key -> description of its value
	expire map[string]int64
}

func newLogState() *logState {
	return &logState{keys: map[string]string{}, expire: map[string]int64{}}
}

func (s *logState) Tensor(t TensorRecord) error {
	s.keys[t.Key] = "tensor:" + string(t.Data)
	s.expire[t.Key] = t.ExpireAtUnixMs
	return nil
}

func (s *logState) Model(m LogModel) error {
	desc := "model:" + string(m.File[:4]) + ":" + m.Tag
	if !m.Digest {
		desc += ":by-id"
	}
	if m.Optimize {
		desc += ":optimize"
	}
	s.keys[m.Key] = desc
	s.expire[m.Key] = m.ExpireAtUnixMs
	return nil
}

func (s *logState) Delete(k string) error { delete(s.keys, k); delete(s.expire, k); return nil }
func (s *logState) Expire(k string, at int64) error {
	if _, ok := s.keys[k]; ok {
		s.expire[k] = at
	}
	return nil
}
func (s *logState) Rename(src, dst string) error {
	v, ok := s.keys[src]
	e := s.expire[src]
	s.Delete(src)
	if ok {
		s.keys[dst], s.expire[dst] = v, e
	}
	return nil
}
func (s *logState) Flush() error {
	clear(s.keys)
	clear(s.expire)
	return nil
}

// source yields the base records of a state.
func (s *logState) source() func(yield func(Op) error) error {
	return func(yield func(Op) error) error {
		keys := make([]string, 0, len(s.keys))
		for k := range s.keys {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			v := strings.TrimPrefix(s.keys[k], "tensor:")
			if err := yield(Op{Tensor: &TensorRecord{Key: k, DType: 3, Shape: []int64{int64(len(v))},
				Data: []byte(v), ExpireAtUnixMs: s.expire[k]}}); err != nil {
				return err
			}
		}
		return nil
	}
}

func tensorOp(k, v string) Op {
	return Op{Tensor: &TensorRecord{Key: k, DType: 3, Shape: []int64{int64(len(v))}, Data: []byte(v)}}
}

func openTestLog(t testing.TB, dir string, fs FS) *Log {
	t.Helper()
	l, err := OpenLog(LogOptions{Dir: dir, SealKey: testKey, FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// replayed opens dir afresh and replays it.
func replayed(t *testing.T, dir string, loadTruncated bool) (*logState, ReplayInfo, error) {
	t.Helper()
	l := openTestLog(t, dir, nil)
	st := newLogState()
	info, err := l.Replay(st, loadTruncated)
	if err == nil {
		t.Cleanup(func() { l.Close() })
	}
	return st, info, err
}

// createdLog is a new log over dir with an empty base.
func createdLog(t *testing.T, dir string) *Log {
	t.Helper()
	l := openTestLog(t, dir, nil)
	if err := l.Create(newLogState().source()); err != nil {
		t.Fatal(err)
	}
	return l
}

// dirNames is the names in dir, sorted, joined by spaces.
func dirNames(dir string) string {
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return strings.Join(names, " ")
}

func commitAll(t *testing.T, l *Log, ops ...Op) {
	t.Helper()
	var seq uint64
	for _, op := range ops {
		seq = l.Append(op)
	}
	if err := l.Commit(seq); err != nil {
		t.Fatal(err)
	}
}

func TestLogReplaysEveryRecordType(t *testing.T) {
	dir := t.TempDir()
	l := createdLog(t, dir)
	commitAll(t, l, tensorOp("a", "1"), tensorOp("b", "2"), tensorOp("c", "3"),
		Op{Del: "b"}, Op{Expire: &ExpireOp{"a", 1893456000000}}, Op{Rename: &[2]string{"c", "d"}})
	commitAll(t, l, Op{Model: &LogModel{ModelRecord: ModelRecord{Key: "m", Tag: "t1", Extra: map[string]string{"x": "y"}},
		File: sha256.Sum256([]byte("model")), Digest: true, Size: 5}})
	// Written to the OS before Commit returns: a new reader sees it all
	// without Close (kill -9 loses nothing).
	st, info, err := replayed(t, dir, false)
	if err != nil {
		t.Fatal(err)
	}
	msum := sha256.Sum256([]byte("model"))
	want := map[string]string{"a": "tensor:1", "d": "tensor:3", "m": "model:" + string(msum[:4]) + ":t1"}
	if !reflect.DeepEqual(st.keys, want) || st.expire["a"] != 1893456000000 {
		t.Fatalf("replayed %v %v, want %v", st.keys, st.expire, want)
	}
	if info.Records != 7 || info.Files != 2 {
		t.Errorf("info %+v", info)
	}
	commitAll(t, l, Op{Flush: true}, tensorOp("z", "9"))
	st, _, err = replayed(t, dir, false)
	if err != nil || !reflect.DeepEqual(st.keys, map[string]string{"z": "tensor:9"}) {
		t.Fatalf("after FLUSH: %v %v", st.keys, err)
	}
}

// Concurrent commits under always: every record written and fsynced, with
// and without Busy (a leader that lets the others queue first).
func TestLogGroupCommitConcurrent(t *testing.T) {
	for _, busy := range []bool{false, true} {
		dir := t.TempDir()
		var asked atomic.Int64
		o := LogOptions{Dir: dir, SealKey: testKey}
		if busy {
			o.Busy = func() bool { asked.Add(1); return true }
		}
		l, err := OpenLog(o)
		if err != nil {
			t.Fatal(err)
		}
		l.SetPolicy(FsyncAlways)
		if err := l.Create(newLogState().source()); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for c := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range 50 {
					seq := l.Append(tensorOp(string(rune('a'+c))+string(rune('0'+i%10)), "v"))
					if err := l.Commit(seq); err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		l.Close()
		st, info, err := replayed(t, dir, false)
		if err != nil || len(st.keys) != 80 || info.Records != 400 {
			t.Fatalf("busy %v: keys %d records %d err %v", busy, len(st.keys), info.Records, err)
		}
		if l.synced.Load() != 400 {
			t.Errorf("busy %v: synced %d under always", busy, l.synced.Load())
		}
		if busy && asked.Load() == 0 {
			t.Error("no leader asked Busy")
		}
	}
}

// TestLogSeqTakesNoLock: Seq, which every logged command reads twice,
// answers while the queue's lock is held (a write's Append on another
// CPU), and follows Append.
func TestLogSeqTakesNoLock(t *testing.T) {
	l := openTestLog(t, t.TempDir(), nil)
	defer l.Close()
	if err := l.Create(newLogState().source()); err != nil {
		t.Fatal(err)
	}
	if got := l.Append(tensorOp("a", "v")); got != 1 || l.Seq() != 1 {
		t.Fatalf("Append %d, Seq %d, want 1 and 1", got, l.Seq())
	}
	l.mu.Lock()
	got := make(chan uint64, 1)
	go func() { got <- l.Seq() }()
	select {
	case n := <-got:
		if n != 1 {
			t.Errorf("Seq %d under the lock, want 1", n)
		}
	case <-time.After(5 * time.Second):
		t.Error("Seq waited for the queue's lock")
		l.mu.Unlock()
		<-got
		return
	}
	l.mu.Unlock()
}

func lastIncr(t *testing.T, dir string) string {
	t.Helper()
	m, err := os.ReadFile(filepath.Join(dir, manifestName))
	if err != nil {
		t.Fatal(err)
	}
	var last string
	for _, line := range strings.Split(string(m), "\n") {
		if name, ok := strings.CutPrefix(line, "incr "); ok {
			last = name
		}
	}
	return filepath.Join(dir, last)
}

func TestLogTornTailIsCut(t *testing.T) {
	for _, tail := range []struct {
		name string
		cut  func(b []byte) []byte
	}{
		{"frame cut short", func(b []byte) []byte { return b[:len(b)-7] }},
		{"only a length", func(b []byte) []byte { return append(b, 0, 0, 1) }},
		{"zeros after", func(b []byte) []byte { return append(b, make([]byte, 4096)...) }},
		{"garbage frame at the end", func(b []byte) []byte { b = bytes.Clone(b); b[len(b)-3] ^= 0xff; return b }},
	} {
		t.Run(tail.name, func(t *testing.T) {
			dir := t.TempDir()
			l := openTestLog(t, dir, nil)
			if err := l.Create(newLogState().source()); err != nil {
				t.Fatal(err)
			}
			commitAll(t, l, tensorOp("kept", "1"))
			commitAll(t, l, tensorOp("torn", "2"))
			l.Close()
			path := lastIncr(t, dir)
			b, _ := os.ReadFile(path)
			os.WriteFile(path, tail.cut(b), 0o600)
			if _, _, err := replayed(t, dir, false); !errors.Is(err, ErrLogTruncated) {
				t.Fatalf("aof-load-truncated no: %v", err)
			}
			st, info, err := replayed(t, dir, true)
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := st.keys["kept"]; !ok || info.CutBytes == 0 {
				t.Fatalf("keys %v info %+v", st.keys, info)
			}
			// Appends go on, in a new incr file (a new frame in the cut
			// one would reuse the torn frame's nonce), and replay whole.
			l2 := openTestLog(t, dir, nil)
			if _, err := l2.Replay(newLogState(), false); err != nil {
				t.Fatal(err)
			}
			commitAll(t, l2, tensorOp("after", "3"))
			l2.Close()
			st, _, err = replayed(t, dir, false)
			if err != nil || st.keys["after"] != "tensor:3" || st.keys["kept"] != "tensor:1" {
				t.Fatalf("after the cut: %v %v", st.keys, err)
			}
		})
	}
}

// A kill -9 during a large write leaves a torn frame of that size: its
// tail of ciphertext is judged torn, and cut off, in a start's time. Looking
// for a whole frame after it took 105 s over 32 MiB when each candidate's
// checksum was computed over its bytes.
func TestLogLargeTornTailIsCutQuickly(t *testing.T) {
	dir := t.TempDir()
	l := createdLog(t, dir)
	commitAll(t, l, tensorOp("kept", "1"))
	l.Close()
	path := lastIncr(t, dir)
	b, _ := os.ReadFile(path)
	// The frame's header claims more than was written, as a write cut
	// short leaves it; the seed keeps the ciphertext the same every run.
	const torn = 64 << 20
	b = binary.BigEndian.AppendUint32(b, torn+4096)
	b = append(b, 0, 0xde, 0xad, 0xbe, 0xef)
	tail := make([]byte, torn)
	mrand.NewChaCha8([32]byte{1}).Read(tail)
	os.WriteFile(path, append(b, tail...), 0o600)
	start := time.Now()
	st, info, err := replayed(t, dir, true)
	took := time.Since(start)
	if err != nil || st.keys["kept"] != "tensor:1" || info.CutBytes != logFrameHdr+torn {
		t.Fatalf("keys %v info %+v err %v", st.keys, info, err)
	}
	if took > 10*time.Second {
		t.Errorf("replaying a log with a %d-byte torn tail took %v", torn, took)
	}
	t.Logf("replayed a %d-byte torn tail in %v", torn, took)
}

// rewriteBegunThenClosed begins a rewrite of l and closes l before it
// ends, as a crash would leave it: the rewrite's new incr file holds a
// record after the cut if written, or only its header.
func rewriteBegunThenClosed(t *testing.T, l *Log, written bool) {
	t.Helper()
	cut, err := l.BeginRewrite()
	if err != nil {
		t.Fatal(err)
	}
	if written {
		l.Append(cut)
		commitAll(t, l, tensorOp("later", "3"))
	} else {
		defer cut.cut.next.f.Close()
	}
	l.Close()
}

// tornBeforeRewrite makes a log whose manifest lists incr.1.log, with a
// torn last frame, then incr.2.log, a rewrite's new incr file (BeginRewrite
// lists it before appends switch to it): with only its header, as a kill -9
// leaves it while writes queued before the cut still go to incr.1.log, or,
// if written, with a frame. It returns incr.1.log's size before the torn
// frame.
func tornBeforeRewrite(t *testing.T, dir string, written bool) int64 {
	t.Helper()
	l := createdLog(t, dir)
	commitAll(t, l, tensorOp("kept", "1"))
	st, _ := os.Stat(filepath.Join(dir, "incr.1.log"))
	commitAll(t, l, tensorOp("torn", "2"))
	rewriteBegunThenClosed(t, l, written)
	path := filepath.Join(dir, "incr.1.log")
	b, _ := os.ReadFile(path)
	os.WriteFile(path, b[:len(b)-7], 0o600)
	if got := lastIncr(t, dir); filepath.Base(got) != "incr.2.log" {
		t.Fatalf("the manifest's last incr is %s", got)
	}
	return st.Size()
}

// A torn tail of an incr file before a rewrite's header-only incr is cut
// off, as it is in the last file, and appends go on into the last.
// The reviewer's start failed: "incr.4.log: append-only log ends in a torn
// frame: 9634304 bytes after frame 7", incr.6.log holding only its header.
func TestLogTornTailBeforeHeaderOnlyIncr(t *testing.T) {
	dir := t.TempDir()
	good := tornBeforeRewrite(t, dir, false)
	if _, _, err := replayed(t, dir, false); !errors.Is(err, ErrLogTruncated) {
		t.Fatalf("aof-load-truncated no: %v", err)
	}
	st, info, err := replayed(t, dir, true)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(st.keys, map[string]string{"kept": "tensor:1"}) || info.CutFile != "incr.1.log" || info.Files != 3 {
		t.Fatalf("keys %v info %+v", st.keys, info)
	}
	size := func(name string) int64 {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
	if size("incr.1.log") != good || size("incr.2.log") != logHeaderSize {
		t.Fatalf("incr.1.log %d bytes, want %d; incr.2.log %d", size("incr.1.log"), good, size("incr.2.log"))
	}
	l := openTestLog(t, dir, nil)
	if _, err := l.Replay(newLogState(), false); err != nil {
		t.Fatal(err)
	}
	commitAll(t, l, tensorOp("after", "4"))
	all := size("base.1.log") + size("incr.1.log") + size("incr.2.log")
	if size("incr.1.log") != good || l.Size() != all {
		t.Errorf("incr.1.log %d bytes, want %d; Size %d, the files %d", size("incr.1.log"), good, l.Size(), all)
	}
	l.Close()
	st, _, err = replayed(t, dir, false)
	if err != nil || !reflect.DeepEqual(st.keys, map[string]string{"kept": "tensor:1", "after": "tensor:4"}) {
		t.Fatalf("after the cut: %v %v", st.keys, err)
	}
}

// An incr file shorter than its own header (only damage does that: the
// header is fsynced before the manifest names the file) is cut off as a
// torn tail with aof-load-truncated yes, and gets a new header: the first
// append after the start sealed its frame with the missing one and
// panicked, at every start (durability review).
func TestLogTornHeaderOfLastIncrIsRenewed(t *testing.T) {
	dir := t.TempDir()
	l := createdLog(t, dir)
	commitAll(t, l, tensorOp("a", "1"))
	cut, err := l.BeginRewrite()
	if err != nil {
		t.Fatal(err)
	}
	l.Append(cut)
	commitAll(t, l, tensorOp("b", "2"))
	l.Close()
	last := lastIncr(t, dir)
	if err := os.Truncate(last, 30); err != nil {
		t.Fatal(err)
	}
	if _, _, err := replayed(t, dir, false); !errors.Is(err, ErrLogTruncated) {
		t.Fatalf("aof-load-truncated no: %v", err)
	}
	l = openTestLog(t, dir, nil)
	st := newLogState()
	info, err := l.Replay(st, true)
	if err != nil || info.CutFile != filepath.Base(last) || info.CutBytes != 30 {
		t.Fatalf("replay: %+v %v", info, err)
	}
	if !reflect.DeepEqual(st.keys, map[string]string{"a": "tensor:1"}) {
		t.Fatalf("keys %v", st.keys)
	}
	commitAll(t, l, tensorOp("c", "3"))
	fi, _ := os.Stat(last)
	if l.Size() <= logHeaderSize || fi.Size() <= logHeaderSize {
		t.Errorf("Size %d, %s %d bytes", l.Size(), last, fi.Size())
	}
	l.Close()
	st, _, err = replayed(t, dir, false)
	if err != nil || !reflect.DeepEqual(st.keys, map[string]string{"a": "tensor:1", "c": "tensor:3"}) {
		t.Fatalf("after the new header: %v %v", st.keys, err)
	}
}

// A torn frame with frames after it in a later incr file is damage, not a
// crash's torn tail: the start stops, and nothing is cut.
func TestLogTornFrameBeforeWrittenIncrRefuses(t *testing.T) {
	dir := t.TempDir()
	tornBeforeRewrite(t, dir, true)
	before, _ := os.Stat(filepath.Join(dir, "incr.1.log"))
	for _, loadTruncated := range []bool{false, true} {
		if _, _, err := replayed(t, dir, loadTruncated); !errors.Is(err, ErrLogCorrupt) || !strings.Contains(err.Error(), "incr.2.log") {
			t.Fatalf("aof-load-truncated %v: %v", loadTruncated, err)
		}
	}
	if after, _ := os.Stat(filepath.Join(dir, "incr.1.log")); after.Size() != before.Size() {
		t.Errorf("incr.1.log cut from %d to %d bytes", before.Size(), after.Size())
	}
}

func TestLogTamperingRefusesStart(t *testing.T) {
	dir := t.TempDir()
	l := createdLog(t, dir)
	commitAll(t, l, tensorOp("a", "1"))
	commitAll(t, l, tensorOp("b", "2"))
	l.Close()
	path := lastIncr(t, dir)
	orig, _ := os.ReadFile(path)
	// Flip a ciphertext byte of the first frame and fix its CRC: whole and
	// checksummed, yet not authentic.
	b := bytes.Clone(orig)
	b[logHeaderSize+logFrameHdr+2] ^= 1
	l1 := int(binary.BigEndian.Uint32(b[logHeaderSize:]))
	body := b[logHeaderSize : logHeaderSize+logFrameHdr+l1]
	binary.BigEndian.PutUint32(body[5:], frameCRC(body))
	os.WriteFile(path, b, 0o600)
	if _, _, err := replayed(t, dir, true); !errors.Is(err, ErrLogCorrupt) {
		t.Fatalf("tampered frame: %v", err)
	}
	// Damage in the middle (bad CRC, frames after it) is not a torn tail.
	b = bytes.Clone(orig)
	b[logHeaderSize+logFrameHdr+2] ^= 1
	os.WriteFile(path, b, 0o600)
	if _, _, err := replayed(t, dir, true); !errors.Is(err, ErrLogCorrupt) {
		t.Fatalf("damaged middle frame: %v", err)
	}
	// A length field damaged, or a frame overwritten with zeros, with
	// frames after it: they read as a frame cut short, but whole frames
	// follow, so it is damage, not a torn tail to cut off.
	b = bytes.Clone(orig)
	b[logHeaderSize+1] ^= 0x10
	os.WriteFile(path, b, 0o600)
	if _, _, err := replayed(t, dir, true); !errors.Is(err, ErrLogCorrupt) {
		t.Fatalf("damaged length of the first frame: %v", err)
	}
	b = bytes.Clone(orig)
	clear(b[logHeaderSize : logHeaderSize+logFrameHdr+l1])
	os.WriteFile(path, b, 0o600)
	if _, _, err := replayed(t, dir, true); !errors.Is(err, ErrLogCorrupt) {
		t.Fatalf("first frame zeroed: %v", err)
	}
	// A manifest edited to drop a file.
	os.WriteFile(path, orig, 0o600)
	mp := filepath.Join(dir, manifestName)
	m, _ := os.ReadFile(mp)
	os.WriteFile(mp, bytes.Replace(m, []byte("next 2"), []byte("next 3"), 1), 0o600)
	if _, _, err := replayed(t, dir, true); !errors.Is(err, ErrLogCorrupt) {
		t.Fatalf("edited manifest: %v", err)
	}
	os.WriteFile(mp, m, 0o600)
	// Another seal key.
	other := bytes.Clone(testKey)
	other[0] ^= 1
	lo, _ := OpenLog(LogOptions{Dir: dir, SealKey: other})
	if _, err := lo.Replay(newLogState(), true); err == nil {
		t.Fatal("another seal key replayed the log")
	}
}

// A MODEL record can name its model file by a random id instead of the
// model's SHA-256 (a large upload, acknowledged before its digest is
// known): the record says which, next to OPTIMIZE in one flags byte, and
// a flags byte with an unknown bit is corruption.
func TestLogModelNamedByID(t *testing.T) {
	dir := t.TempDir()
	l := createdLog(t, dir)
	id := [32]byte{'r', 'a', 'n', 'd'}
	data := []byte("model bytes")
	w, err := l.NewModelWriter()
	if err != nil {
		t.Fatal(err)
	}
	w.Write(data)
	if err := w.Finish(id); err != nil {
		t.Fatal(err)
	}
	if got, err := l.ReadModel(id, int64(len(data))); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read by id: %q %v", got, err)
	}
	sum := sha256.Sum256(data)
	commitAll(t, l,
		Op{Model: &LogModel{ModelRecord: ModelRecord{Key: "a", Tag: "t"}, File: id, Size: int64(len(data))}},
		Op{Model: &LogModel{ModelRecord: ModelRecord{Key: "b", Tag: "t", Optimize: true}, File: id, Size: int64(len(data))}},
		Op{Model: &LogModel{ModelRecord: ModelRecord{Key: "c", Tag: "t", Optimize: true}, File: sum, Digest: true, Size: int64(len(data))}})
	st, _, err := replayed(t, dir, false)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"a": "model:rand:t:by-id", "b": "model:rand:t:by-id:optimize",
		"c": "model:" + string(sum[:4]) + ":t:optimize"}
	if !reflect.DeepEqual(st.keys, want) {
		t.Fatalf("replayed %q, want %q", st.keys, want)
	}
	b, err := appendOp(nil, Op{Model: &LogModel{ModelRecord: ModelRecord{Key: "m"}, File: id}})
	if err != nil {
		t.Fatal(err)
	}
	// The flags byte follows type, key, expiry, file, size, backend,
	// device and tag (empty), batch sizes and timeout.
	at := 1 + 4 + 1 + 8 + 32 + 8 + 3*4 + 4 + 4 + 8
	if b[at] != modelFileID {
		t.Fatalf("flags byte %#x", b[at])
	}
	b[at] |= 1 << 2
	if err := decodeFrame(b, KindIncr, newLogState()); !errors.Is(err, ErrLogCorrupt) {
		t.Errorf("an unknown flag: %v", err)
	}
}

func TestModelFileRoundTrip(t *testing.T) {
	dir := t.TempDir()
	l := openTestLog(t, dir, nil)
	data := bytes.Repeat([]byte("onnx!"), 2<<20) // more than two frames
	sum := sha256.Sum256(data)
	w, err := l.NewModelWriter()
	if err != nil {
		t.Fatal(err)
	}
	w.Write(data[:3<<20])
	w.Write(data[3<<20:])
	if err := w.Finish(sum); err != nil {
		t.Fatal(err)
	}
	if !l.HasModel(sum) {
		t.Fatal("no model file")
	}
	got, err := l.ReadModel(sum, int64(len(data)))
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read back: %v", err)
	}
	// Into the caller's memory (a model buffer): the bytes land there.
	dst := make([]byte, len(data))
	if got, err := l.ReadModelInto(sum, int64(len(data)), dst); err != nil || !bytes.Equal(dst, data) || &got[0] != &dst[0] {
		t.Fatalf("read into dst: %v", err)
	}
	if _, err := l.ReadModelInto(sum, int64(len(data)), dst[:len(dst)-1:len(dst)-1]); err == nil {
		t.Error("read into too little room")
	}
	path := filepath.Join(dir, modelsDir, l.ModelFileName(sum))
	raw, _ := os.ReadFile(path)
	if bytes.Contains(raw, []byte("onnx!onnx!")) {
		t.Fatal("model bytes in the clear on disk")
	}
	if _, err := l.ReadModel(sum, int64(len(data))-1); !errors.Is(err, ErrLogCorrupt) {
		t.Errorf("wrong size: %v", err)
	}
	other := sha256.Sum256([]byte("other"))
	os.Rename(path, filepath.Join(dir, modelsDir, l.ModelFileName(other)))
	if _, err := l.ReadModel(other, int64(len(data))); !errors.Is(err, ErrLogCorrupt) {
		t.Errorf("a model file under another model's name: %v", err)
	}
	os.Rename(filepath.Join(dir, modelsDir, l.ModelFileName(other)), path)
	os.WriteFile(path, raw[:len(raw)-10], 0o600)
	if _, err := l.ReadModel(sum, int64(len(data))); !errors.Is(err, ErrLogCorrupt) {
		t.Errorf("a cut model file: %v", err)
	}
}

func TestRewriteKeepsStateAndRemovesOldFiles(t *testing.T) {
	dir := t.TempDir()
	l := createdLog(t, dir)
	live := newLogState()
	for i := range 100 {
		commitAll(t, l, tensorOp("k", strings.Repeat("x", i)))
	}
	live.keys["k"] = "tensor:" + strings.Repeat("x", 99)
	// An unreferenced model file goes; one referenced stays.
	var sums [][32]byte
	for _, s := range []string{"dead", "alive"} {
		w, _ := l.NewModelWriter()
		w.Write([]byte(s))
		sum := sha256.Sum256([]byte(s))
		w.Finish(sum)
		sums = append(sums, sum)
	}
	l.recent = map[string]bool{} // as after an earlier rewrite
	l.Unclaim(sums[0])           // its store gave it up
	before := l.Size()
	cut, err := l.BeginRewrite()
	if err != nil {
		t.Fatal(err)
	}
	l.Append(cut)
	commitAll(t, l, tensorOp("after", "cut"))
	if err := l.FinishRewrite(cut, live.source(), map[[32]byte]bool{sums[1]: true}); err != nil {
		t.Fatal(err)
	}
	if l.Size() >= before {
		t.Errorf("size %d after rewrite, %d before", l.Size(), before)
	}
	st, info, err := replayed(t, dir, false)
	if err != nil || st.keys["k"] != live.keys["k"] || st.keys["after"] != "tensor:cut" || info.Files != 2 {
		t.Fatalf("after rewrite: %v %+v %v", st.keys, info, err)
	}
	names := dirNames(dir)
	if names != "base.3.log incr.2.log manifest models" {
		t.Errorf("files %v", names)
	}
	if l.HasModel(sums[0]) || !l.HasModel(sums[1]) {
		t.Errorf("model files: dead %v alive %v", l.HasModel(sums[0]), l.HasModel(sums[1]))
	}
}

// A model file is on disk, its directory entry too, before Finish
// returns, under every appendfsync policy: the record (or a rewrite's
// base) naming it follows, and under everysec or no the OS could write
// that back first. A power cut then left a log that named a missing file,
// and the next start failed (durability review: under no the file was
// never fsynced, under everysec a rewrite's manifest came first).
func TestModelFileSyncedBeforeFinishReturns(t *testing.T) {
	for _, p := range []FsyncPolicy{FsyncAlways, FsyncEverysec, FsyncNo} {
		dir := t.TempDir()
		l, fs := createdFaultLog(t, dir)
		l.SetPolicy(p)
		fs.set(func() { fs.events = []string{} }) // recorded from here on
		w, err := l.NewModelWriter()
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte("model bytes"))
		id := [32]byte{'m'}
		if err := w.Finish(id); err != nil {
			t.Fatal(err)
		}
		want := []string{"sync (model being written)", "rename " + filepath.Base(l.modelPath(id)), "syncdir " + modelsDir}
		if !reflect.DeepEqual(fs.events, want) {
			t.Errorf("%v: %q, want %q", p, fs.events, want)
		}
		l.Close()
	}
}

// createdFaultLog is createdLog through a faultFS.
func createdFaultLog(t *testing.T, dir string) (*Log, *faultFS) {
	t.Helper()
	fs := &faultFS{}
	l := openTestLog(t, dir, fs)
	if err := l.Create(newLogState().source()); err != nil {
		t.Fatal(err)
	}
	return l, fs
}

// faultFS wraps OSFS with injected failures, and records the fsyncs,
// renames and directory fsyncs in order once events is not nil.
type faultFS struct {
	OSFS
	mu        sync.Mutex
	events    []string
	writeErr  error  // next writes fail with it (after writing short bytes)
	short     int    // bytes a failing write still writes
	only      string // the file writeErr fails, by base name ("": every file)
	syncErr   error
	renameErr error
	truncErr  error // cutting a file back fails with it
}

type faultFile struct {
	*os.File
	fs *faultFS
}

func (f *faultFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	file, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return faultFile{file, f}, nil
}

// record adds ev to events if they are recorded; f.mu is held.
func (f *faultFS) record(ev string) {
	if f.events != nil {
		f.events = append(f.events, ev)
	}
}

func (f *faultFS) SyncDir(dir string) error {
	f.set(func() { f.record("syncdir " + filepath.Base(dir)) })
	return f.OSFS.SyncDir(dir)
}

func (f *faultFS) Rename(a, b string) error {
	f.mu.Lock()
	err := f.renameErr
	f.record("rename " + filepath.Base(b))
	f.mu.Unlock()
	if err != nil {
		return err
	}
	return os.Rename(a, b)
}

func (f *faultFS) set(fn func()) {
	f.mu.Lock()
	fn()
	f.mu.Unlock()
}

func (f faultFile) Write(p []byte) (int, error) {
	f.fs.mu.Lock()
	err, short := f.fs.writeErr, f.fs.short
	if f.fs.only != "" && f.fs.only != filepath.Base(f.Name()) {
		err = nil
	}
	f.fs.mu.Unlock()
	if err != nil {
		n, _ := f.File.Write(p[:min(short, len(p))])
		return n, err
	}
	return f.File.Write(p)
}

func (f faultFile) Truncate(size int64) error {
	f.fs.mu.Lock()
	err := f.fs.truncErr
	f.fs.mu.Unlock()
	if err != nil {
		return err
	}
	return f.File.Truncate(size)
}

func (f faultFile) Sync() error {
	name := filepath.Base(f.Name())
	if strings.Contains(name, ".tmp") {
		name = "(model being written)"
	}
	f.fs.mu.Lock()
	err := f.fs.syncErr
	f.fs.record("sync " + name)
	f.fs.mu.Unlock()
	if err != nil {
		return err
	}
	return f.File.Sync()
}

func TestLogShortWriteENOSPCRecovers(t *testing.T) {
	dir := t.TempDir()
	l, fs := createdFaultLog(t, dir)
	commitAll(t, l, tensorOp("before", "1"))
	fs.set(func() { fs.writeErr, fs.short = syscall.ENOSPC, 11 })
	seq := l.Append(tensorOp("during", "2"))
	if err := l.Commit(seq); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("commit on a full disk: %v", err)
	}
	if !errors.Is(l.Err(), syscall.ENOSPC) {
		t.Fatalf("Err %v", l.Err())
	}
	// The short write was cut back: the file replays whole, without the
	// record that was not acknowledged.
	st, _, err := replayed(t, dir, false)
	if err != nil || len(st.keys) != 1 {
		t.Fatalf("after the failed write: %v %v", st.keys, err)
	}
	fs.set(func() { fs.writeErr = nil })
	if err := l.Flush(); err != nil || l.Err() != nil {
		t.Fatalf("retry: %v %v", err, l.Err())
	}
	st, _, err = replayed(t, dir, false)
	if err != nil || st.keys["during"] != "tensor:2" {
		t.Fatalf("after the retry: %v %v", st.keys, err)
	}
}

// While a write error on one file (EFBIG: over RLIMIT_FSIZE) holds the
// records before a rewrite's cut, a second rewrite does not begin: each
// retry used to list one more incr file in the manifest, one a second
// (durability review). Once the records are written, rewrites go on.
func TestLogRewriteWaitsForItsCut(t *testing.T) {
	dir := t.TempDir()
	l, fs := createdFaultLog(t, dir)
	commitAll(t, l, tensorOp("before", "1"))
	fs.set(func() { fs.writeErr, fs.only = syscall.EFBIG, "incr.1.log" })
	if err := l.Commit(l.Append(tensorOp("during", "2"))); !errors.Is(err, syscall.EFBIG) {
		t.Fatalf("commit: %v", err)
	}
	cut, err := l.BeginRewrite()
	if err != nil {
		t.Fatal(err)
	}
	l.Append(cut)
	if err := l.FinishRewrite(cut, newLogState().source(), nil); !errors.Is(err, syscall.EFBIG) {
		t.Fatalf("FinishRewrite: %v", err)
	}
	for range 3 {
		if _, err := l.BeginRewrite(); !errors.Is(err, ErrCutWaiting) {
			t.Fatalf("a second rewrite: %v", err)
		}
	}
	if got := dirNames(dir); got != "base.1.log incr.1.log incr.2.log manifest models" {
		t.Errorf("files: %s", got)
	}
	fs.set(func() { fs.writeErr = nil })
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	st := newLogState()
	st.keys["before"], st.keys["during"] = "tensor:1", "tensor:2"
	cut, err = l.BeginRewrite()
	if err != nil {
		t.Fatalf("a rewrite after the write: %v", err)
	}
	l.Append(cut)
	if err := l.FinishRewrite(cut, st.source(), nil); err != nil {
		t.Fatal(err)
	}
	l.Close()
	got, _, err := replayed(t, dir, false)
	if err != nil || !reflect.DeepEqual(got.keys, st.keys) {
		t.Fatalf("replayed %v %v", got.keys, err)
	}
}

func TestLogFsyncFailureNeedsRewrite(t *testing.T) {
	dir := t.TempDir()
	fs := &faultFS{}
	l := openTestLog(t, dir, fs)
	l.SetPolicy(FsyncAlways)
	if err := l.Create(newLogState().source()); err != nil {
		t.Fatal(err)
	}
	commitAll(t, l, tensorOp("a", "1"))
	fs.set(func() { fs.syncErr = syscall.EIO })
	seq := l.Append(tensorOp("b", "2"))
	if err := l.Commit(seq); !errors.Is(err, syscall.EIO) {
		t.Fatalf("commit with fsync failing under always: %v", err)
	}
	fs.set(func() { fs.syncErr = nil })
	// Writing again does not clear the error: the file's pages may be lost.
	if err := l.Flush(); err == nil || l.Err() == nil {
		t.Fatal("the error cleared without a rewrite")
	}
	state := newLogState()
	state.keys["a"], state.keys["b"] = "tensor:1", "tensor:2"
	cut, err := l.BeginRewrite()
	if err != nil {
		t.Fatal(err)
	}
	l.Append(cut)
	if err := l.FinishRewrite(cut, state.source(), nil); err != nil {
		t.Fatal(err)
	}
	if l.Err() != nil {
		t.Fatalf("Err after the rewrite: %v", l.Err())
	}
	commitAll(t, l, tensorOp("c", "3"))
	st, _, err := replayed(t, dir, false)
	if err != nil || len(st.keys) != 3 {
		t.Fatalf("after recovery: %v %v", st.keys, err)
	}
}

// A write cut short whose cutting back fails breaks the file with its
// tail torn (drainLocked); the rewrite that mends it switches appends to a
// new incr file at its cut, but until its base is in place the manifest
// still names the broken file before the new one. Records written to the
// new file meanwhile were acknowledged, and a kill -9 before the base was
// in place left a torn file followed by a written one, which the next
// start refuses as damage: the whole log was lost (or moved aside with
// --load-bad-snapshot). They now wait, answered MISCONF, until the base
// is in place, and are written then.
func TestLogBrokenFileHoldsWritesUntilTheBase(t *testing.T) {
	dir := t.TempDir()
	l, fs := createdFaultLog(t, dir)
	commitAll(t, l, tensorOp("before", "1"))
	fs.set(func() { fs.writeErr, fs.short, fs.truncErr = syscall.EIO, 11, syscall.EIO })
	if err := l.Commit(l.Append(tensorOp("torn", "2"))); !errors.Is(err, syscall.EIO) {
		t.Fatalf("commit with a short write not cut back: %v", err)
	}
	fs.set(func() { fs.writeErr, fs.truncErr = nil, nil })
	cut, err := l.BeginRewrite()
	if err != nil {
		t.Fatal(err)
	}
	l.Append(cut)
	if err := l.Commit(l.Append(tensorOp("after", "3"))); err == nil {
		t.Error("a write after the cut was acknowledged before the rewrite's base was in place")
	}
	if l.Err() == nil {
		t.Error("writes accepted before the rewrite's base was in place")
	}
	// A kill -9 now: the next start loads the log, without the torn tail.
	crashed := t.TempDir()
	if err := os.CopyFS(crashed, os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
	st, info, err := replayed(t, crashed, true)
	if err != nil {
		t.Fatalf("start after a kill -9 before the rewrite's base: %v", err)
	}
	if st.keys["before"] != "tensor:1" || info.CutBytes != 11 {
		t.Errorf("after the crash: %v, %d bytes cut", st.keys, info.CutBytes)
	}
	state := newLogState()
	state.keys["before"], state.keys["torn"] = "tensor:1", "tensor:2"
	if err := l.FinishRewrite(cut, state.source(), nil); err != nil {
		t.Fatal(err)
	}
	if l.Err() != nil {
		t.Fatalf("Err after the rewrite: %v", l.Err())
	}
	commitAll(t, l, tensorOp("later", "4"))
	st, _, err = replayed(t, dir, false)
	if err != nil || len(st.keys) != 4 || st.keys["after"] != "tensor:3" {
		t.Fatalf("after the rewrite: %v %v", st.keys, err)
	}
}

// A rewrite that fails after its cut moved appends off a broken file
// leaves the records after the cut waiting; the next rewrite's base holds
// them, and the records after its own cut are written once it is in place.
func TestLogHeldWritesSurviveAFailedRewrite(t *testing.T) {
	dir := t.TempDir()
	l, fs := createdFaultLog(t, dir)
	commitAll(t, l, tensorOp("before", "1"))
	fs.set(func() { fs.writeErr, fs.short, fs.truncErr = syscall.EIO, 11, syscall.EIO })
	if err := l.Commit(l.Append(tensorOp("torn", "2"))); !errors.Is(err, syscall.EIO) {
		t.Fatalf("commit with a short write not cut back: %v", err)
	}
	fs.set(func() { fs.writeErr, fs.truncErr, fs.only = syscall.ENOSPC, nil, "base.3.log" })
	cut, err := l.BeginRewrite()
	if err != nil {
		t.Fatal(err)
	}
	l.Append(cut)
	if err := l.Commit(l.Append(tensorOp("after", "3"))); err == nil {
		t.Error("a write after the cut was acknowledged before the rewrite's base was in place")
	}
	state := newLogState()
	state.keys["before"], state.keys["torn"] = "tensor:1", "tensor:2"
	if err := l.FinishRewrite(cut, state.source(), nil); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("rewrite with its base failing: %v", err)
	}
	if err := l.Flush(); err == nil || l.Err() == nil {
		t.Fatal("writes accepted after the rewrite failed")
	}
	fs.set(func() { fs.writeErr = nil })
	cut, err = l.BeginRewrite()
	if err != nil {
		t.Fatal(err)
	}
	l.Append(cut)
	seq := l.Append(tensorOp("later", "4"))
	state.keys["after"] = "tensor:3"
	if err := l.FinishRewrite(cut, state.source(), nil); err != nil {
		t.Fatal(err)
	}
	if err := l.Commit(seq); err != nil || l.Err() != nil {
		t.Fatalf("after the rewrite: %v, Err %v", err, l.Err())
	}
	st, _, err := replayed(t, dir, false)
	if err != nil || len(st.keys) != 4 || st.keys["later"] != "tensor:4" {
		t.Fatalf("replayed: %v %v", st.keys, err)
	}
}

func TestEverysecFsyncFailure(t *testing.T) {
	dir := t.TempDir()
	l, fs := createdFaultLog(t, dir)
	commitAll(t, l, tensorOp("a", "1"))
	if err := l.SyncEverysec(); err != nil || l.synced.Load() != 1 {
		t.Fatalf("everysec fsync: %v synced %d", err, l.synced.Load())
	}
	commitAll(t, l, tensorOp("b", "1"))
	fs.set(func() { fs.syncErr = syscall.EIO })
	if err := l.SyncEverysec(); !errors.Is(err, syscall.EIO) || l.Err() == nil {
		t.Fatalf("failed fsync: %v, Err %v", err, l.Err())
	}
}

// A crash between a model file's write and its rename leaves a temporary
// file, removed at the next open; the model is not in the log.
func TestModelFileCrashBeforeRename(t *testing.T) {
	dir := t.TempDir()
	fs := &faultFS{}
	l := openTestLog(t, dir, fs)
	w, err := l.NewModelWriter()
	if err != nil {
		t.Fatal(err)
	}
	w.Write([]byte("model"))
	fs.set(func() { fs.renameErr = syscall.EIO })
	sum := sha256.Sum256([]byte("model"))
	if err := w.Finish(sum); err == nil || l.Err() == nil {
		t.Fatalf("finish with a failing rename: %v", err)
	}
	if l.HasModel(sum) {
		t.Fatal("model file in place after a failed rename")
	}
	// A crash leaves the temporary file: the next open removes it.
	w2, _ := l.NewModelWriter()
	w2.Write([]byte("model"))
	openTestLog(t, dir, nil)
	entries, _ := os.ReadDir(filepath.Join(dir, modelsDir))
	if len(entries) != 0 {
		t.Fatalf("left behind: %v", entries)
	}
}

// A crash between the manifest's temporary file and its rename leaves the
// old manifest, which still names whole files.
func TestManifestCrashBeforeRename(t *testing.T) {
	dir := t.TempDir()
	l, fs := createdFaultLog(t, dir)
	commitAll(t, l, tensorOp("a", "1"))
	fs.set(func() { fs.renameErr = syscall.EIO })
	if _, err := l.BeginRewrite(); err == nil {
		t.Fatal("rewrite began without its manifest")
	}
	fs.set(func() { fs.renameErr = nil })
	commitAll(t, l, tensorOp("b", "2"))
	st, _, err := replayed(t, dir, false)
	if err != nil || len(st.keys) != 2 {
		t.Fatalf("%v %v", st.keys, err)
	}
}

// renameHookFS runs after each rename of a model file into place.
type renameHookFS struct {
	OSFS
	after func()
}

func (f *renameHookFS) Rename(a, b string) error {
	err := os.Rename(a, b)
	if err == nil && strings.HasSuffix(b, ".model") && f.after != nil {
		after := f.after
		f.after = nil
		after()
	}
	return err
}

// A rewrite that lists the model files between a model file's rename into
// place and the record that names it keeps the file: the file was marked
// before the rename. A rewrite racing uploads once removed such a file,
// and the log then named a file that was gone: the server did not start.
func TestRewriteKeepsModelFileAboutToBeNamed(t *testing.T) {
	dir := t.TempDir()
	fs := &renameHookFS{}
	l := openTestLog(t, dir, fs)
	if err := l.Create(newLogState().source()); err != nil {
		t.Fatal(err)
	}
	rewrite := func(live map[[32]byte]bool) { rewriteEmpty(t, l, live) }
	rewrite(nil) // as after an earlier rewrite: nothing marked
	data := []byte("model bytes")
	sum := sha256.Sum256(data)
	fs.after = func() { rewrite(nil) } // its copy was taken before the record
	w, err := l.NewModelWriter()
	if err != nil {
		t.Fatal(err)
	}
	w.Write(data)
	if err := w.Finish(sum); err != nil {
		t.Fatal(err)
	}
	if fs.after != nil {
		t.Fatal("no rewrite ran during the rename")
	}
	if !l.HasModel(sum) {
		t.Fatal("the rewrite removed the model file before its record came")
	}
	commitAll(t, l, Op{Model: &LogModel{ModelRecord: ModelRecord{Key: "m"}, File: sum, Digest: true, Size: int64(len(data))}})
	if got, err := l.ReadModel(sum, int64(len(data))); err != nil || string(got) != string(data) {
		t.Fatalf("ReadModel: %q, %v", got, err)
	}
}

// rewriteEmpty runs a whole rewrite of l to an empty keyspace whose live
// model files are live.
func rewriteEmpty(t *testing.T, l *Log, live map[[32]byte]bool) {
	t.Helper()
	cut, err := l.BeginRewrite()
	if err != nil {
		t.Fatal(err)
	}
	l.Append(cut)
	if err := l.FinishRewrite(cut, newLogState().source(), live); err != nil {
		t.Fatal(err)
	}
}

// A model file put in place stays through any number of rewrites until
// the record naming it is written: a MULTI's stores all compile (and write
// their files) before the first is stored, and the second rewrite to
// finish meanwhile removed the first store's file, so the next start
// failed (review). A file whose store gives it up (Unclaim) goes with the
// next rewrite.
func TestRewritesKeepClaimedModelFile(t *testing.T) {
	dir := t.TempDir()
	l := createdLog(t, dir)
	rewrite := func(live map[[32]byte]bool) { rewriteEmpty(t, l, live) }
	finish := func(s string) [32]byte {
		t.Helper()
		w, err := l.NewModelWriter()
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(s))
		sum := sha256.Sum256([]byte(s))
		if err := w.Finish(sum); err != nil {
			t.Fatal(err)
		}
		return sum
	}
	kept, dropped := finish("stored later"), finish("never stored")
	for range 3 {
		rewrite(nil)
	}
	if !l.HasModel(kept) || !l.HasModel(dropped) {
		t.Fatalf("after 3 rewrites: stored-later file %v, never-stored file %v; want both kept", l.HasModel(kept), l.HasModel(dropped))
	}
	commitAll(t, l, Op{Model: &LogModel{ModelRecord: ModelRecord{Key: "m"}, File: kept, Digest: true, Size: int64(len("stored later"))}})
	l.Unclaim(dropped)
	rewrite(nil) // its copy was taken before the record: the record keeps the file
	if !l.HasModel(kept) {
		t.Fatal("the rewrite after the record removed the file it names")
	}
	if l.HasModel(dropped) {
		t.Error("a file given up (Unclaim) survived a rewrite")
	}
	rewrite(map[[32]byte]bool{kept: true})
	if got, err := l.ReadModel(kept, int64(len("stored later"))); err != nil || string(got) != "stored later" {
		t.Fatalf("ReadModel: %q, %v", got, err)
	}
}

// A model record's size is no longer checked against a limit of the day
// (max-model-size) when the log is read: the model file's own size bounds
// what ReadModel allocates.
func TestReadModelSizeBoundedByItsFile(t *testing.T) {
	l := createdLog(t, t.TempDir())
	w, err := l.NewModelWriter()
	if err != nil {
		t.Fatal(err)
	}
	w.Write([]byte("abc"))
	sum := sha256.Sum256([]byte("abc"))
	if err := w.Finish(sum); err != nil {
		t.Fatal(err)
	}
	if _, err := l.ReadModel(sum, 1<<50); !errors.Is(err, ErrLogCorrupt) {
		t.Fatalf("a size past the file's: %v, want ErrLogCorrupt (before allocating)", err)
	}
	if got, err := l.ReadModel(sum, 3); err != nil || string(got) != "abc" {
		t.Fatalf("ReadModel: %q, %v", got, err)
	}
}

// A crash during a rewrite leaves a base file no manifest names; the next
// start (and the next rewrite) removes it, and nothing else.
func TestUnnamedLogFilesAreRemoved(t *testing.T) {
	dir := t.TempDir()
	l := createdLog(t, dir)
	commitAll(t, l, tensorOp("k", "1"))
	l.Close()
	for _, name := range []string{"base.7.log", "incr.9.log", "notes.txt", "base.x.log"} {
		os.WriteFile(filepath.Join(dir, name), []byte("left by a crash"), 0o600)
	}
	st, _, err := replayed(t, dir, false)
	if err != nil || st.keys["k"] != "tensor:1" {
		t.Fatalf("replay: %v %v", st.keys, err)
	}
	names := dirNames(dir)
	if got := names; got != "base.1.log base.x.log incr.1.log manifest models notes.txt" {
		t.Errorf("files after the start: %s", got)
	}
}

// A log whose manifest is gone is refused, not replaced: starting afresh
// would load an older snapshot and write over the log's files.
func TestMissingManifestRefusesStart(t *testing.T) {
	dir := t.TempDir()
	l := createdLog(t, dir)
	commitAll(t, l, tensorOp("k", "1"))
	l.Close()
	if err := os.Remove(filepath.Join(dir, manifestName)); err != nil {
		t.Fatal(err)
	}
	l2 := openTestLog(t, dir, nil)
	if !l2.Exists() {
		t.Fatal("a directory of log files without a manifest reads as no log")
	}
	_, _, err := replayed(t, dir, true)
	if !errors.Is(err, ErrLogCorrupt) || !strings.Contains(err.Error(), "manifest is missing") {
		t.Fatalf("replay without a manifest: %v", err)
	}
	if l3 := openTestLog(t, t.TempDir(), nil); l3.Exists() {
		t.Error("an empty directory reads as a log")
	}
	// What a first Create cut short before its manifest leaves (base.1, a
	// header-only incr.1) is not a log: a new Create replaces it.
	cut := t.TempDir()
	l4 := createdLog(t, cut)
	l4.Close()
	os.Remove(filepath.Join(cut, manifestName))
	if openTestLog(t, cut, nil).Exists() {
		t.Error("an interrupted first Create reads as a log")
	}
	l5 := createdLog(t, cut)
	commitAll(t, l5, tensorOp("k", "1"))
	l5.Close()
	if st, _, err := replayed(t, cut, false); err != nil || st.keys["k"] != "tensor:1" {
		t.Fatalf("after a new Create: %v %v", st.keys, err)
	}
	// A base written by a rewrite is a log's, empty incr or not.
	os.Remove(filepath.Join(cut, manifestName))
	os.Rename(filepath.Join(cut, "base.1.log"), filepath.Join(cut, "base.3.log"))
	os.Truncate(filepath.Join(cut, "incr.1.log"), logHeaderSize)
	if !openTestLog(t, cut, nil).Exists() {
		t.Error("a rewrite's base without a manifest reads as no log")
	}
}

func TestLockDir(t *testing.T) {
	dir := t.TempDir()
	release, err := LockDir(dir)
	if errors.Is(err, ErrNoLock) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if _, err := LockDir(dir); err == nil || !strings.Contains(err.Error(), "in use by another server") {
		t.Fatalf("second lock: %v", err)
	}
	release()
	release()
	again, err := LockDir(dir)
	if err != nil {
		t.Fatalf("lock after release: %v", err)
	}
	again()
}

// A model writer whose write fails removes its file at once, not when its
// caller (a resumable upload's session, perhaps hours later) aborts it.
func TestModelWriterFailureRemovesFile(t *testing.T) {
	dir := t.TempDir()
	fs := &faultFS{}
	l := openTestLog(t, dir, fs)
	w, err := l.NewModelWriter()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(bytes.Repeat([]byte("m"), 3*modelFramePlain)); err != nil {
		t.Fatal(err)
	}
	fs.set(func() { fs.writeErr, fs.short = syscall.ENOSPC, 100 })
	if _, err := w.Write([]byte("more")); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("write on a full disk: %v", err)
	}
	if entries, _ := os.ReadDir(filepath.Join(dir, modelsDir)); len(entries) != 0 {
		t.Fatalf("left behind after the failed write: %v", entries)
	}
	if err := w.Finish(sha256.Sum256([]byte("m"))); err == nil {
		t.Fatal("a failed writer finished")
	}
	w.Abort()
}

// A large record is sealed where its plaintext lies (sealLocked): the log
// holds it once beside the value, not twice, and the frames it writes are
// the ones the copying path writes (they replay).
func TestLogLargeRecordSealedInPlace(t *testing.T) {
	dir := t.TempDir()
	l := createdLog(t, dir)
	commitAll(t, l, tensorOp("small", "1"))
	big := strings.Repeat("x", 32<<20)
	ops := []Op{tensorOp("small2", "2"), tensorOp("big", big), tensorOp("small3", "3")}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	commitAll(t, l, ops...)
	runtime.ReadMemStats(&after)
	if got := after.TotalAlloc - before.TotalAlloc; got > 48<<20 {
		t.Errorf("a 32 MiB record allocated %d MiB in the log, want one copy (under 48)", got>>20)
	}
	l.Close()
	st, _, err := replayed(t, dir, false)
	if err != nil || st.keys["big"] != "tensor:"+big || st.keys["small3"] != "tensor:3" || st.keys["small2"] != "tensor:2" {
		t.Fatalf("replay: %v (%d keys)", err, len(st.keys))
	}
}

// frameLengths lists the ciphertext length of each frame of the log file
// at path.
func frameLengths(t *testing.T, path string) []int {
	t.Helper()
	var out []int
	for _, f := range logFrames(t, path) {
		out = append(out, f.length)
	}
	return out
}

// logFrame is where a frame of a log file lies, and its flags.
type logFrame struct {
	off, length int
	flags       byte
}

// logFrames lists the frames of the log file at path.
func logFrames(t *testing.T, path string) []logFrame {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []logFrame
	for off := logHeaderSize; off+logFrameHdr <= len(b); {
		n := int(binary.BigEndian.Uint32(b[off:]))
		out = append(out, logFrame{off, n, b[off+4]})
		off += logFrameHdr + n
	}
	return out
}

// An atomic unit (a MULTI/EXEC's records) is written only once it has
// ended, even when a leader writes meanwhile: a group commit of a record
// before it, and the everysec tick, write that record alone.
func TestLogUnitWaitsForItsEnd(t *testing.T) {
	dir := t.TempDir()
	l := createdLog(t, dir)
	path := lastIncr(t, dir)
	before := l.Append(tensorOp("before", "0"))
	val := strings.Repeat("v", 1<<20)
	l.BeginUnit()
	var seq uint64
	for i := range 12 { // 12 MiB: past frameTarget and drainAt
		seq = l.Append(tensorOp(fmt.Sprintf("t%02d", i), val))
		if i == 5 {
			if err := l.Commit(before); err != nil {
				t.Fatal(err)
			}
			if err := l.SyncEverysec(); err != nil {
				t.Fatal(err)
			}
			if got := frameLengths(t, path); len(got) != 1 || l.Written() != before {
				t.Fatalf("half a unit appended: frames %v, written %d; want the record before it alone (%d)", got, l.Written(), before)
			}
		}
	}
	l.EndUnit()
	if err := l.Commit(seq); err != nil {
		t.Fatal(err)
	}
	l.Close()
	st, _, err := replayed(t, dir, false)
	if err != nil || len(st.keys) != 13 {
		t.Fatalf("replayed %d keys, %v; want 13", len(st.keys), err)
	}
}

// A unit of any size is replayed all or none: its records go into frames
// as they fill (1 MiB, written every 8 MiB: the unit is not held whole a
// second time), every one but its last flagged frameUnitMore, and a log
// cut at any of its frame boundaries or inside any of its frames brings
// back none of it: with aof-load-truncated no the start refuses, with yes
// the unit is cut off, and appends go on in a new incr file. Frames of at
// most 16 MiB, each atomic alone, brought back the first 16 MiB of a
// larger unit.
func TestLogUnitOverManyFramesIsAllOrNone(t *testing.T) {
	dir := t.TempDir()
	l := createdLog(t, dir)
	path := lastIncr(t, dir)
	commitAll(t, l, tensorOp("before", "0"))
	val := strings.Repeat("v", 1<<20)
	const n = 20 // 20 MiB: past the 16 MiB that frames of units were split at
	l.BeginUnit()
	var seq uint64
	for i := range n {
		seq = l.Append(tensorOp(fmt.Sprintf("t%02d", i), val))
	}
	l.EndUnit()
	if err := l.Commit(seq); err != nil {
		t.Fatal(err)
	}
	l.Close()
	frames := logFrames(t, path)
	unit := frames[1:]
	if len(unit) < 3 {
		t.Fatalf("frames %v: want the unit in several", frames)
	}
	for i, f := range frames {
		want := byte(frameUnitMore)
		if i == 0 || i == len(frames)-1 {
			want = 0
		}
		if f.flags != want || f.length > 2<<20 {
			t.Fatalf("frame %d of %v: flags %d, want %d, and at most 2 MiB", i, frames, f.flags, want)
		}
	}
	st, _, err := replayed(t, dir, false)
	if err != nil || len(st.keys) != n+1 {
		t.Fatalf("replayed %d keys, %v; want %d", len(st.keys), err, n+1)
	}
	whole, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	manifest, err := os.ReadFile(filepath.Join(dir, manifestName))
	if err != nil {
		t.Fatal(err)
	}
	var cuts []int // after each of the unit's frames but the last, and inside each
	for i, f := range unit {
		cuts = append(cuts, f.off+logFrameHdr+f.length/2)
		if i < len(unit)-1 {
			cuts = append(cuts, f.off+logFrameHdr+f.length)
		}
	}
	for _, at := range cuts {
		cdir := t.TempDir()
		os.WriteFile(filepath.Join(cdir, manifestName), manifest, 0o600)
		os.WriteFile(filepath.Join(cdir, "base.1.log"), mustRead(t, filepath.Join(dir, "base.1.log")), 0o600)
		os.WriteFile(filepath.Join(cdir, filepath.Base(path)), whole[:at], 0o600)
		if _, _, err := replayed(t, cdir, false); !errors.Is(err, ErrLogTruncated) {
			t.Fatalf("cut at %d, aof-load-truncated no: %v, want ErrLogTruncated", at, err)
		}
		st, info, err := replayed(t, cdir, true)
		if err != nil || !reflect.DeepEqual(st.keys, map[string]string{"before": "tensor:0"}) || info.CutBytes != int64(at-unit[0].off) {
			t.Fatalf("cut at %d: %d keys, info %+v, %v; want the record before the unit alone", at, len(st.keys), info, err)
		}
	}
	// The last cut's log: cut back to the unit's start, it takes appends
	// in a new incr file (a new frame in the old one would have been
	// sealed with the nonce of a frame cut off), and replays whole.
	cdir := t.TempDir()
	os.CopyFS(cdir, os.DirFS(dir))
	os.WriteFile(filepath.Join(cdir, filepath.Base(path)), whole[:unit[1].off], 0o600)
	l = openTestLog(t, cdir, nil)
	if _, err := l.Replay(newLogState(), true); err != nil {
		t.Fatal(err)
	}
	commitAll(t, l, tensorOp("after", "1"))
	l.Close()
	if got := lastIncr(t, cdir); got == filepath.Join(cdir, filepath.Base(path)) {
		t.Errorf("appends went on in the cut file %s", got)
	}
	if fi, _ := os.Stat(filepath.Join(cdir, filepath.Base(path))); fi.Size() != int64(unit[0].off) {
		t.Errorf("the cut file holds %d bytes, want %d", fi.Size(), unit[0].off)
	}
	st, _, err = replayed(t, cdir, false)
	if err != nil || !reflect.DeepEqual(st.keys, map[string]string{"before": "tensor:0", "after": "tensor:1"}) {
		t.Fatalf("after the cut: %v, %v", st.keys, err)
	}
}

// A unit never spans two incr files, and one that an incr file ends
// inside is a write cut short, judged as a torn frame: cut off when only
// bare headers follow (a rewrite's new incr file, listed before appends
// switch to it), damage when a later file was written to.
func TestLogUnfinishedUnitBeforeARewritesIncr(t *testing.T) {
	for _, written := range []bool{false, true} {
		dir := t.TempDir()
		l := createdLog(t, dir)
		commitAll(t, l, tensorOp("kept", "1"))
		l.BeginUnit()
		for i := range 3 {
			l.Append(tensorOp(fmt.Sprint("u", i), strings.Repeat("v", 1<<20)))
		}
		l.EndUnit()
		if err := l.Commit(l.Seq()); err != nil {
			t.Fatal(err)
		}
		rewriteBegunThenClosed(t, l, written)
		path := filepath.Join(dir, "incr.1.log")
		frames := logFrames(t, path)
		if len(frames) != 4 || frames[2].flags != frameUnitMore {
			t.Fatalf("frames %v, want a record, then the unit in 3", frames)
		}
		if err := os.Truncate(path, int64(frames[3].off)); err != nil {
			t.Fatal(err)
		}
		st, info, err := replayed(t, dir, true)
		if written {
			if !errors.Is(err, ErrLogCorrupt) || !strings.Contains(err.Error(), "incr.2.log") {
				t.Fatalf("a later incr file written to: %v, want ErrLogCorrupt", err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(st.keys, map[string]string{"kept": "tensor:1"}) || info.CutFile != "incr.1.log" {
			t.Fatalf("keys %v, info %+v, %v", st.keys, info, err)
		}
		if got := filepath.Base(lastIncr(t, dir)); got != "incr.2.log" {
			t.Errorf("appends go to %s, want incr.2.log (not cut, of this version)", got)
		}
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Units nest (EXEC around a multi-key update): the outermost counts. A
// Commit of a record inside an open unit (another client's, appended
// meanwhile) waits for the unit's end, and a unit that appends nothing
// leaves the queue as it was.
func TestLogUnitsNestAndCommitWaits(t *testing.T) {
	dir := t.TempDir()
	l := createdLog(t, dir)
	l.BeginUnit()
	l.EndUnit() // empty
	l.BeginUnit()
	l.Append(tensorOp("a", "1"))
	l.BeginUnit()
	l.Append(tensorOp("b", "2"))
	l.EndUnit()
	other := l.Append(tensorOp("c", "3"))
	done := make(chan error, 1)
	go func() { done <- l.Commit(other) }()
	select {
	case err := <-done:
		t.Fatalf("a Commit inside an open unit returned (%v) before the unit ended: written %d", err, l.Written())
	case <-time.After(100 * time.Millisecond):
	}
	last := l.Append(tensorOp("d", "4"))
	l.EndUnit()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the Commit waiting for the unit never returned")
	}
	if l.Written() < last {
		t.Fatalf("written %d, want the whole unit (%d)", l.Written(), last)
	}
	if got := frameLengths(t, lastIncr(t, dir)); len(got) != 1 {
		t.Fatalf("frames %v, want one", got)
	}
	// Records after the unit are written on their own.
	commitAll(t, l, tensorOp("e", "5"))
	l.Close()
	st, _, err := replayed(t, dir, false)
	if err != nil || len(st.keys) != 5 {
		t.Fatalf("replayed %v, %v", st.keys, err)
	}
}

// Frames are split where the next record would pass frameLimit (lowered
// here, below frameTarget), inside a unit too: no frame the writer makes
// is longer than a reader takes, and the unit replays whole.
func TestLogUnitOverFrameLimitIsSplit(t *testing.T) {
	defer func(v int) { frameLimit = v }(frameLimit)
	frameLimit = 3*(100<<10) + 4096 // 3 records of 100 KiB
	dir := t.TempDir()
	l := createdLog(t, dir)
	val := strings.Repeat("v", 100<<10)
	l.BeginUnit()
	var seq uint64
	for i := range 8 {
		seq = l.Append(tensorOp(fmt.Sprintf("t%d", i), val))
	}
	l.EndUnit()
	if err := l.Commit(seq); err != nil {
		t.Fatal(err)
	}
	got := logFrames(t, lastIncr(t, dir))
	for _, f := range got {
		if f.length > frameLimit {
			t.Fatalf("frames %v, one over the limit %d", got, frameLimit)
		}
	}
	if len(got) != 3 || got[0].flags != frameUnitMore || got[1].flags != frameUnitMore || got[2].flags != 0 {
		t.Errorf("frames %v, want 3 (3 records to a frame, the last 2), the first two flagged frameUnitMore", got)
	}
	l.Close()
	st, _, err := replayed(t, dir, false)
	if err != nil || len(st.keys) != 8 {
		t.Fatalf("replayed %d keys, %v", len(st.keys), err)
	}
}

// opSize, which the writer uses to keep frames within frameLimit, is the
// length appendOp encodes.
func TestOpSizeIsEncodedLength(t *testing.T) {
	for _, op := range []Op{
		{Tensor: &TensorRecord{Key: "k", Owner: "o", DType: 3, Shape: []int64{2, 3}, Data: make([]byte, 6)}},
		{Model: &LogModel{ModelRecord: ModelRecord{Key: "m", Backend: "ONNX", Device: "CPU", Tag: "t", ID: "id", Owner: "u",
			Extra: map[string]string{"a": "bb", "ccc": ""}}, Size: 5}},
		{Del: "gone"}, {Expire: &ExpireOp{"k", 5}}, {Rename: &[2]string{"src", "dst"}}, {Flush: true},
	} {
		b, err := appendOp(nil, op)
		if err != nil || len(b) != opSize(op) {
			t.Errorf("%+v: encoded %d bytes (%v), opSize %d", op, len(b), err, opSize(op))
		}
	}
}

// A record fits one frame of at most frameLimit (lowered here, as a
// stand-in for maxLogFrame): one whose frame is exactly the limit, past
// frameTarget and drainAt, is written and replays; one byte more is
// refused by Loggable, which the keyspace asks before it takes a value.
// Builds before this one wrote any record in one frame while readers took
// frames of at most 1 GiB: a tensor over 1 GiB was acknowledged, then cut
// off as torn at the next start.
func TestLogRecordUpToFrameLimit(t *testing.T) {
	defer func(v int) { frameLimit = v }(frameLimit)
	frameLimit = 9<<20 + 77
	if maxLogFrame < 1<<30+tagSize {
		t.Fatal("maxLogFrame must read the frames of up to 1 GiB that older builds wrote")
	}
	fill := frameLimit - tagSize - opSize(tensorOp("big", ""))
	op := tensorOp("big", strings.Repeat("x", fill))
	if err := Loggable(op); err != nil {
		t.Fatal(err)
	}
	if err := Loggable(tensorOp("big", strings.Repeat("x", fill+1))); !errors.Is(err, ErrUnloggable) {
		t.Fatalf("a record one byte over the frame: %v, want ErrUnloggable", err)
	}
	if err := Loggable(Op{Tensor: &TensorRecord{Key: "k", Shape: make([]int64, MaxRank+1)}}); !errors.Is(err, ErrUnloggable) {
		t.Fatalf("rank %d: %v", MaxRank+1, err)
	}
	dir := t.TempDir()
	l := createdLog(t, dir)
	commitAll(t, l, tensorOp("small", "1"), op, tensorOp("after", "2"))
	got := frameLengths(t, lastIncr(t, dir))
	if len(got) != 3 || got[1] != frameLimit {
		t.Fatalf("frames %v, want the large record alone in a frame of %d", got, frameLimit)
	}
	l.Close()
	st, _, err := replayed(t, dir, false)
	if err != nil || len(st.keys["big"]) != len("tensor:")+fill || st.keys["after"] != "tensor:2" {
		t.Fatalf("replay: %v, %d keys", err, len(st.keys))
	}
}

// A record the log cannot hold, should one reach it past Loggable, breaks
// the file: the records queued after it are not dropped while their
// Commits succeed. writeLocked returned appendOp's error having taken the
// whole batch off the queue, and the next Commit of a record after it
// reported it written.
func TestLogUnloggableRecordDropsNothingSilently(t *testing.T) {
	dir := t.TempDir()
	l := createdLog(t, dir)
	commitAll(t, l, tensorOp("before", "0"))
	l.Append(Op{Tensor: &TensorRecord{Key: "bad", Shape: make([]int64, MaxRank+1)}})
	after := l.Append(tensorOp("after", "1"))
	if err := l.Commit(after); err == nil {
		t.Fatal("Commit succeeded past an unloggable record")
	}
	if err := l.Commit(after); err == nil || l.Written() >= after {
		t.Fatalf("a second Commit: %v, written %d: the record after it (%d) reported written", err, l.Written(), after)
	}
	if l.Err() == nil {
		t.Fatal("the log reports no error: writes would be accepted again")
	}
}

// A torn tail whose length field passes what is left of the file, even by
// gigabytes (a frame of over 1 GiB, the old limit, and the largest a
// length says), is torn and cut off, and replay allocates no more than
// the file holds.
func TestLogTornLengthPastTheFileIsTorn(t *testing.T) {
	for _, claim := range []uint32{1<<30 + 1<<20, 1<<32 - 1} {
		t.Run(fmt.Sprint(claim), func(t *testing.T) {
			dir := t.TempDir()
			l := createdLog(t, dir)
			commitAll(t, l, tensorOp("kept", "1"))
			l.Close()
			path := lastIncr(t, dir)
			b, _ := os.ReadFile(path)
			hdr := binary.BigEndian.AppendUint32(nil, claim)
			b = append(append(b, hdr...), make([]byte, 4096)...)
			b[len(b)-4096+1] = 7 // not all zeros after the length
			os.WriteFile(path, b, 0o600)
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			st, info, err := replayed(t, dir, true)
			runtime.ReadMemStats(&after)
			if err != nil || st.keys["kept"] != "tensor:1" || info.CutBytes != 4+4096 {
				t.Fatalf("replay: %v, keys %v, info %+v", err, st.keys, info)
			}
			if got := after.TotalAlloc - before.TotalAlloc; got > 16<<20 {
				t.Errorf("replay allocated %d MiB for a file of %d bytes", got>>20, len(b))
			}
		})
	}
}

// discardSink takes records and keeps nothing.
type discardSink struct{}

func (discardSink) Tensor(TensorRecord) error   { return nil }
func (discardSink) Model(LogModel) error        { return nil }
func (discardSink) Delete(string) error         { return nil }
func (discardSink) Expire(string, int64) error  { return nil }
func (discardSink) Rename(string, string) error { return nil }
func (discardSink) Flush() error                { return nil }

// Replay reads a frame at a time and decrypts it in place: it allocates
// one frame's buffer and the values it hands on, not the whole file and
// each frame's plaintext besides (it read the whole file: with frames up to
// 4 GiB, and an incr file that grows without a rewrite, that was the log's
// size in memory). The values of a unit spread over frames are held until
// its last frame, as decoded: copied once, not kept as frames and then
// decoded.
func TestLogReplayHoldsAFrameNotTheFile(t *testing.T) {
	for _, unit := range []bool{false, true} {
		dir := t.TempDir()
		l := createdLog(t, dir)
		if unit {
			l.BeginUnit()
		}
		for i := range 4 {
			l.Append(tensorOp(fmt.Sprint(i), strings.Repeat("x", 16<<20)))
		}
		if unit {
			l.EndUnit()
		}
		if err := l.Commit(l.Seq()); err != nil {
			t.Fatal(err)
		}
		l.Close()
		if unit && len(logFrames(t, lastIncr(t, dir))) != 4 {
			t.Fatalf("frames %v, want the unit in 4", logFrames(t, lastIncr(t, dir)))
		}
		l = openTestLog(t, dir, nil)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		info, err := l.Replay(discardSink{}, false)
		runtime.ReadMemStats(&after)
		if err != nil || info.Records != 4 {
			t.Fatalf("unit %v: replay: %v, %+v", unit, err, info)
		}
		l.Close()
		// 64 MiB of values handed on, one 16 MiB frame buffer: 80 MiB. The
		// whole file and each frame's plaintext made 192.
		if got := after.TotalAlloc - before.TotalAlloc; got > 100<<20 {
			t.Errorf("unit %v: replay of 64 MiB of tensors allocated %d MiB, want under 100", unit, got>>20)
		}
	}
}

// A rewrite whose log is closed under it ends with ErrLogClosed, and so do
// a rewrite begun and a Commit made after Close, where each read the
// closed log (a nil dereference ended the server at SHUTDOWN during
// BGREWRITEAOF: concurrency review). The log holds what it held.
func TestRewriteAfterCloseIsRefused(t *testing.T) {
	dir := t.TempDir()
	l := createdLog(t, dir)
	live := newLogState()
	commitAll(t, l, tensorOp("k", "v"))
	live.keys["k"] = "tensor:v"
	cut, err := l.BeginRewrite()
	if err != nil {
		t.Fatal(err)
	}
	l.Append(cut)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.FinishRewrite(cut, live.source(), nil); !errors.Is(err, ErrLogClosed) {
		t.Errorf("FinishRewrite after Close: %v", err)
	}
	if _, err := l.BeginRewrite(); !errors.Is(err, ErrLogClosed) {
		t.Errorf("BeginRewrite after Close: %v", err)
	}
	if err := l.Commit(l.Append(tensorOp("late", "x"))); !errors.Is(err, ErrLogClosed) {
		t.Errorf("Commit after Close: %v", err)
	}
	st, _, err := replayed(t, dir, false)
	if err != nil || st.keys["k"] != "tensor:v" || len(st.keys) != 1 {
		t.Fatalf("after: %v %v", st.keys, err)
	}
	if names := dirNames(dir); strings.Contains(names, "base.3") {
		t.Errorf("the rewrite's base was left: %v", names)
	}
}

// removeHookFS runs hook before each removal.
type removeHookFS struct {
	OSFS
	hook func(name string)
}

func (f *removeHookFS) Remove(name string) error {
	if f.hook != nil {
		f.hook(name)
	}
	return f.OSFS.Remove(name)
}

// The base and incr files a rewrite replaced are removed once wmu is
// released: removing an incr file frees its page cache (30-76 ms for
// 64 MiB here), and writers waited for it.
func TestRewriteRemovesReplacedFilesOutsideWmu(t *testing.T) {
	dir := t.TempDir()
	fs := &removeHookFS{}
	l := openTestLog(t, dir, fs)
	if err := l.Create(newLogState().source()); err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	commitAll(t, l, tensorOp("k", "1"))
	var removed, held []string
	fs.hook = func(name string) {
		removed = append(removed, filepath.Base(name))
		if !l.wmu.TryLock() {
			held = append(held, filepath.Base(name))
			return
		}
		l.wmu.Unlock()
	}
	rewriteEmpty(t, l, nil)
	if !reflect.DeepEqual(removed, []string{"base.1.log", "incr.1.log"}) || held != nil {
		t.Errorf("removed %q, %q of them under wmu", removed, held)
	}
}
