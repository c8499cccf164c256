package commands

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/enclaveai/enclaveai/config"
	"github.com/enclaveai/enclaveai/modelstore"
	"github.com/enclaveai/enclaveai/persistence"
)

// failFS is the OS's file layer with writes and fsyncs that fail on demand.
type failFS struct {
	persistence.OSFS
	mu       sync.Mutex
	writeErr error
	syncErr  error
}

type failFile struct {
	*os.File
	fs *failFS
}

func (f *failFS) OpenFile(name string, flag int, perm os.FileMode) (persistence.File, error) {
	file, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return failFile{file, f}, nil
}

func (f *failFS) fail(write, sync error) {
	f.mu.Lock()
	f.writeErr, f.syncErr = write, sync
	f.mu.Unlock()
}

func (f failFile) Write(p []byte) (int, error) {
	f.fs.mu.Lock()
	err := f.fs.writeErr
	f.fs.mu.Unlock()
	if err != nil {
		// A short write, as a full disk gives: the log must cut it back.
		n, _ := f.File.Write(p[:len(p)/2])
		return n, err
	}
	return f.File.Write(p)
}

func (f failFile) Sync() error {
	f.fs.mu.Lock()
	err := f.fs.syncErr
	f.fs.mu.Unlock()
	if err != nil {
		return err
	}
	return f.File.Sync()
}

var aofTestKey = []byte("0123456789abcdef0123456789abcdef")

// newLogHarness is a harness whose server logs to dir through fs.
func newLogHarness(t *testing.T, dir string, fs persistence.FS, fsync string) *harness {
	t.Helper()
	opts := config.Default()
	opts.Dir = dir
	opts.Save.Store(new(string))
	opts.AppendFsync.Store(&fsync)
	h := newHarnessOpts(t, opts)
	h.s.Snapshot.SealKey = aofTestKey
	h.s.LogFS = fs
	if err := h.s.LoadData(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.s.CloseLog)
	return h
}

// waitFor ticks the server until cond holds.
func waitFor(t *testing.T, h *harness, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		h.s.Tick()
		time.Sleep(20 * time.Millisecond)
	}
}

func TestMisconfOnFullDisk(t *testing.T) {
	dir := t.TempDir()
	fs := &failFS{}
	h := newLogHarness(t, dir, fs, "everysec")
	h.run(row("AI.TENSORSET a INT8 1 VALUES 1", "+OK"))
	fs.fail(syscall.ENOSPC, nil)
	h.run(
		// The write is in memory but not in the log: not acknowledged.
		row("AI.TENSORSET b INT8 1 VALUES 2", "-MISCONF Errors writing to the AOF file: no space left on device"),
		// Further writes are refused before they run; reads go on.
		row("AI.TENSORSET c INT8 1 VALUES 3", "-MISCONF Errors writing to the AOF file: no space left on device"),
		row("DEL a", "-MISCONF Errors writing to the AOF file: no space left on device"),
		row("AI.TENSORGET a VALUES", "[:1]"),
		row("EXISTS c", ":0"),
	)
	if got := infoField(h, "aof_last_write_status"); got != "err" {
		t.Errorf("aof_last_write_status %q", got)
	}
	fs.fail(nil, nil)
	waitFor(t, h, "the log to be written again", func() bool { return h.s.aof().Err() == nil })
	h.run(row("AI.TENSORSET c INT8 1 VALUES 3", "+OK"))
	h.s.CloseLog()
	// What was queued at the failure reached the log with the retry.
	h2 := newLogHarness(t, dir, nil, "everysec")
	h2.run(row("EXISTS a b c", ":3"))
}

// A transaction queued before the log failed is refused whole at EXEC,
// as Redis refuses an EXEC with writes under MISCONF: nothing in it runs
// (durability review: the queued writes changed memory, and each reply
// was a MISCONF). One with reads only still runs.
func TestMisconfRefusesExecWithWrites(t *testing.T) {
	fs := &failFS{}
	h := newLogHarness(t, t.TempDir(), fs, "everysec")
	h.run(
		row("AI.TENSORSET a INT8 1 VALUES 1", "+OK"),
		row("MULTI", "+OK"),
		row("AI.TENSORSET b INT8 1 VALUES 2", "+QUEUED"),
		row("DEL a", "+QUEUED"),
	)
	fs.fail(syscall.ENOSPC, nil)
	// Another client's write meets the failure.
	h.client("127.0.0.1:2").run(row("AI.TENSORSET c INT8 1 VALUES 3", "-MISCONF Errors writing to the AOF file: no space left on device"))
	h.run(
		row("EXEC", "-EXECABORT Transaction discarded because of: MISCONF Errors writing to the AOF file: no space left on device"),
		row("EXEC", "-ERR EXEC without MULTI"),
		row("EXISTS a b", ":1"), // c is in memory, unacknowledged
		row("MULTI", "+OK"),
		row("AI.TENSORGET a VALUES", "+QUEUED"),
		row("EXEC", "[[:1]]"),
	)
}

// A pipeline: replies wait for one commit, before they are sent; when it
// fails, each reply from the first write's on is a MISCONF, one per
// command, so the client stays in step.
func TestMisconfInAPipeline(t *testing.T) {
	dir := t.TempDir()
	fs := &failFS{}
	h := newLogHarness(t, dir, fs, "everysec")
	h.run(row("AI.TENSORSET a INT8 1 VALUES 1", "+OK"))
	pipeline := func(lines ...string) string {
		for _, line := range lines {
			args, _ := config.SplitArgs(line)
			argv := make([][]byte, len(args))
			for i, a := range args {
				argv[i] = []byte(a)
			}
			h.s.Dispatch(h.c, argv, nil)
		}
		h.s.CommitClient(h.c)
		out := render(h.c.W.Bytes())
		h.c.W.Reset()
		return out
	}
	fs.fail(syscall.ENOSPC, nil)
	const misconf = "-MISCONF Errors writing to the AOF file: no space left on device"
	// A read after a write commits first (it may stream its reply).
	if got, want := pipeline("PING", "AI.TENSORSET b INT8 1 VALUES 2", "AI.TENSORGET a VALUES", "PING"),
		"+PONG ; "+misconf+" ; [:1] ; +PONG"; got != want {
		t.Errorf("read after a write:\n got  %s\n want %s", got, want)
	}
	fs.fail(nil, nil)
	waitFor(t, h, "the log to be written again", func() bool { return h.s.aof().Err() == nil })
	if got, want := pipeline("AI.TENSORSET c INT8 1 VALUES 3", "DEL c", "EXISTS c"), "+OK ; :1 ; :0"; got != want {
		t.Errorf("after recovery:\n got  %s\n want %s", got, want)
	}
	fs.fail(syscall.ENOSPC, nil)
	// Writes only: one commit at the end, both answered MISCONF.
	if got, want := pipeline("AI.TENSORSET d INT8 1 VALUES 4", "AI.TENSORSET e INT8 1 VALUES 5"),
		misconf+" ; "+misconf; got != want {
		t.Errorf("writes only:\n got  %s\n want %s", got, want)
	}
}

func TestMisconfOnFsyncFailureUnderAlways(t *testing.T) {
	dir := t.TempDir()
	fs := &failFS{}
	h := newLogHarness(t, dir, fs, "always")
	h.run(row("AI.TENSORSET a INT8 1 VALUES 1", "+OK"))
	fs.fail(nil, syscall.EIO)
	h.run(
		row("AI.TENSORSET b INT8 1 VALUES 2", "-MISCONF Errors writing to the AOF file: input/output error"),
		row("AI.TENSORGET a VALUES", "[:1]"),
	)
	fs.fail(nil, nil)
	// Only a rewrite mends a file whose fsync failed.
	waitFor(t, h, "a rewrite to mend the log", func() bool {
		return h.s.aof().Err() == nil && infoField(h, "aof_rewrites") == "1"
	})
	h.run(row("AI.TENSORSET c INT8 1 VALUES 3", "+OK"))
	h.s.CloseLog()
	h2 := newLogHarness(t, dir, nil, "always")
	h2.run(row("EXISTS a b c", ":3"))
}

// CONFIG SET appendfsync always holds from its OK on: the next write is
// fsynced before its reply (here the fsync fails, so the reply says so),
// not only once the next tick has given the log the policy (durability
// review: writes after the OK were acknowledged unsynced).
func TestConfigSetAppendfsyncAlwaysHoldsAtOnce(t *testing.T) {
	fs := &failFS{}
	h := newLogHarness(t, t.TempDir(), fs, "everysec")
	h.run(
		row("AI.TENSORSET a INT8 1 VALUES 1", "+OK"),
		row("CONFIG SET appendfsync always", "+OK"),
	)
	fs.fail(nil, syscall.EIO)
	h.run(row("AI.TENSORSET b INT8 1 VALUES 2", "-MISCONF Errors writing to the AOF file: input/output error"))
}

func TestMisconfOnFailedSnapshot(t *testing.T) {
	dir := t.TempDir()
	opts := config.Default()
	opts.Dir = dir
	opts.AppendOnly = false
	h := newHarnessOpts(t, opts)
	h.s.Snapshot.SealKey = aofTestKey
	// A directory where the snapshot goes makes its rename fail.
	if err := os.Mkdir(filepath.Join(dir, opts.DBFilename), 0o700); err != nil {
		t.Fatal(err)
	}
	h.run(
		row("AI.TENSORSET a INT8 1 VALUES 1", "+OK"),
		row("SAVE", "-ERR snapshot failed: see the server log"),
		row("AI.TENSORSET b INT8 1 VALUES 1", "~^-MISCONF Errors writing the sealed snapshot: .*"),
		row("AI.TENSORGET a VALUES", "[:1]"),
	)
	os.Remove(filepath.Join(dir, opts.DBFilename))
	h.run(
		row("SAVE", "+OK"),
		row("AI.TENSORSET b INT8 1 VALUES 1", "+OK"),
	)
}

func infoField(h *harness, name string) string {
	for _, f := range aofInfo(h.s) {
		if f[0] == name {
			return f[1]
		}
	}
	return ""
}

// The tick and the commands allowed while loading run beside the load
// that opens the log (the front end serves -LOADING meanwhile): the log's
// pointer is read and set without a race (go test -race, which flagged
// the plain field every time a server restarted from a log).
func TestLogSetWhileTickingAndServing(t *testing.T) {
	opts := config.Default()
	opts.Dir = t.TempDir()
	opts.Save.Store(new(string))
	h := newHarnessOpts(t, opts)
	h.s.Snapshot.SealKey = aofTestKey
	h.s.SetLoading(true)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
				h.s.Tick()
				h.s.Info([]string{"persistence"}, true)
			}
		}
	}()
	if err := h.s.Load(); err != nil {
		t.Fatal(err)
	}
	close(stop)
	wg.Wait()
	t.Cleanup(h.s.CloseLog)
	if got := infoField(h, "aof_enabled"); got != "1" {
		t.Errorf("aof_enabled %q", got)
	}
}

// Failed rewrites in a row hold the automatic ones back, as Redis 7's
// aofRewriteLimited: none for the first two, then a minute, doubling to an
// hour; a success ends it (durability review: on a full disk a rewrite
// began at every tick, and each took the room the appends needed).
func TestRewriteFailuresHoldAutomaticRewrites(t *testing.T) {
	var st aofState
	now := int64(1_000_000)
	for i, want := range []int64{0, 0, 60_000, 120_000, 240_000} {
		st.rewriteFailed(now)
		if got := st.limitedUntil.Load(); want == 0 && got != 0 || want != 0 && got != now+want {
			t.Errorf("after failure %d: held until %d, want now+%d", i+1, got-now, want)
		}
	}
	if !st.autoRewriteHeld(now+239_999) || st.autoRewriteHeld(now+240_000) {
		t.Error("held for the wrong time")
	}
	for range 20 {
		st.rewriteFailed(now)
	}
	if got := st.limitedUntil.Load() - now; got != rewriteDelayMax {
		t.Errorf("after many failures held %d ms, want at most an hour", got)
	}
}

// After a failed save the save rules wait saveRetryDelay seconds before
// they try again, as Redis's CONFIG_BGSAVE_RETRY_DELAY (they tried at every
// tick: 97 failed saves in 10 s on a full disk, Redis 2).
func TestSaveRulesWaitAfterAFailedSave(t *testing.T) {
	h := newHarness(t)
	h.s.Snapshot.SealKey = aofTestKey
	h.s.Opts.Dir = filepath.Join(t.TempDir(), "not-a-directory")
	if err := os.WriteFile(h.s.Opts.Dir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	h.run(row("CONFIG SET save \"1 1\"", "+OK"), row("AI.TENSORSET a FLOAT 1 VALUES 1", "+OK"))
	now := time.Now().Unix() + 10
	if !h.s.saveRulesDue(now) {
		t.Fatal("the rule is not due")
	}
	if err := h.s.Save(); err == nil {
		t.Fatal("the save into a file that is not a directory succeeded")
	}
	tried := h.s.Snapshot.lastTry.Load()
	if h.s.saveRulesDue(tried + saveRetryDelay) {
		t.Error("the rule was due again within the retry delay of a failed save")
	}
	if !h.s.saveRulesDue(tried + saveRetryDelay + 1) {
		t.Error("the rule was not due after the retry delay")
	}
}

// lonelyEngine compiles one model at a time: a compile that begins while
// another runs fails, as ONNX Runtime did in a worker short of memory
// (std::bad_alloc) when a start compiled several models side by side.
type lonelyEngine struct {
	modelstore.Engine
	busy, refused atomic.Int32
}

func (e *lonelyEngine) Compile(src modelstore.ModelSource, opts modelstore.SessionOptions) (modelstore.EngineSession, error) {
	if e.busy.Add(1) > 1 {
		e.busy.Add(-1)
		e.refused.Add(1)
		return nil, &modelstore.ORTError{Msg: "Exception during initialization: std::bad_alloc"}
	}
	defer e.busy.Add(-1)
	time.Sleep(20 * time.Millisecond) // long enough for the others to begin beside it
	return e.Engine.Compile(src, opts)
}

// A start compiles the log's models side by side; one that fails beside
// the others is compiled again alone before the start gives up
// (durability review: models every store of which had succeeded, one at a
// time, failed the start, 1 in 3 with 5 models).
func TestStartCompilesAFailedModelAgainAlone(t *testing.T) {
	model := loadTestRuntime(t)
	if model == nil {
		t.Skip("no ONNX Runtime")
	}
	if runtime.GOMAXPROCS(0) < 2 {
		t.Skip("compiles run side by side only on 2 or more CPUs")
	}
	dir := t.TempDir()
	h := newLogHarness(t, dir, nil, "everysec")
	for i := range 4 {
		// Each model's bytes differ (a doc_string appended), so that each
		// is a model file and a compile of its own.
		blob := append(append([]byte(nil), model...), 0x32, 1, byte('a'+i))
		h.s.Dispatch(h.c, [][]byte{[]byte("AI.MODELSTORE"), []byte(fmt.Sprint("m", i)), []byte("ONNX"), []byte("CPU"), []byte("BLOB"), blob}, nil)
		h.s.CommitClient(h.c)
		if got := render(h.c.W.Bytes()); got != "+OK" {
			t.Fatalf("store m%d: %s", i, got)
		}
		h.c.W.Reset()
	}
	h.s.CloseLog()

	opts := config.Default()
	opts.Dir = dir
	opts.Save.Store(new(string))
	h2 := newHarnessOpts(t, opts)
	h2.s.Snapshot.SealKey = aofTestKey
	e := &lonelyEngine{Engine: h2.s.Models.Engine()}
	h2.s.Models.SetEngine(e)
	if err := h2.s.LoadData(); err != nil {
		t.Fatalf("the start failed: %v", err)
	}
	t.Cleanup(h2.s.CloseLog)
	h2.run(row("EXISTS m0 m1 m2 m3", ":4"))
	if e.refused.Load() == 0 {
		t.Log("no compile met another: the retry was not exercised")
	}
}

// The journal asks the log whether it can hold a value before the keyspace
// takes it (modelstore.Journal.Check), and the refusal reaches the client
// with its sizes: the log learnt of a record it could not write only once
// the change was made, and dropped it and those queued after it.
func TestJournalRefusesWhatTheLogCannotHold(t *testing.T) {
	err := journal{}.Check("k", &modelstore.Tensor{DType: modelstore.Uint8, Shape: make([]int64, persistence.MaxRank+1)})
	want := "ERR the append-only log cannot hold this value: a tensor of 256 dimensions, the most is 255"
	if err == nil || errorText(err) != want {
		t.Fatalf("got %v (%q), want %q", err, errorText(err), want)
	}
	if err := (journal{}).Check("k", &modelstore.Tensor{DType: modelstore.Uint8, Shape: []int64{4}, Data: make([]byte, 4)}); err != nil {
		t.Fatal(err)
	}
}

// holdFS is the OS's file layer, whose first write to a base file once
// armed (a rewrite's) waits until release is closed, having closed held.
type holdFS struct {
	persistence.OSFS
	armed   atomic.Bool
	once    sync.Once
	held    chan struct{}
	release chan struct{}
}

type holdFile struct {
	*os.File
	fs *holdFS
}

func (f *holdFS) OpenFile(name string, flag int, perm os.FileMode) (persistence.File, error) {
	file, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	if f.armed.Load() && strings.HasPrefix(filepath.Base(name), "base.") {
		return holdFile{file, f}, nil
	}
	return file, nil
}

func (f holdFile) Write(p []byte) (int, error) {
	f.fs.once.Do(func() {
		close(f.fs.held)
		<-f.fs.release
	})
	return f.File.Write(p)
}

// A shutdown during a rewrite stops the rewrite and waits for it before
// it closes the log, which then holds what it held before the rewrite
// (concurrency review: closed under a rewrite, the log was read by the
// rewrite's end, a nil dereference that ended the server at SHUTDOWN
// during BGREWRITEAOF).
func TestCloseLogStopsTheRewrite(t *testing.T) {
	dir := t.TempDir()
	fs := &holdFS{held: make(chan struct{}), release: make(chan struct{})}
	h := newLogHarness(t, dir, fs, "everysec")
	for i := range 5 {
		h.run(row(fmt.Sprintf("AI.TENSORSET t%d INT8 1 VALUES %d", i, i), "+OK"))
	}
	bases := func() (names []string) {
		entries, _ := os.ReadDir(filepath.Join(dir, "appendonlydir"))
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), "base.") {
				names = append(names, e.Name())
			}
		}
		return names
	}
	before := bases()
	fs.armed.Store(true)
	h.run(row("BGREWRITEAOF", "+Background append only file rewriting started"))
	<-fs.held // the rewrite is writing its base
	closed := make(chan struct{})
	go func() {
		h.s.CloseLog()
		close(closed)
	}()
	select {
	case <-closed:
		t.Fatal("the log was closed under the rewrite")
	case <-time.After(200 * time.Millisecond):
	}
	close(fs.release)
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("CloseLog did not return")
	}
	if h.s.aofState.rewriting.Load() {
		t.Error("the rewrite outlived CloseLog")
	}
	h.run(row("BGREWRITEAOF", "-ERR Background append only file rewriting already in progress"))
	if after := bases(); !slices.Equal(after, before) {
		t.Errorf("base files %v after the stopped rewrite, %v before", after, before)
	}
	h2 := newLogHarness(t, dir, nil, "everysec")
	h2.run(row("EXISTS t0 t1 t2 t3 t4", ":5"))
}

// A start on a full disk that must cut a torn tail (and so open a new
// incr file) is refused with the log left where it is, even with
// load-bad-snapshot: its hint said to move the log aside, which lost a
// sound log (durability review).
func TestStartOnAFullDiskKeepsTheLog(t *testing.T) {
	dir := t.TempDir()
	h := newLogHarness(t, dir, nil, "always")
	h.run(row("AI.TENSORSET a INT8 1 VALUES 1", "+OK"))
	h.s.CloseLog()
	tearLastIncr(t, dir)

	fs := &failFS{}
	fs.fail(syscall.ENOSPC, nil)
	opts := config.Default()
	opts.Dir = dir
	opts.Save.Store(new(string))
	always := "always"
	opts.AppendFsync.Store(&always)
	opts.LoadBadSnapshot = true
	opts.AOFLoadTruncated = true
	h2 := newHarnessOpts(t, opts)
	h2.s.Snapshot.SealKey = aofTestKey
	h2.s.LogFS = fs
	err := h2.s.LoadData()
	if err == nil || !strings.Contains(err.Error(), "free space") {
		t.Fatalf("start on a full disk: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "appendonlydir")); err != nil {
		t.Fatalf("the log was moved: %v", err)
	}
	h3 := newLogHarness(t, dir, nil, "always")
	h3.run(row("AI.TENSORGET a VALUES", "[:1]"))
}

// tearLastIncr appends the start of a frame's header to the log's last
// incr file: what a crash in the middle of a write leaves.
func tearLastIncr(t *testing.T, dir string) {
	t.Helper()
	matches, _ := filepath.Glob(filepath.Join(dir, "appendonlydir", "incr.*.log"))
	if len(matches) == 0 {
		t.Fatal("no incr file")
	}
	last := matches[0]
	for _, m := range matches {
		var a, b int
		fmt.Sscanf(filepath.Base(m), "incr.%d.log", &a)
		fmt.Sscanf(filepath.Base(last), "incr.%d.log", &b)
		if a > b {
			last = m
		}
	}
	f, err := os.OpenFile(last, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte{0, 0, 0})
	f.Close()
}

// Each start that cuts a torn tail adds an incr file; past maxIncrFiles
// a rewrite folds them into a base (durability review: 40 crashes left 41
// incr files, and below auto-aof-rewrite-min-size nothing rewrote them).
func TestIncrFilesAreFoldedByARewrite(t *testing.T) {
	dir := t.TempDir()
	var h *harness
	for i := range maxIncrFiles + 1 {
		h = newLogHarness(t, dir, nil, "always")
		h.run(row(fmt.Sprintf("AI.TENSORSET k%d INT8 1 VALUES %d", i, i), "+OK"))
		h.s.CloseLog()
		tearLastIncr(t, dir)
	}
	h = newLogHarness(t, dir, nil, "always")
	if n := h.s.aof().IncrFiles(); n <= maxIncrFiles {
		t.Fatalf("%d incr files after %d cut tails", n, maxIncrFiles+1)
	}
	waitFor(t, h, "a rewrite to fold the incr files", func() bool {
		return h.s.aof().IncrFiles() == 1 && !h.s.aofState.rewriting.Load()
	})
	h.s.CloseLog()
	h2 := newLogHarness(t, dir, nil, "always")
	h2.run(row("EXISTS k0 k8", ":2"))
}
