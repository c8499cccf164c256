package worker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/enclaveai/enclaveai/modelstore"
)

// The test binary doubles as the worker (as the server's binary does) and
// as the subject of the seccomp test.
func TestMain(m *testing.M) {
	if IsWorker() {
		Main()
	}
	if os.Getenv("WORKER_TEST_SECCOMP") != "" {
		seccompChild(os.Getenv("WORKER_TEST_SECCOMP"))
	}
	os.Exit(m.Run())
}

var runtimeOnce sync.Once
var runtimeLib string

// requireRuntime loads ONNX Runtime in the test process too (to compare
// with the in-process engine) and returns its path.
func requireRuntime(t *testing.T) string {
	t.Helper()
	runtimeOnce.Do(func() {
		lib, err := modelstore.FindRuntimeLibrary("")
		if err != nil {
			lib, err = modelstore.FindRuntimeLibrary(filepath.Join("..", ".cache", "onnxruntime",
				modelstore.RuntimeVersionWanted, "libonnxruntime.so.1"))
		}
		if err == nil && modelstore.InitRuntime(lib) == nil {
			runtimeLib = lib
		}
	})
	if runtimeLib == "" {
		t.Fatal("ONNX Runtime not found: run `make build`")
	}
	return runtimeLib
}

func newTestPool(t *testing.T, cfg Config) *Pool {
	t.Helper()
	cfg.Exe = os.Args[0]
	cfg.Lib = requireRuntime(t)
	if cfg.Isolation == "" {
		cfg.Isolation = Shared
	}
	p, err := NewPool(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// TestSocketPairTakesTheLargestMessage: seqpacketPair's send buffer is the
// one it asked for (the kernel doubles it), above the default
// (net.core.wmem_default, 212992), and a message of maxMessage bytes
// goes through whole.
func TestSocketPairTakesTheLargestMessage(t *testing.T) {
	fds, err := seqpacketPair()
	if err != nil {
		t.Fatal(err)
	}
	defer closeAll(fds[:])
	if got, err := unix.GetsockoptInt(fds[0], unix.SOL_SOCKET, unix.SO_SNDBUF); err != nil || got != 2*maxMessage {
		t.Errorf("send buffer %d (%v), want %d", got, err, 2*maxMessage)
	}
	msg := bytes.Repeat([]byte{0xa5}, maxMessage)
	if err := sendMsg(fds[0], msg, nil); err != nil {
		t.Fatal(err)
	}
	rb := newRecvBuf()
	n, oobn, flags, _, err := unix.Recvmsg(fds[1], rb.buf, rb.oob, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got, _, err := rb.view(n, oobn, flags); err != nil || !bytes.Equal(got, msg) {
		t.Fatalf("read back %d bytes (%v), want %d", len(got), err, len(msg))
	}
}

// memfdRows is a number of rows of linear.onnx ([N,4] in, [N,3] out)
// whose input and output both travel in a memfd (above inlineMax).
const memfdRows = inlineMax/(3*4) + 1

func readModel(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "modelstore", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// compile compiles a model from the testdata in the pool, its bytes in a
// shared buffer as the Registry would make.
func compile(t *testing.T, e modelstore.Engine, name string) modelstore.EngineSession {
	t.Helper()
	return compileBytes(t, e, name, readModel(t, name))
}

// compileBytes is compile of a model's bytes.
func compileBytes(t *testing.T, e modelstore.Engine, name string, model []byte) modelstore.EngineSession {
	t.Helper()
	s, err := tryCompile(t, e, name, model)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// tryCompile is compileBytes that returns its error; it may be called
// from any goroutine.
func tryCompile(t *testing.T, e modelstore.Engine, name string, model []byte) (modelstore.EngineSession, error) {
	modelstore.ShareBuffers(true)
	defer modelstore.ShareBuffers(false)
	buf, err := modelstore.CopyToBuffer(model)
	if err != nil {
		return nil, err
	}
	defer buf.Unref()
	s, err := e.Compile(modelstore.ModelSource{Data: buf.Bytes(), Buf: buf, Origin: modelstore.Origin{Key: name}},
		modelstore.SessionOptions{Optimize: true})
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { s.Close() })
	return s, nil
}

// marked is linear.onnx with marker in its doc_string (field 6): what
// the workers' test hooks look for (child.go).
func marked(t *testing.T, marker []byte) []byte {
	t.Helper()
	m := append(readModel(t, "linear.onnx"), 0x32, byte(len(marker)))
	return append(m, marker...)
}

func floats(shape []int64, f func(i int) float32) *modelstore.Tensor {
	n := int(modelstore.ShapeLen(shape))
	vals := make([]float32, n)
	for i := range vals {
		vals[i] = f(i)
	}
	t, err := modelstore.NewTensorFromValues(modelstore.Float, shape, anySlice(vals))
	if err != nil {
		panic(err)
	}
	return t
}

func anySlice[T any](v []T) [][]byte {
	s := make([][]byte, len(v))
	for i, x := range v {
		s[i] = []byte(fmt.Sprint(x))
	}
	return s
}

// TestWorkerRunsLikeInProcess: the same models and inputs give the same
// outputs, byte for byte, in a worker and in this process, for inline
// and memfd-carried tensors, strings, scalars and non-tensor outputs.
func TestWorkerRunsLikeInProcess(t *testing.T) {
	pool := newTestPool(t, Config{})
	strs, err := modelstore.NewTensorFromValues(modelstore.String, []int64{3}, [][]byte{[]byte("a"), {}, []byte("ccc")})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		model  string
		inputs []*modelstore.Tensor
	}{
		{"linear.onnx", []*modelstore.Tensor{floats([]int64{1, 4}, func(i int) float32 { return float32(i + 1) })}},
		// [memfdRows,4] floats in, [memfdRows,3] out: both above inlineMax.
		{"linear.onnx", []*modelstore.Tensor{floats([]int64{memfdRows, 4}, func(i int) float32 { return float32(i%7) * 0.5 })}},
		// Exactly inlineMax bytes in: the largest message, which the
		// lane's socket must take in one write (seqpacketPair).
		{"linear.onnx", []*modelstore.Tensor{floats([]int64{inlineMax / 16, 4}, func(i int) float32 { return float32(i%5) * 0.25 })}},
		{"string_identity.onnx", []*modelstore.Tensor{strs}},
		{"mixed_outputs.onnx", []*modelstore.Tensor{floats([]int64{3, 2}, func(i int) float32 { return float32(i) })}},
	}
	for _, c := range cases {
		t.Run(c.model, func(t *testing.T) {
			remote := compile(t, pool, c.model)
			local := compile(t, modelstore.InProcess{}, c.model)
			if fmt.Sprint(remote.Inputs(), remote.Outputs()) != fmt.Sprint(local.Inputs(), local.Outputs()) {
				t.Fatalf("io: worker %v %v, in process %v %v", remote.Inputs(), remote.Outputs(), local.Inputs(), local.Outputs())
			}
			want, err := local.Run(context.Background(), c.inputs)
			if err != nil {
				t.Fatal(err)
			}
			got, err := remote.Run(context.Background(), c.inputs)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(want) {
				t.Fatalf("%d outputs, want %d", len(got), len(want))
			}
			for i := range want {
				if (got[i] == nil) != (want[i] == nil) {
					t.Fatalf("output %d: %v, want %v", i, got[i], want[i])
				}
				if want[i] != nil && (got[i].DType != want[i].DType || fmt.Sprint(got[i].Shape) != fmt.Sprint(want[i].Shape) ||
					!bytes.Equal(got[i].Data, want[i].Data)) {
					t.Fatalf("output %d differs: %v %v", i, got[i].DType, got[i].Shape)
				}
			}
		})
	}
}

// TestConcurrentRuns: many runs in flight at once on one worker each get
// their own answer (the worker reads the socket from several threads).
func TestConcurrentRuns(t *testing.T) {
	pool := newTestPool(t, Config{})
	remote := compile(t, pool, "linear.onnx")
	local := compile(t, modelstore.InProcess{}, "linear.onnx")
	var wg sync.WaitGroup
	// Twice as many goroutines as a worker has lanes: runs wait for one.
	errs := make(chan error, 2*maxLanes)
	for g := range 2 * maxLanes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				rows := int64(1 + (g+i)%5)
				if i%10 == 0 {
					rows = memfdRows // a memfd each way
				}
				in := []*modelstore.Tensor{floats([]int64{rows, 4}, func(k int) float32 { return float32(g*1000 + i + k) })}
				want, err := local.Run(context.Background(), in)
				if err != nil {
					errs <- err
					return
				}
				got, err := remote.Run(context.Background(), in)
				if err != nil {
					errs <- err
					return
				}
				if !bytes.Equal(got[0].Data, want[0].Data) {
					errs <- fmt.Errorf("goroutine %d run %d: wrong output", g, i)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	var procs []*proc
	pool.mu.Lock()
	for _, slots := range pool.groups {
		for _, sl := range slots {
			sl.mu.Lock()
			if sl.cur != nil {
				procs = append(procs, sl.cur)
			}
			sl.mu.Unlock()
		}
	}
	pool.mu.Unlock()
	for _, p := range procs {
		p.mu.Lock()
		if p.nlanes < 1 || p.nlanes > maxLanes || len(p.lanes) != p.nlanes {
			t.Errorf("worker %d: %d lanes made, %d idle (at most %d)", p.pid(), p.nlanes, len(p.lanes), maxLanes)
		}
		p.mu.Unlock()
	}
}

// TestWorkerErrorsKeepTheirIdentity: errors from the worker read as the
// in-process ones do (text and sentinel).
func TestWorkerErrorsKeepTheirIdentity(t *testing.T) {
	pool := newTestPool(t, Config{})
	remote := compile(t, pool, "linear.onnx")
	local := compile(t, modelstore.InProcess{}, "linear.onnx")
	bad := floats([]int64{1, 5}, func(int) float32 { return 1 })
	_, want := local.Run(context.Background(), []*modelstore.Tensor{bad})
	_, got := remote.Run(context.Background(), []*modelstore.Tensor{bad})
	var ortErr *modelstore.ORTError
	if !errors.As(got, &ortErr) || got.Error() != want.Error() {
		t.Fatalf("got %T %q, want %q", got, got, want)
	}
	_, got = remote.Run(context.Background(), nil)
	if !errors.Is(got, modelstore.ErrInputCount) {
		t.Fatalf("got %v", got)
	}
	half := compile(t, pool, "half_output.onnx")
	_, got = half.Run(context.Background(), []*modelstore.Tensor{floats([]int64{2}, func(int) float32 { return 1 })})
	if !errors.Is(got, modelstore.ErrUnsupportedDType) {
		t.Fatalf("got %T %v", got, got)
	}
}

// TestRunDeadlineStopsTheRunNotTheWorker: a run past its deadline is
// stopped by ONNX Runtime's terminate flag (opCancel), as in process; the
// worker lives on.
func TestRunDeadlineStopsTheRunNotTheWorker(t *testing.T) {
	pool := newTestPool(t, Config{KillGrace: 5 * time.Second})
	slow := compile(t, pool, "slow.onnx")
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := slow.Run(ctx, []*modelstore.Tensor{floats([]int64{1, 1}, func(int) float32 { return 1 })})
	var ortErr *modelstore.ORTError
	if !errors.As(err, &ortErr) || !strings.Contains(err.Error(), "terminate") {
		t.Fatalf("got %v", err)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("took %v", took)
	}
	if n := pool.deathCount(); n != 0 {
		t.Fatalf("%d worker deaths", n)
	}
}

// TestRunGroup: runs sent together on one lane (RunGroup) each get their
// own answer, in order, identical to a run of its own: outputs, an input
// the model refuses, and more runs than one lane message group holds. A
// run whose deadline passes while it waits behind a slow one in its group
// is answered without running, and the worker is not killed.
func TestRunGroup(t *testing.T) {
	pool := newTestPool(t, Config{KillGrace: 5 * time.Second})
	lin := compile(t, pool, "linear.onnx").(modelstore.GroupRunner)
	var runs []modelstore.GroupRun
	type answer struct {
		outs []*modelstore.Tensor
		err  error
	}
	var got []answer
	order := []int{}
	n := maxGroup*2 + 3
	for i := range n {
		in := floats([]int64{1, 4}, func(k int) float32 { return float32(i*4 + k) })
		if i == 5 {
			in = floats([]int64{1, 5}, func(k int) float32 { return 1 }) // the wrong shape
		}
		runs = append(runs, modelstore.GroupRun{Ctx: context.Background(), Inputs: []*modelstore.Tensor{in},
			Done: func(outs []*modelstore.Tensor, err error) {
				order = append(order, i)
				got[i] = answer{outs, err}
			}})
	}
	got = make([]answer, n)
	lin.RunGroup(runs)
	if len(order) != n || !slices.IsSorted(order) {
		t.Fatalf("answered in order %v", order)
	}
	for i, r := range runs {
		want, wantErr := lin.(modelstore.EngineSession).Run(context.Background(), r.Inputs)
		if fmt.Sprint(got[i].err) != fmt.Sprint(wantErr) {
			t.Fatalf("run %d: error %v, alone %v", i, got[i].err, wantErr)
		}
		if wantErr == nil && !bytes.Equal(got[i].outs[0].Data, want[0].Data) {
			t.Fatalf("run %d: outputs differ", i)
		}
		if (i == 5) != (wantErr != nil) {
			t.Fatalf("run %d: error %v", i, wantErr)
		}
	}

	slow := compile(t, pool, "slow.onnx").(modelstore.GroupRunner)
	one := []*modelstore.Tensor{floats([]int64{1, 1}, func(int) float32 { return 1 })}
	first, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	second, cancel2 := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel2()
	errs := make([]error, 2)
	start := time.Now()
	slow.RunGroup([]modelstore.GroupRun{
		{Ctx: first, Inputs: one, Done: func(_ []*modelstore.Tensor, err error) { errs[0] = err }},
		{Ctx: second, Inputs: one, Done: func(_ []*modelstore.Tensor, err error) { errs[1] = err }},
	})
	if !strings.Contains(fmt.Sprint(errs[0]), "terminate") || !errors.Is(errs[1], context.DeadlineExceeded) {
		t.Fatalf("got %v", errs)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("took %v", took)
	}
	if n := pool.deathCount(); n != 0 {
		t.Fatalf("%d worker deaths", n)
	}
}

func (p *Pool) deathCount() int64 {
	p.deathsMu.Lock()
	defer p.deathsMu.Unlock()
	var n int64
	for _, c := range p.deaths {
		n += c
	}
	return n
}

func workerPID(t *testing.T, s modelstore.EngineSession) int {
	t.Helper()
	p, err := s.(*session).slot.proc()
	if err != nil {
		t.Fatal(err)
	}
	return p.pid()
}

// waitRuns waits until the worker of s has runs runs pending and no
// compile (a restarted worker creates its sessions again, on their next
// run: a crash then has the compile for a suspect too), and returns its
// pid. A fixed sleep let a loaded machine's crash come during the compile.
func waitRuns(t *testing.T, s modelstore.EngineSession, runs int) int {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		p, err := s.(*session).slot.proc()
		if err != nil {
			t.Fatal(err)
		}
		p.mu.Lock()
		n, compiles := 0, 0
		for _, c := range p.pending {
			if c.stage == "run" {
				n++
			} else {
				compiles++
			}
		}
		p.mu.Unlock()
		if n == runs && compiles == 0 {
			time.Sleep(50 * time.Millisecond) // into ONNX Runtime's run
			return p.pid()
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d runs and %d compiles pending, want %d runs", n, compiles, runs)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitSessions waits until the worker of the sessions ss (of one slot) has
// each of them created: a replacement creates its sessions again in the
// background (revive), and a crash during one of those compiles has it for
// a suspect too.
func waitSessions(t *testing.T, ss ...modelstore.EngineSession) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		p, err := ss[0].(*session).slot.proc()
		if err != nil {
			t.Fatal(err)
		}
		created := 0
		for _, s := range ss {
			s := s.(*session)
			s.mu.Lock()
			if s.on == p {
				created++
			}
			s.mu.Unlock()
		}
		if created == len(ss) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d sessions created in the worker", created, len(ss))
		}
	}
}

// TestCrashInFlight: a worker that dies of SIGSEGV during a run fails
// that run with the death error and quarantines its model; the worker's
// other session is recreated in the replacement and runs.
func TestCrashInFlight(t *testing.T) {
	pool := newTestPool(t, Config{})
	slow := compile(t, pool, "slow.onnx")
	lin := compile(t, pool, "linear.onnx")
	pid := workerPID(t, slow)
	done := make(chan error, 1)
	go func() {
		_, err := slow.Run(context.Background(), []*modelstore.Tensor{floats([]int64{1, 1}, func(int) float32 { return 1 })})
		done <- err
	}()
	time.Sleep(300 * time.Millisecond) // the run is under way (it takes seconds)
	syscall.Kill(pid, syscall.SIGSEGV)
	err := <-done
	if err == nil || err.Error() != "model execution failed: engine worker died (SIGSEGV)" {
		t.Fatalf("got %v", err)
	}
	if q := slow.(modelstore.Quarantiner).Quarantined(); q == nil || !strings.Contains(q.Error(), "quarantined") {
		t.Fatalf("not quarantined: %v", q)
	}
	if _, err := lin.Run(context.Background(), []*modelstore.Tensor{floats([]int64{1, 4}, func(int) float32 { return 1 })}); err != nil {
		t.Fatal(err)
	}
	if workerPID(t, lin) == pid {
		t.Fatal("same worker")
	}
	if pool.Info()[len(pool.Info())-1] != [2]string{"engine_worker_deaths_sigsegv", "1"} {
		t.Fatalf("info %v", pool.Info())
	}
}

// TestRestartRateLimit: past restartBurst restarts in restartWindow, a
// slot refuses to start another worker.
func TestRestartRateLimit(t *testing.T) {
	pool := newTestPool(t, Config{})
	lin := compile(t, pool, "linear.onnx")
	in := []*modelstore.Tensor{floats([]int64{1, 4}, func(int) float32 { return 1 })}
	limited := false
	for i := 0; i < restartBurst+3 && !limited; i++ {
		// Killed idle: a run in flight would be its model's crash.
		p, err := lin.(*session).slot.proc()
		if err != nil {
			t.Fatal(err)
		}
		syscall.Kill(p.pid(), syscall.SIGKILL)
		<-p.dead
		deadline := time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) {
			_, err := lin.Run(context.Background(), in)
			if errors.Is(err, ErrRestartLimited) {
				limited = true
				break
			}
			if err == nil {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	if !limited {
		t.Fatal("never rate limited")
	}
}

// A worker that cannot start (here its library is not one; in the review,
// libonnxruntime did not map under a 64 MB limit) fails the store with its
// own reason, host directories cut, and logs the whole line; INFO counts
// no worker running, and the empty slot is not started again until a
// store asks for it (it was, five times in 100 ms, spending the restart
// limit).
func TestWorkerThatCannotStart(t *testing.T) {
	var log lockedBuffer
	pool := newTestPool(t, Config{Log: slog.New(slog.NewTextHandler(&log, nil))})
	pool.cfg.Lib = filepath.Join(t.TempDir(), "libonnxruntime.so.1")
	if err := os.WriteFile(pool.cfg.Lib, bytes.Repeat([]byte("not a library\n"), 100), 0o600); err != nil {
		t.Fatal(err)
	}
	store := func() error {
		modelstore.ShareBuffers(true)
		defer modelstore.ShareBuffers(false)
		buf, err := modelstore.CopyToBuffer(readModel(t, "linear.onnx"))
		if err != nil {
			t.Fatal(err)
		}
		defer buf.Unref()
		s, err := pool.Compile(modelstore.ModelSource{Data: buf.Bytes(), Buf: buf}, modelstore.SessionOptions{})
		if err == nil {
			s.Close()
		}
		return err
	}
	want := `model could not be loaded: engine worker could not start (exit 1): initializing ONNX Runtime from libonnxruntime.so.1: ` +
		`Platform-specific initialization failed: Error loading ONNX shared library "libonnxruntime.so.1": libonnxruntime.so.1: invalid ELF header`
	if err := store(); err == nil || err.Error() != want {
		t.Fatalf("store: %v\nwant %s", err, want)
	}
	if got := infoField(pool, "engine_workers_running"); got != "0" {
		t.Errorf("engine_workers_running %s after the worker exited", got)
	}
	logged := `detail="engine worker: initializing ONNX Runtime from ` + pool.cfg.Lib
	for deadline := time.Now().Add(5 * time.Second); !strings.Contains(log.String(), logged); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) { // logDeath hashes the model first, in the background
			t.Fatalf("the log does not name the worker's reason:\n%s", log.String())
		}
	}
	for deadline := time.Now().Add(300 * time.Millisecond); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if n := pool.restarts.Load(); n != 0 {
			t.Fatalf("a slot without sessions was restarted %d times", n)
		}
	}
	if err := store(); err == nil || err.Error() != want {
		t.Fatalf("second store: %v", err)
	}
	if n := pool.restarts.Load(); n != 1 {
		t.Errorf("%d restarts after the second store, want 1", n)
	}
}

func infoField(p *Pool, name string) string {
	for _, f := range p.Info() {
		if f[0] == name {
			return f[1]
		}
	}
	return ""
}

// lockedBuffer collects a pool's log, written from its goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestClassify: a worker's cause of death is the kernel's (its signal or
// exit status) or the server's kill, whatever it wrote on stderr; every
// death the server did not ask for is a crash.
func TestClassify(t *testing.T) {
	for _, c := range []struct {
		script, killed, want string
	}{
		{"echo SIGKILL >&2; exit 0", "", "exit 0"},
		{"echo 'fatal error: runtime: out of memory' >&2; exit 2", "", "exit 2"},
		{"echo SIGKILL >&2; kill -SEGV $$", "", "SIGSEGV"},
		{"kill -KILL $$", "", "SIGKILL"},
		{"kill -SEGV $$", "timeout", "timeout"},
	} {
		cmd := exec.Command("/bin/sh", "-c", c.script)
		cmd.Run()
		if got := classify(cmd.ProcessState, c.killed); got != c.want {
			t.Errorf("classify(%q, %q) = %q, want %q", c.script, c.killed, got, c.want)
		}
	}
	for cause, crash := range map[string]bool{"SIGSEGV": true, "SIGKILL": true, "exit 0": true, "exit 1": true,
		"timeout": false, "shutdown": false, "unknown": false} {
		if isCrash(cause) != crash {
			t.Errorf("isCrash(%q) = %v", cause, !crash)
		}
	}
}

// putInline writes the message that putTensors and a payload buffer would:
// descriptions, the inline placement, the bytes.
func TestPutInlineMatchesPayload(t *testing.T) {
	in := []*modelstore.Tensor{floats([]int64{2, 3}, func(i int) float32 { return float32(i) }), nil,
		floats([]int64{1}, func(int) float32 { return 7 })}
	want := &enc{}
	payload := make([]byte, tensorsSize(in))
	putTensors(want, in, payload)
	want.u8(payloadInline)
	want.b = append(want.b, payload...)
	got := &enc{}
	putInline(got, in)
	if !bytes.Equal(got.b, want.b) {
		t.Fatalf("putInline:\n%x\nwant\n%x", got.b, want.b)
	}
	out, done, err := recvTensors(&dec{b: got.b}, nil, false, 0)
	if err != nil || out[1] != nil || !bytes.Equal(out[0].Data, in[0].Data) || !bytes.Equal(out[2].Data, in[2].Data) {
		t.Fatalf("read back: %v %v", out, err)
	}
	done()
}

func TestProtocolRejectsBadMessages(t *testing.T) {
	e := &enc{}
	in := []*modelstore.Tensor{floats([]int64{2, 2}, func(i int) float32 { return float32(i) }), nil}
	payload := make([]byte, tensorsSize(in))
	putTensors(e, in, payload)
	for n := 0; n < len(e.b); n++ {
		d := &dec{b: e.b[:n]}
		if getTensors(d); d.err == nil {
			t.Fatalf("truncated at %d: no error", n)
		}
	}
	d := &dec{b: e.b}
	refs := getTensors(d)
	if _, err := locate(refs, payload[:len(payload)-1], false); err == nil {
		t.Fatal("short payload accepted")
	}
	out, err := locate(refs, payload, false)
	if err != nil || out[1] != nil || !bytes.Equal(out[0].Data, in[0].Data) {
		t.Fatalf("%v %v", out, err)
	}
}

// seccompChild runs in a child test process: it installs the filter and
// tries what it denies.
func seccompChild(what string) {
	if err := installSeccomp(); err != nil {
		fmt.Println("install:", err)
		os.Exit(3)
	}
	switch what {
	case "socket":
		_, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0)
		fmt.Println("socket:", err)
	case "exec":
		err := syscall.Exec("/bin/true", []string{"true"}, nil)
		fmt.Println("exec:", err)
	}
	os.Exit(0)
}

func TestSeccompDenies(t *testing.T) {
	out, err := exec.Command(os.Args[0], "-test.run=^$").CombinedOutput()
	if err != nil {
		t.Fatalf("%v %s", err, out)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "WORKER_TEST_SECCOMP=socket")
	out, err = cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "socket: operation not permitted") {
		t.Fatalf("socket: %v %s", err, out)
	}
	cmd = exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "WORKER_TEST_SECCOMP=exec")
	out, err = cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGSYS {
		t.Fatalf("exec: %v %s", err, out)
	}
}

// BenchmarkRun times one run at a time, in a worker and in this process:
// the difference is the wall's cost per run (the lane's round trip),
// without the network front end.
//   - linear.onnx: rows-1 is the wall alone; rows-6272 is a payload of
//     100,352 bytes in, a batch of 32 of the bench's MLP rows (784
//     floats), which travels in the message (inlineMax).
//   - mlp.onnx, the model of the inference loop (redis_tests/models,
//     make models; skipped without it): one request's row, a batch of 8
//     (the batched loop's batches held 6 to 13 rows at 32 clients) and a
//     full batch of 32.
func BenchmarkRun(b *testing.B) {
	t := &testing.T{}
	pool := newTestPool(t, Config{})
	mlp, mlpErr := os.ReadFile(filepath.Join("..", "redis_tests", "models", "mlp.onnx"))
	for _, e := range []struct {
		name   string
		engine modelstore.Engine
	}{{"worker", pool}, {"in-process", modelstore.InProcess{}}} {
		var mlpSession modelstore.EngineSession // nil without mlp.onnx
		if mlpErr == nil {
			mlpSession = compileBytes(t, e.engine, "mlp.onnx", mlp)
		}
		for _, c := range []struct {
			model string
			s     modelstore.EngineSession
			cols  int64
			rows  []int64
		}{{"linear", compile(t, e.engine, "linear.onnx"), 4, []int64{1, 6272}}, {"mlp", mlpSession, 784, []int64{1, 8, 32}}} {
			for _, rows := range c.rows {
				in := []*modelstore.Tensor{floats([]int64{rows, c.cols}, func(i int) float32 { return float32(i%7) / 7 })}
				b.Run(fmt.Sprintf("%s/%s/rows-%d", e.name, c.model, rows), func(b *testing.B) {
					if c.s == nil {
						b.Skip(mlpErr)
					}
					for b.Loop() {
						if _, err := c.s.Run(context.Background(), in); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		}
	}
}

// payloadSize is exactly what putPayload appends, inline or in a memfd, so
// that a run's request and its reply are each built in one allocation
// (issue 9: no garbage on the hot path).
func TestPayloadSizeAndAllocs(t *testing.T) {
	small := []*modelstore.Tensor{floats([]int64{1, 784}, func(i int) float32 { return float32(i) }), nil,
		floats([]int64{3}, func(int) float32 { return 7 })}
	big := []*modelstore.Tensor{floats([]int64{1, inlineMax/4 + 1}, func(int) float32 { return 1 })}
	// A full batch (BATCHSIZE 32) of the bench's MLP rows travels inline.
	batch := []*modelstore.Tensor{floats([]int64{32, 784}, func(int) float32 { return 1 })}
	for _, c := range []struct {
		ts     []*modelstore.Tensor
		inline bool
	}{{small, true}, {big, false}, {batch, true}, {nil, true}} {
		ts := c.ts
		e := &enc{}
		fds, err := putPayload(e, ts)
		if err != nil {
			t.Fatal(err)
		}
		closeAll(fds)
		if (len(fds) == 0) != c.inline {
			t.Errorf("%d tensors of %d bytes: %d memfds, want inline %v", len(ts), tensorsSize(ts), len(fds), c.inline)
		}
		if len(e.b) != payloadSize(ts) {
			t.Errorf("%d tensors of %d bytes: putPayload appended %d bytes, payloadSize says %d", len(ts), tensorsSize(ts), len(e.b), payloadSize(ts))
		}
	}
	s := &session{sid: 1}
	if got := testing.AllocsPerRun(100, func() {
		if _, _, err := s.request(small); err != nil {
			t.Fatal(err)
		}
	}); got != 1 {
		t.Errorf("a run's request: %.1f allocations, want 1", got)
	}
	// A sent request's buffer serves a next request, rewritten whole; a
	// request that draws a buffer too small for it makes a fresh one (the
	// small one is put after the large, so it is drawn after it and
	// dropped by the next try's request). (sync.Pool may drop an item,
	// as it does at random under the race detector: a few tries.)
	first, _, err := s.request(small)
	if err != nil {
		t.Fatal(err)
	}
	want := slices.Clone(first)
	reused := false
	for range 10 {
		clear(first)
		recycleRequest(first)
		recycleRequest(make([]byte, 0, 8))
		msg, _, err := s.request(small)
		if err != nil || !bytes.Equal(msg, want) {
			t.Fatalf("a request built in a recycled buffer: %v, %d bytes, want %d", err, len(msg), len(want))
		}
		if reused = &msg[:1][0] == &first[:1][0]; reused {
			break
		}
		first = msg
	}
	if !reused {
		t.Error("a sent request's buffer never served the next request")
	}
	var sent []byte
	l := senderFunc(func(msg []byte, fds ...int) error { sent = msg; return nil })
	w := &child{}
	// A lane's replies reuse its buffer: none allocates once it is grown
	// (AllocsPerRun's first, untimed call grows it).
	var buf []byte
	if got := testing.AllocsPerRun(100, func() { w.replyTensors(l, &buf, 5, small) }); got != 0 {
		t.Errorf("a run's reply: %.1f allocations, want 0", got)
	}
	d := &dec{b: sent}
	if op, id, ok := d.u8(), d.u64(), d.u8(); op != opReply || id != 5 || ok != 0 {
		t.Fatalf("reply head %d %d %d", op, id, ok)
	}
	rest := d.b
	out, done, err := recvTensors(d, nil, true, 0)
	if err != nil || len(out) != 3 || !bytes.Equal(out[0].Data, small[0].Data) || out[1] != nil || !bytes.Equal(out[2].Data, small[2].Data) {
		t.Fatalf("reply read back: %v %v", out, err)
	}
	done()
	// Outputs over the run's MaxOutput are refused, before being located.
	size := int64(len(small[0].Data) + len(small[2].Data))
	if _, _, err := recvTensors(&dec{b: rest}, nil, true, size-1); !errors.Is(err, modelstore.ErrOutputTooBig) {
		t.Errorf("outputs over the bound: %v", err)
	}
	if _, _, err := recvTensors(&dec{b: rest}, nil, true, size); err != nil {
		t.Errorf("outputs at the bound: %v", err)
	}
}

// senderFunc is a func as a sender.
type senderFunc func(msg []byte, fds ...int) error

func (f senderFunc) send(msg []byte, fds ...int) error { return f(msg, fds...) }

// TestReplyPoll: a run that is all the server is doing polls its lane for
// the reply (Config.ReplyPoll) and gets the same answer as one that
// sleeps in the poller, and its worker's thread then polls for the next
// request (seen as the worker's CPU time while nothing runs); with
// ReplyPoll 0, or while it is not alone, nothing polls.
func TestReplyPoll(t *testing.T) {
	if !multiCPU {
		t.Skip("no run polls on one CPU")
	}
	requireRuntime(t) // for the run in process
	var asked atomic.Int32
	isAlone := true
	alone = func() bool { asked.Add(1); return isAlone }
	t.Cleanup(func() { alone = modelstore.Alone })
	in := []*modelstore.Tensor{floats([]int64{1, 4}, func(i int) float32 { return float32(i + 1) })}
	want, err := compile(t, modelstore.InProcess{}, "linear.onnx").Run(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	const idle = 300 * time.Millisecond
	for _, c := range []struct {
		poll  time.Duration
		alone bool
		polls bool
	}{
		{time.Second, true, true},
		{time.Second, false, false},
		{0, true, false},
	} {
		isAlone = c.alone
		lin := compile(t, newTestPool(t, Config{ReplyPoll: c.poll}), "linear.onnx")
		asked.Store(0)
		got, err := lin.Run(context.Background(), in)
		if err != nil || !bytes.Equal(got[0].Data, want[0].Data) {
			t.Fatalf("poll %v alone %v: %v, or the output differs from the run in process", c.poll, c.alone, err)
		}
		// Polling asks at every poll: more than the questions before it
		// (one for the request's poll, one for the reply's).
		if polled := asked.Load() > 2; polled != c.polls {
			t.Errorf("poll %v alone %v: asked %d times, want polling %v", c.poll, c.alone, asked.Load(), c.polls)
		}
		// The worker's thread polls for the next request, or sleeps: a
		// polling thread is runnable (state R) whenever it is looked at, a
		// sleeping one is not. Its CPU time would not tell on a loaded
		// machine: it yields to every other thread that wants a CPU.
		pid := workerPID(t, lin)
		const samples = 30
		runnable := 0
		for range samples {
			if procRunnable(t, pid) {
				runnable++
			}
			time.Sleep(idle / samples)
		}
		if polled := runnable > samples/2; polled != c.polls {
			t.Errorf("poll %v alone %v: the idle worker was runnable in %d of %d looks, want polling %v", c.poll, c.alone, runnable, samples, c.polls)
		}
	}
}

// procRunnable reports whether a thread of process pid is running or
// waiting for a CPU (state R in /proc/pid/task/tid/stat).
func procRunnable(t *testing.T, pid int) bool {
	t.Helper()
	stats, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
	if err != nil || len(stats) == 0 {
		t.Fatalf("the threads of process %d: %v", pid, err)
	}
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // the thread has exited
		}
		// The state is the field after the command's name, in parentheses.
		if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) && b[i+2] == 'R' {
			return true
		}
	}
	return false
}

// TestAwaitPolling: awaitPolling returns once a message waits (leaving it
// for recv), once its poll says stop, and once the peer has gone.
func TestAwaitPolling(t *testing.T) {
	pair := func() (*channel, *os.File) {
		a, b, err := socketPair()
		if err != nil {
			t.Fatal(err)
		}
		ch, err := newChannel(a)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ch.close(); b.Close() })
		return ch, b
	}

	ch, peer := pair()
	calls := 0
	ch.awaitPolling(func() bool { calls++; return calls < 3 })
	if calls != 3 {
		t.Errorf("with nothing to read: %d polls, want 3 (until poll says stop)", calls)
	}

	wrote := make(chan struct{})
	go func(peer *os.File) {
		defer close(wrote)
		time.Sleep(20 * time.Millisecond)
		peer.Write([]byte("reply"))
	}(peer)
	start := time.Now()
	ch.awaitPolling(func() bool { return time.Since(start) < 10*time.Second })
	if took := time.Since(start); took < 20*time.Millisecond || took > 5*time.Second {
		t.Errorf("returned after %v, want once the message came (20 ms)", took)
	}
	msg, _, err := ch.recv(newRecvBuf())
	if err != nil || string(msg) != "reply" {
		t.Errorf("recv after awaitPolling: %q %v", msg, err)
	}
	<-wrote

	ch, peer = pair()
	peer.Close()
	start = time.Now()
	ch.awaitPolling(func() bool { return time.Since(start) < 10*time.Second })
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("a closed peer: returned after %v", took)
	}
}

// A payload memfd is mapped only when it is sealed against shrinking and
// writes and holds the size its message gives: a worker taken over by a
// hostile model could otherwise truncate the file it sent, and the
// server's read of its mapping would fault, SIGBUS, fatal to the server
// (engine review).
func TestPayloadFileMustBeSealed(t *testing.T) {
	big := []*modelstore.Tensor{{DType: modelstore.Float, Shape: []int64{1 << 16}, Data: make([]byte, 4<<16)}}
	for i := range big[0].Data {
		big[0].Data[i] = byte(i)
	}
	e := &enc{}
	fds, err := putPayload(e, big)
	if err != nil || len(fds) != 1 {
		t.Fatalf("putPayload: %v %v", fds, err)
	}
	defer closeAll(fds)
	if err := unix.Ftruncate(fds[0], 4096); err == nil {
		t.Error("a sent payload file could be shrunk")
	}
	if _, err := unix.Pwrite(fds[0], []byte{1}, 0); err == nil {
		t.Error("a sent payload file could be written")
	}
	out, done, err := recvTensors(&dec{b: e.b}, fds, true, 0)
	if err != nil || !bytes.Equal(out[0].Data, big[0].Data) {
		t.Fatalf("sealed payload read back: %v", err)
	}
	done()

	// The same message with a file as a hostile worker would send it:
	// unsealed, and shrunk below the size given.
	fd, mem, err := newShm(len(big[0].Data))
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	unix.Munmap(mem)
	if _, _, err := recvTensors(&dec{b: e.b}, []int{fd}, true, 0); !errors.Is(err, errPayloadFile) {
		t.Errorf("an unsealed payload file: %v, want errPayloadFile", err)
	}
	if err := unix.Ftruncate(fd, 4096); err != nil {
		t.Fatal(err)
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, payloadSeals); err != nil {
		t.Fatal(err)
	}
	if _, _, err := recvTensors(&dec{b: e.b}, []int{fd}, true, 0); !errors.Is(err, errPayloadFile) {
		t.Errorf("a sealed payload file shorter than its size: %v, want errPayloadFile", err)
	}
}

// A worker dying while INFO runs does not hang the pool: the dying worker
// took Pool.mu under its slot's lock, while Info, holding Pool.mu, waited
// for that slot's lock, and INFO, AI.MODELSTORE and the slot's runs hung
// for good (code review: it deadlocked on the first try with the session
// on the last of 16 slots, which Info visits last).
func TestWorkerDeathDuringInfo(t *testing.T) {
	const slots = 16
	pool := newTestPool(t, Config{Workers: slots})
	if _, err := pool.place(""); err != nil { // makes the group's slots
		t.Fatal(err)
	}
	pool.mu.Lock()
	g := pool.groups[""]
	pool.mu.Unlock()
	for _, sl := range g[:slots-1] {
		sl.add(&session{}) // placeholders: the model goes to the last slot
	}
	lin := compile(t, pool, "linear.onnx")
	if got := lin.(*session).slot; got != g[slots-1] {
		t.Fatalf("the session is on slot %d, want the last", got.idx)
	}
	in := []*modelstore.Tensor{floats([]int64{1, 4}, func(int) float32 { return 1 })}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				pool.Info()
			}
		}()
	}
	defer func() { close(stop); wg.Wait() }()
	// A deadlock hangs the calls below: the stacks show where.
	watchdog := time.AfterFunc(60*time.Second, func() { panic("TestWorkerDeathDuringInfo: deadlock") })
	defer watchdog.Stop()
	for round := range restartBurst - 1 {
		// Killed idle: a run in flight would be its model's crash.
		p, err := lin.(*session).slot.proc()
		if err != nil {
			t.Fatal(err)
		}
		pid := p.pid()
		syscall.Kill(pid, syscall.SIGKILL)
		<-p.dead
		deadline := time.Now().Add(20 * time.Second)
		for {
			_, err := lin.Run(context.Background(), in)
			if err == nil && workerPID(t, lin) != pid {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("round %d: the worker was not replaced: %v", round, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	for _, sl := range g[:slots-1] {
		sl.mu.Lock()
		clear(sl.sessions)
		sl.mu.Unlock()
	}
}

// A worker that crashes while two models run on it, each on a lane of its
// own, quarantines neither: either may have crashed it, and quarantining
// both shut one client's model out because of another's until it was
// stored again (engine review). A model running alone is still blamed
// (TestCrashInFlight).
func TestCrashWithTwoModelsRunningBlamesNeither(t *testing.T) {
	pool := newTestPool(t, Config{})
	a := compile(t, pool, "slow.onnx")
	b := compile(t, pool, "slow.onnx")
	if workerPID(t, a) != workerPID(t, b) {
		t.Skip("the two sessions are on different workers")
	}
	done := make(chan error, 2)
	for _, s := range []modelstore.EngineSession{a, b} {
		go func() {
			_, err := s.Run(context.Background(), []*modelstore.Tensor{floats([]int64{1, 1}, func(int) float32 { return 1 })})
			done <- err
		}()
	}
	pid := waitRuns(t, a, 2) // both runs are under way (each takes seconds)
	syscall.Kill(pid, syscall.SIGSEGV)
	for range 2 {
		if err := <-done; err == nil || err.Error() != "model execution failed: engine worker died (SIGSEGV)" {
			t.Fatalf("got %v", err)
		}
	}
	for i, s := range []modelstore.EngineSession{a, b} {
		if q := s.(modelstore.Quarantiner).Quarantined(); q != nil {
			t.Errorf("model %d quarantined: %v", i, q)
		}
		if !s.(*session).probation.Load() {
			t.Errorf("model %d not on probation", i)
		}
	}
	// On probation a model's next runs go alone: a crash then is its own,
	// and quarantines it (diff review: an attacker who kept a run of its
	// own going beside its crashing model was never quarantined).
	go func() {
		_, err := a.Run(context.Background(), []*modelstore.Tensor{floats([]int64{1, 1}, func(int) float32 { return 1 })})
		done <- err
	}()
	pid = waitRuns(t, a, 1)
	syscall.Kill(pid, syscall.SIGSEGV)
	if err := <-done; err == nil {
		t.Fatal("the run survived its worker")
	}
	if a.(modelstore.Quarantiner).Quarantined() == nil {
		t.Error("a crash while running alone did not quarantine the model")
	}
	// A run that ends, alone, clears the probation.
	if _, err := b.Run(context.Background(), []*modelstore.Tensor{floats([]int64{1, 1}, func(int) float32 { return 1 })}); err != nil {
		t.Fatal(err)
	}
	if b.(*session).probation.Load() || b.(modelstore.Quarantiner).Quarantined() != nil {
		t.Error("a run that ended alone left its model on probation or quarantined")
	}
}

// A model being created when its worker crashes is a suspect too: the run
// beside it is not quarantined (diff review: a crash at another client's
// AI.MODELSTORE quarantined the one model that was running).
func TestCrashDuringACompileBlamesNoRun(t *testing.T) {
	pool := newTestPool(t, Config{TestHooks: true})
	slow := compile(t, pool, "slow.onnx")
	pid := workerPID(t, slow)
	done := make(chan error, 2)
	go func() {
		_, err := slow.Run(context.Background(), []*modelstore.Tensor{floats([]int64{1, 1}, func(int) float32 { return 1 })})
		done <- err
	}()
	// A model whose session creation the test hook holds up (child.go).
	hang := marked(t, hangMarker)
	go func() {
		_, err := tryCompile(t, pool, "hang", hang)
		done <- err
	}()
	time.Sleep(500 * time.Millisecond)
	syscall.Kill(pid, syscall.SIGSEGV)
	for range 2 {
		if err := <-done; err == nil {
			t.Fatal("a call survived its worker")
		}
	}
	if q := slow.(modelstore.Quarantiner).Quarantined(); q != nil {
		t.Errorf("the running model was quarantined beside a compile: %v", q)
	}
}

// A worker that a model's run ends by an exit of its own, whatever it
// wrote on stderr, crashed: the model is quarantined when it was the one
// suspect, put on probation when another ran beside it, and the death is
// counted under the status the kernel gave (red-team review: a worker
// that wrote "SIGKILL" and exited was taken for one killed from outside,
// and its model was never quarantined; a line of a failed start reached
// the clients).
func TestWorkerExitIsItsModelsCrash(t *testing.T) {
	one := []*modelstore.Tensor{floats([]int64{1, 4}, func(int) float32 { return 1 })}
	for _, code := range []int{0, 3} {
		t.Run(fmt.Sprint("exit ", code), func(t *testing.T) {
			pool := newTestPool(t, Config{TestHooks: true})
			marker := append(slices.Clone(exitMarker), byte('0'+code))
			exits := compileBytes(t, pool, "exits", marked(t, marker))
			slow := compile(t, pool, "slow.onnx")
			want := fmt.Sprintf("model execution failed: engine worker died (exit %d)", code)
			counter := fmt.Sprintf("engine_worker_deaths_exit_%d", code)

			// Beside another model's run, either may have crashed the
			// worker: both go on probation.
			done := make(chan error, 1)
			go func() {
				_, err := slow.Run(context.Background(), []*modelstore.Tensor{floats([]int64{1, 1}, func(int) float32 { return 1 })})
				done <- err
			}()
			waitRuns(t, slow, 1)
			if _, err := exits.Run(context.Background(), one); err == nil || err.Error() != want {
				t.Fatalf("run beside another: %v, want %s", err, want)
			}
			if err := <-done; err == nil || err.Error() != want {
				t.Fatalf("the run beside it: %v, want %s", err, want)
			}
			for i, s := range []modelstore.EngineSession{exits, slow} {
				if q := s.(modelstore.Quarantiner).Quarantined(); q != nil {
					t.Errorf("model %d quarantined beside another: %v", i, q)
				}
				if !s.(*session).probation.Load() {
					t.Errorf("model %d not on probation", i)
				}
			}

			// Alone, it is the one suspect: quarantined.
			waitSessions(t, exits, slow)
			if _, err := exits.Run(context.Background(), one); err == nil || err.Error() != want {
				t.Fatalf("run alone: %v, want %s", err, want)
			}
			q := exits.(modelstore.Quarantiner).Quarantined()
			if q == nil || q.Error() != fmt.Sprintf("model execution failed: the model is quarantined: it crashed an engine worker (exit %d); store it again to retry", code) {
				t.Fatalf("not quarantined: %v", q)
			}
			if got := infoField(pool, counter); got != "2" {
				t.Errorf("%s = %q, want 2: %v", counter, got, pool.Info())
			}
			if got := infoField(pool, "engine_worker_deaths"); got != "2" {
				t.Errorf("engine_worker_deaths = %q, want 2", got)
			}
		})
	}
}

// A worker taken over by a hostile model (the test hooks' probes, run
// where a model's code would run) cannot signal the server, read or change
// its limits, open its memory, create a file or read one it has no need
// of (the server's seal key, a TLS key), or list the sockets of the
// network namespace (the server's clients): one kill(2) of its
// parent's pid ended the server, and a prlimit64 setting its RLIMIT_FSIZE
// to 0 would have ended it at its next log write.
func TestWorkerCannotReachTheServer(t *testing.T) {
	pool := newTestPool(t, Config{TestHooks: true})
	_, err := tryCompile(t, pool, "probe", marked(t, probeMarker))
	if err == nil || !strings.Contains(err.Error(), "escape probes: ") {
		t.Fatalf("the probes did not run: %v", err)
	}
	t.Log(err)
	got := map[string]string{}
	for _, kv := range strings.Split(err.Error()[strings.Index(err.Error(), "escape probes: ")+len("escape probes: "):], "; ") {
		k, v, _ := strings.Cut(kv, "=")
		got[k] = v
	}
	refused := []string{"signal", "signal-all", "prlimit", "clone3", "io_uring", "chmod", "setxattr", "shm", "setown",
		"fiosetown", "pidfd_send_signal", "affinity"}
	switch ll := got["landlock"]; {
	case strings.HasPrefix(ll, "abi "):
		// Without Landlock, root (this test's usual user) opens both.
		refused = append(refused, "proc-mem", "create", "read", "libdir", "proc-net", "parent-net")
	case ll == syscall.ENOSYS.Error() || ll == syscall.EOPNOTSUPP.Error():
		t.Logf("this kernel has no Landlock (%s): /proc and files not checked", ll)
	default:
		t.Errorf("the worker entered no Landlock domain: %s", ll)
	}
	for _, k := range refused {
		if v, ok := got[k]; !ok || strings.HasPrefix(v, "ok") {
			t.Errorf("%s: %q, want refused", k, v)
		}
	}
	if got["oom"] != "1000" {
		t.Errorf("oom_score_adj %q, want 1000: the kernel's OOM killer must take a worker first", got["oom"])
	}
	if got["caps"] != "0000000000000000" {
		t.Errorf("effective capabilities %q, want none", got["caps"])
	}
	if _, err := compile(t, pool, "linear.onnx").Run(context.Background(),
		[]*modelstore.Tensor{floats([]int64{1, 4}, func(int) float32 { return 1 })}); err != nil {
		t.Errorf("a run after the probes: %v", err)
	}
}

// A run's reply whose outputs are not tensors the server can hold (a
// shape of 100,000,000 FLOATs over 4 bytes of data, from a worker taken
// over by a hostile model) fails the run, and nothing is stored: it was
// stored and logged, and AI.TENSORGET VALUES of it ended the server,
// whose next start refused the log (red-team review).
func TestForgedOutputIsRefused(t *testing.T) {
	pool := newTestPool(t, Config{TestHooks: true})
	s := compileBytes(t, pool, "forged", marked(t, forgeMarker))
	_, err := s.Run(context.Background(), []*modelstore.Tensor{floats([]int64{1, 4}, func(int) float32 { return 1 })})
	if !errors.Is(err, modelstore.ErrDataLength) || !strings.Contains(err.Error(), "malformed output") {
		t.Fatalf("a forged output: %v", err)
	}
	good := compile(t, pool, "linear.onnx")
	outs, err := good.Run(context.Background(), []*modelstore.Tensor{floats([]int64{1, 4}, func(int) float32 { return 1 })})
	if err != nil || modelstore.CheckTensor(outs[0]) != nil {
		t.Fatalf("a run after it: %v", err)
	}
}

// The version a worker reports goes into INFO only if it looks like one:
// a worker taken over by a hostile model wrote lines of its own into
// every client's INFO (red-team review).
func TestPlainVersion(t *testing.T) {
	for v, want := range map[string]bool{
		"1.24.1": true, "1.24.1+cpu": true, "1.25.0-dev": true,
		"": false, "1.24.1\r\nrole:slave": false, "1.24 1": false, strings.Repeat("1", 33): false,
	} {
		if plainVersion(v) != want {
			t.Errorf("plainVersion(%q) = %v", v, !want)
		}
	}
}

// A worker killed because the server could not send it a request (its
// own failure: out of memory, too many descriptors in flight) blames no
// model; one whose socket its worker closed, or that is gone, is left to
// its wait status (diff review: every failed send was a SIGKILL crash).
func TestSendFailureBlamesNoModel(t *testing.T) {
	for err, want := range map[error]string{
		syscall.EPIPE: "", syscall.ECONNRESET: "", syscall.ENOTCONN: "",
		syscall.ENOMEM: causeSend, syscall.ETOOMANYREFS: causeSend, syscall.ENOBUFS: causeSend,
	} {
		if got := sendFailure(err); got != want {
			t.Errorf("%v: %q, want %q", err, got, want)
		}
	}
	if isCrash(classify(nil, causeSend)) {
		t.Error("a worker the server could not send to is a model's crash")
	}
}

// A worker that spins while no call is in flight is killed and replaced
// (watchCPU): a model whose first run leaves two goroutines spinning (the
// test hook) costs its worker within a few windows, the death is counted
// as "spin", blames no model, and the next run works on a new worker. A
// worker left idle after its runs is not killed. Before the watchdog the
// spinning worker lived on.
func TestWorkerSpinningOutsideRunsIsKilled(t *testing.T) {
	pool := newTestPool(t, Config{TestHooks: true})
	one := []*modelstore.Tensor{floats([]int64{1, 4}, func(int) float32 { return 1 })}
	calm := compile(t, pool, "linear.onnx")
	for range 20 {
		if _, err := calm.Run(context.Background(), one); err != nil {
			t.Fatal(err)
		}
	}
	pid := workerPID(t, calm)
	time.Sleep(4 * spinWindow)
	if got := workerPID(t, calm); got != pid {
		t.Fatalf("an idle worker was replaced (pid %d, then %d)", pid, got)
	}

	spins := compileBytes(t, pool, "spins", marked(t, spinMarker))
	if _, err := spins.Run(context.Background(), one); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * spinWindow)
	for syscall.Kill(pid, 0) == nil {
		if time.Now().After(deadline) {
			t.Fatalf("the worker spinning outside any run still lives after %s", 20*spinWindow)
		}
		time.Sleep(spinWindow / 5)
	}
	info := map[string]string{}
	for _, kv := range pool.Info() {
		info[kv[0]] = kv[1]
	}
	if info["engine_worker_deaths_spin"] != "1" {
		t.Errorf("deaths: %v", info)
	}
	for _, s := range []modelstore.EngineSession{calm, spins} {
		if q := s.(modelstore.Quarantiner).Quarantined(); q != nil {
			t.Errorf("a model was quarantined for the spin: %v", q)
		}
	}
	if _, err := calm.Run(context.Background(), one); err != nil {
		t.Fatalf("the run after the spin: %v", err)
	}
	if got := workerPID(t, calm); got == pid {
		t.Fatal("the worker was not replaced")
	}
}

// A worker that never answers a session's close is judged again once the
// close is closeGrace old (review: a worker taken over that swallowed one
// close was exempt from the watchdog for good, and spun on).
func TestSwallowedCloseDoesNotExemptASpinningWorker(t *testing.T) {
	pool := newTestPool(t, Config{TestHooks: true})
	one := []*modelstore.Tensor{floats([]int64{1, 4}, func(int) float32 { return 1 })}
	spins := compileBytes(t, pool, "spins", marked(t, spinMarker))
	pid := workerPID(t, spins)
	if _, err := spins.Run(context.Background(), one); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	spins.Close() // the test hook never answers it
	deadline := start.Add(closeGrace + 20*spinWindow)
	for syscall.Kill(pid, 0) == nil {
		if time.Now().After(deadline) {
			t.Fatalf("the worker spinning behind a swallowed close still lives after %s", time.Since(start))
		}
		time.Sleep(spinWindow / 5)
	}
	if took := time.Since(start); took < closeGrace {
		t.Errorf("killed after %s, while its close was in flight", took)
	}
	for _, kv := range pool.Info() {
		if kv[0] == "engine_worker_deaths_spin" && kv[1] != "1" {
			t.Errorf("deaths by spin: %s", kv[1])
		}
	}
}

// What the watchdog counts as idle since t, with a close that the worker
// has not answered: idle once the close is closeGrace old, but not over a
// window in which another call ended (it ran then).
func TestIdleSinceWithAnUnansweredClose(t *testing.T) {
	now := time.Now()
	for _, c := range []struct {
		sent, lastDone, since time.Duration // before now
		want                  bool
	}{
		{sent: 10 * time.Second, lastDone: 8 * time.Second, since: time.Second, want: true},
		{sent: 10 * time.Second, lastDone: 500 * time.Millisecond, since: time.Second, want: false},
		{sent: 2 * time.Second, lastDone: 8 * time.Second, since: time.Second, want: false},
	} {
		p := &proc{ready: true, lastDone: now.Add(-c.lastDone),
			pending: map[uint64]*call{1: {stage: "close", sent: now.Add(-c.sent)}}}
		if got := p.idleSinceLocked(now.Add(-c.since)); got != c.want {
			t.Errorf("close sent %s ago, a call done %s ago: idle since %s ago = %v", c.sent, c.lastDone, c.since, got)
		}
	}
	p := &proc{ready: true, lastDone: now.Add(-8 * time.Second),
		pending: map[uint64]*call{1: {stage: "close", sent: now.Add(-10 * time.Second)}, 2: {stage: "run"}}}
	if p.idleSinceLocked(now.Add(-time.Second)) {
		t.Error("a run in flight beside an old close counted as idle")
	}
}

// A run that comes just after the watchdog has killed its worker goes to
// the replacement: it failed with the spin's error, for a worker that the
// kernel had not yet reaped (review).
func TestRunAfterASpinKillGoesToTheReplacement(t *testing.T) {
	pool := newTestPool(t, Config{})
	one := []*modelstore.Tensor{floats([]int64{1, 4}, func(int) float32 { return 1 })}
	s := compile(t, pool, "linear.onnx")
	for range restartBurst - 1 { // kills within the restart limit
		if _, err := s.Run(context.Background(), one); err != nil {
			t.Fatal(err)
		}
		p := s.(*session).slot.cur
		time.Sleep(10 * time.Millisecond)
		if !p.markSpin(time.Now()) {
			t.Fatal("an idle worker was not marked")
		}
		p.cmd.Process.Kill()
		if _, err := s.Run(context.Background(), one); err != nil {
			t.Fatalf("the run after the kill: %v", err)
		}
		if s.(*session).slot.cur == p {
			t.Fatal("the run went to the killed worker")
		}
	}
}
