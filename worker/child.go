package worker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/enclaveai/enclaveai/modelstore"
)

// Environment of a worker process, set by the server that starts it.
const (
	envWorker    = "ENCLAVEAI_ENGINE_WORKER"     // "1" in a worker
	envMemory    = "ENCLAVEAI_ENGINE_MEMORY"     // RLIMIT_DATA in bytes, "0" = none
	envTestHooks = "ENCLAVEAI_ENGINE_TEST_HOOKS" // "1": see hangMarker
	envSeccomp   = "ENCLAVEAI_ENGINE_SECCOMP"    // "0": no filter
	controlFD    = 3                             // the control socket (exec.Cmd ExtraFiles[0])
)

// hangMarker: with test hooks on, a worker asked to compile a model whose
// bytes contain it never answers, as a session creation that hangs inside
// ONNX Runtime would (no real model that does so is at hand; see
// docs/ENGINE_ISOLATION.md).
var hangMarker = []byte("enclaveai-test-hang-at-compile")

// probeMarker: with test hooks on, a worker asked to compile a model whose
// bytes contain it tries, as a worker taken over by a hostile model would,
// to reach the server, and fails the compile with what came of each try
// (probeEscapes).
var probeMarker = []byte("enclaveai-test-probe-escapes")

// exitMarker: with test hooks on, a worker asked to run a model whose
// bytes contain it followed by a digit writes on stderr what a kill by
// the kernel, or a failed start, would look like, and exits with that
// digit for its status, as a worker taken over by a hostile model could
// (its words must not decide why it died: the server reads that from the
// kernel).
var exitMarker = []byte("enclaveai-test-exit-at-run-")

// forgeMarker: with test hooks on, a worker asked to run a model whose
// bytes contain it replies with its first output's shape made 100,000,000
// elements, its data left as it is, as a worker taken over by a hostile
// model could (the server checks what it stores: modelstore.CheckTensor).
var forgeMarker = []byte("enclaveai-test-forge-output")

// spinMarker: with test hooks on, a worker asked to run a model whose
// bytes contain it starts, at its first run, two goroutines that spin for
// good once the run is answered, as the threads that a worker taken over
// by a hostile model can start outside any run, and never answers the
// session's close (the server's CPU watchdog, proc.watchCPU, kills it).
var spinMarker = []byte("enclaveai-test-spin-after-run")

// exitLie is what a worker with exitMarker writes before it exits.
const exitLie = "SIGKILL: killed by the kernel's OOM killer\n" + startPrefix + "loading ONNX Runtime failed\n"

// IsWorker reports whether this process was started as an engine worker:
// the server's main calls Main then, before anything else.
func IsWorker() bool { return os.Getenv(envWorker) == "1" }

// Main runs an engine worker until its control socket closes, then exits.
// It never returns.
func Main() {
	if err := serve(); err != nil {
		fmt.Fprint(os.Stderr, startPrefix, err, "\n") // the server reads it (startFailure)
		os.Exit(1)
	}
	os.Exit(0)
}

func serve() error {
	shieldWorker() // no other process of this user reads it (shield.go)
	defaultCrashSignals()
	// No core files: a crash is reported by the server, and a core would
	// hold model weights and tensors.
	unix.Setrlimit(unix.RLIMIT_CORE, &unix.Rlimit{})
	if n, err := strconv.ParseInt(os.Getenv(envMemory), 10, 64); err == nil && n > 0 {
		if err := unix.Setrlimit(unix.RLIMIT_DATA, &unix.Rlimit{Cur: uint64(n), Max: uint64(n)}); err != nil {
			return fmt.Errorf("setting RLIMIT_DATA: %w", err)
		}
		// A memfd's pages count in no RLIMIT_DATA: its size is bounded
		// alike (a reply's outputs fit in what RLIMIT_DATA let the
		// worker allocate).
		if err := unix.Setrlimit(unix.RLIMIT_FSIZE, &unix.Rlimit{Cur: uint64(n), Max: uint64(n)}); err != nil {
			return fmt.Errorf("setting RLIMIT_FSIZE: %w", err)
		}
	}
	if err := modelstore.InitRuntime(os.Getenv(modelstore.RuntimeLibraryEnv)); err != nil {
		return err
	}
	// A lane's thread that returns from recvmsg, or from a run in ONNX
	// Runtime (a cgo call), needs a processor: with one for each lane and
	// two more (the control reader, the runtime's own work) none waits
	// for another's, which would cost a sleep and a wake-up per run.
	runtime.GOMAXPROCS(max(runtime.GOMAXPROCS(0), maxLanes+2))
	ch, err := newChannel(os.NewFile(controlFD, "engine-control"))
	if err != nil {
		return err
	}
	if os.Getenv(envSeccomp) != "0" {
		if err := installSeccomp(); err != nil {
			return fmt.Errorf("seccomp: %w", err)
		}
	}
	// Ready: what the worker writes on stderr from now on, when it may be
	// running a hostile model's code, is for the server's log only.
	ready := &enc{}
	ready.head(opReady, 0)
	if err := ch.send(ready.b); err != nil {
		return err
	}
	w := &child{ch: ch, sessions: map[uint64]*modelstore.Session{}, runs: map[uint64]context.CancelFunc{},
		early: map[uint64]struct{}{}, marked: map[uint64]*markers{}, hooks: os.Getenv(envTestHooks) == "1", done: make(chan struct{})}
	go w.read()
	<-w.done // the server closed the socket or is gone
	return nil
}

// crashSignals are the signals that end a worker when a crash raises
// them.
var crashSignals = []unix.Signal{unix.SIGSEGV, unix.SIGBUS, unix.SIGFPE, unix.SIGILL, unix.SIGABRT,
	unix.SIGTRAP, unix.SIGSYS}

// defaultCrashSignals gives crashSignals their default action, ending the
// process with the signal, in place of the Go runtime's handler, which
// turns a fault in ONNX Runtime on a Go thread (a cgo call), and abort()
// anywhere, into a report on stderr and exit status 2. The server reads a
// worker's cause of death from the kernel only (classify), so a crash is
// then reported with its signal; a fault in the worker's Go code, which
// recovers none, ends it alike.
func defaultCrashSignals() {
	for _, sig := range crashSignals {
		unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(sig), uintptr(unsafe.Pointer(&sigDefault)), 0, 8, 0, 0)
	}
}

// sigDefault is a struct sigaction of SIG_DFL, no flags, no restorer and
// an empty mask.
var sigDefault [4]uint64

// read reads and handles control messages until the socket fails. Runs
// arrive on lanes (lane.go), each served by a thread of its own.
func (w *child) read() {
	rb := newRecvBuf()
	for {
		msg, fds, err := w.ch.recv(rb)
		if err != nil {
			close(w.done)
			return
		}
		w.handle(msg, fds)
	}
}

// child is a worker's state: its sessions and the runs in flight.
type child struct {
	ch    *channel
	hooks bool
	done  chan struct{} // closed when the socket fails

	mu       sync.Mutex
	sessions map[uint64]*modelstore.Session
	runs     map[uint64]context.CancelFunc
	// early holds the runs cancelled before they started: a run queued on
	// its lane behind others of its group (lane.go) is answered
	// context.Canceled when its turn comes, without running.
	early map[uint64]struct{}
	// marked holds the test hooks' markers of the sessions whose model
	// carries any (test hooks on).
	marked map[uint64]*markers
}

// markers is what the test hooks do with a session's runs and close.
type markers struct {
	exit  bool // its runs exit the worker (exitMarker), with status code
	code  int
	forge bool // its runs' replies are forged (forgeMarker)
	spin  bool // its first run starts spinning goroutines, its close is never answered (spinMarker)
	spun  bool // they are started
}

// maxEarly bounds early: a cancel that crossed its run's reply leaves an
// entry that no run will take, so the set is emptied when it grows past
// this (a cancel lost that way lets the run go on until the server kills
// the worker at its grace, as before lanes queued runs).
const maxEarly = 1024

func (w *child) handle(msg []byte, fds []int) {
	d := &dec{b: msg}
	op, id := d.u8(), d.u64()
	if d.err != nil {
		closeAll(fds)
		return
	}
	switch op {
	case opCompile:
		go w.compile(id, d, fds)
	case opLane:
		if len(fds) == 2 {
			go w.serveLane(fds[0], fds[1])
		} else {
			closeAll(fds)
		}
	case opCancel:
		w.mu.Lock()
		cancel := w.runs[id]
		if cancel != nil {
			cancel()
		} else {
			if len(w.early) >= maxEarly {
				clear(w.early)
			}
			w.early[id] = struct{}{}
		}
		w.mu.Unlock()
		closeAll(fds)
	case opClose:
		sid := d.u64()
		w.mu.Lock()
		s := w.sessions[sid]
		m := w.marked[sid]
		delete(w.sessions, sid)
		delete(w.marked, sid)
		w.mu.Unlock()
		if s != nil {
			s.Close()
		}
		closeAll(fds)
		if m == nil || !m.spin {
			w.reply(w.ch, id, nil, nil) // the server counts it in flight till now
		}
	default:
		closeAll(fds)
	}
}

// reply sends request id's reply on ch: err, or status ok and what fill
// appends (fill sends the message itself).
func (w *child) reply(ch sender, id uint64, err error, fill func(e *enc) error) {
	e := &enc{}
	e.head(opReply, id)
	if err == nil && fill != nil {
		e.u8(0)
		if err = fill(e); err == nil {
			return
		}
		e.b = e.b[:0]
		e.head(opReply, id)
	}
	if err != nil {
		putError(e, err)
	} else {
		e.u8(0)
	}
	ch.send(e.b)
}

func (w *child) compile(id uint64, d *dec, fds []int) {
	sid := d.u64()
	opts := modelstore.SessionOptions{Optimize: d.u8() == 1, IntraOpThreads: int(d.u32()), InterOpThreads: int(d.u32())}
	size := d.u64()
	if d.err != nil || len(fds) != 1 || size == 0 || checkSize(size) != nil {
		closeAll(fds)
		w.reply(w.ch, id, errShort, nil)
		return
	}
	buf, err := modelstore.MapBuffer(fds[0], int(size))
	if err != nil {
		closeAll(fds)
		w.reply(w.ch, id, fmt.Errorf("mapping the model: %w", err), nil)
		return
	}
	defer buf.Unref() // a session that reads the weights in place holds its own
	if w.hooks && bytes.Contains(buf.Bytes(), hangMarker) {
		select {}
	}
	if w.hooks && bytes.Contains(buf.Bytes(), probeMarker) {
		w.reply(w.ch, id, errors.New(probeEscapes()), nil)
		return
	}
	s, err := modelstore.NewSharedSession(buf.Bytes(), buf, opts)
	if err != nil {
		w.reply(w.ch, id, err, nil)
		return
	}
	w.mu.Lock()
	w.sessions[sid] = s
	if w.hooks {
		b, m := buf.Bytes(), &markers{}
		if i := bytes.Index(b, exitMarker); i >= 0 && i+len(exitMarker) < len(b) {
			m.exit, m.code = true, int(b[i+len(exitMarker)]-'0')
		}
		m.forge = bytes.Contains(b, forgeMarker)
		m.spin = bytes.Contains(b, spinMarker)
		if *m != (markers{}) {
			w.marked[sid] = m
		}
	}
	w.mu.Unlock()
	w.reply(w.ch, id, nil, func(e *enc) error {
		putIO(e, s.Inputs())
		putIO(e, s.Outputs())
		mode, shared := s.Weights()
		e.u8(byte(mode))
		e.u64(uint64(shared))
		e.str(modelstore.RuntimeVersion())
		return w.ch.send(e.b)
	})
}

// run runs a session on the tensors of a run request and replies on l,
// building the reply in *out (replyTensors).
func (w *child) run(ctx context.Context, l sender, out *[]byte, id uint64, d *dec, fds []int) {
	defer func() {
		w.mu.Lock()
		delete(w.runs, id)
		w.mu.Unlock()
	}()
	sid := d.u64()
	inputs, done, err := recvTensors(d, fds, false, 0)
	closeAll(fds)
	if err != nil {
		w.reply(l, id, err, nil)
		return
	}
	defer done()
	w.mu.Lock()
	s := w.sessions[sid]
	var m markers // a copy: the close may delete it meanwhile
	if p := w.marked[sid]; p != nil {
		m = *p
		p.spun = p.spin
	}
	w.mu.Unlock()
	if s == nil {
		w.reply(l, id, modelstore.ErrSessionClosed, nil)
		return
	}
	if m.exit {
		os.Stderr.WriteString(exitLie)
		unix.Exit(m.code) // _exit(2), as a hostile model would: no exit hooks (the race build runs C exit handlers)
	}
	outs, err := s.Run(ctx, inputs)
	if err != nil {
		w.reply(l, id, err, nil)
		return
	}
	if m.forge && len(outs) > 0 {
		outs[0].Shape = []int64{100_000_000}
	}
	w.replyTensors(l, out, id, outs)
	if m.spin && !m.spun {
		for range 2 {
			go func() {
				//lint:ignore SA5002 it spins on purpose (spinMarker)
				for {
				}
			}()
		}
	}
}

// replyTensors answers run id with its outputs, or with the error of
// sending them. The message is built in *out, the lane's buffer, which
// the next reply reuses once this one is sent: a fresh one when *out is
// too small, kept when it holds at most maxMessage bytes. Otherwise each
// reply was garbage the size of the run's outputs, and with outputs of
// 75 KB the collections it caused took a third of the worker's CPU (`go
// test -bench Run ./worker`, rows-6272, under perf record).
func (w *child) replyTensors(l sender, out *[]byte, id uint64, outs []*modelstore.Tensor) {
	size := headSize + 1 + payloadSize(outs)
	e := &enc{b: (*out)[:0]}
	if cap(e.b) < size {
		e.b = make([]byte, 0, size)
		if size <= maxMessage {
			*out = e.b
		}
	}
	e.head(opReply, id)
	e.u8(0)
	if err := sendTensors(l, e, outs); err != nil {
		w.reply(l, id, err, nil)
	}
}
