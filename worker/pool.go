package worker

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/enclaveai/enclaveai/modelstore"
)

// Isolation modes (the engine-isolation directive).
const (
	// PerTenant: with users configured, each user's models run in workers
	// of their own.
	PerTenant = "per-tenant"
	// Shared: every model runs in one pool of workers.
	Shared = "shared"
)

// Config configures a Pool.
type Config struct {
	// Exe is the binary started in worker mode (IsWorker): the server's own.
	Exe string
	// Lib is the ONNX Runtime library the workers load.
	Lib string
	// Workers is the number of worker processes per placement group (>= 1).
	Workers int
	// Memory is each worker's RLIMIT_DATA in bytes (0: none).
	Memory int64
	// Isolation is PerTenant or Shared.
	Isolation string
	// CompileTimeout bounds a session creation (0: one minute).
	CompileTimeout time.Duration
	// ReplyPoll is how long a run that is all the server is doing
	// (modelstore.Alone) polls its lane for the reply before it sleeps in
	// the poller, and how long the worker's end of the lane then polls for
	// the next request before it sleeps in recvmsg (0: never; never on one
	// CPU).
	ReplyPoll time.Duration
	// KillGrace is how long a run may go on after its deadline, which
	// asks ONNX Runtime to stop it, before its worker is killed (0: 1 s).
	KillGrace time.Duration
	// TestHooks turns on the workers' test hooks (see hangMarker).
	TestHooks bool
	// NoSeccomp runs the workers without their system-call filter.
	NoSeccomp bool
	Log       *slog.Logger
}

// Restart rate limit: a worker slot restarts at most restartBurst times in
// restartWindow; beyond that its models get ErrRestartLimited until the
// window has room again, so that a client who keeps crashing workers
// cannot keep the machine busy starting them.
const (
	restartBurst  = 5
	restartWindow = 10 * time.Second
)

// Pool runs models in supervised worker processes. It implements
// modelstore.Engine.
type Pool struct {
	cfg Config
	log *slog.Logger

	mu     sync.Mutex
	groups map[string][]*slot
	// closed is set by Close under mu, and read under mu (place) or
	// without it (a dying worker, which holds its slot's lock, and mu
	// comes before slot.mu: docs/LOCKS.md).
	closed atomic.Bool

	deathsMu sync.Mutex
	deaths   map[string]int64 // by cause
	restarts atomic.Int64
	// lastRestart is the time the last replacement took to start and
	// recreate its sessions, in microseconds.
	lastRestart atomic.Int64
	nextSID     atomic.Uint64
	// version is ONNX Runtime's, as the first worker to compile a model
	// gave it (the server process never loads the library).
	version atomic.Pointer[string]
}

// plainVersion reports whether v looks like a version: at most 32 letters,
// digits, dots, dashes and pluses.
func plainVersion(v string) bool {
	if v == "" || len(v) > 32 {
		return false
	}
	for _, c := range v {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '.' || c == '-' || c == '+') {
			return false
		}
	}
	return true
}

// RuntimeVersion is the workers' ONNX Runtime version, or "" before one
// has compiled a model (RedisAI, too, names a backend once it is loaded).
func (p *Pool) RuntimeVersion() string {
	if v := p.version.Load(); v != nil {
		return *v
	}
	return ""
}

// NewPool returns a pool; workers start when the first model needs one.
func NewPool(cfg Config) (*Pool, error) {
	if cfg.Workers < 1 {
		cfg.Workers = 1
	}
	if cfg.CompileTimeout <= 0 {
		cfg.CompileTimeout = time.Minute
	}
	if cfg.KillGrace <= 0 {
		cfg.KillGrace = time.Second
	}
	if cfg.Isolation != PerTenant && cfg.Isolation != Shared {
		return nil, fmt.Errorf("worker: unknown isolation %q", cfg.Isolation)
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	shieldServer()
	root := os.Geteuid() == 0
	switch {
	case cfg.NoSeccomp:
		if root {
			cfg.Log.Warn("running as root with the engine workers' sandbox off: they hold every capability, which lets one that a hostile model took over read and write the server's memory through /proc (docs/ENGINE_ISOLATION.md)")
		}
	case landlockABI() == 0:
		cfg.Log.Warn("this kernel has no Landlock: an engine worker that a hostile model took over can read every file of the server's user (the seal key, a TLS key, the configuration) and write them (docs/ENGINE_ISOLATION.md)")
	case root:
		cfg.Log.Warn("running as root: engine workers drop every capability as they start, but stay uid 0, the owner of root's files; run the server as an unprivileged user (docs/ENGINE_ISOLATION.md)")
	}
	return &Pool{cfg: cfg, log: cfg.Log, groups: map[string][]*slot{}, deaths: map[string]int64{}}, nil
}

// Name implements modelstore.Engine.
func (p *Pool) Name() string { return "onnxruntime-worker" }

// NeedsBuffer implements modelstore.BufferEngine: workers map the model's
// memfd.
func (p *Pool) NeedsBuffer() bool { return true }

// group is the placement group of a model stored by owner: with
// per-tenant, a user's models go to workers of that user's only.
func (p *Pool) group(owner string) string {
	if p.cfg.Isolation == PerTenant {
		return "user:" + owner
	}
	return ""
}

// Close stops every worker; sessions fail from then on.
func (p *Pool) Close() {
	p.mu.Lock()
	p.closed.Store(true)
	var slots []*slot
	for _, g := range p.groups {
		slots = append(slots, g...)
	}
	p.mu.Unlock()
	for _, s := range slots {
		s.mu.Lock()
		cur := s.cur
		s.mu.Unlock()
		if cur != nil {
			cur.kill("shutdown")
		}
	}
}

// place picks the slot of group with the fewest sessions.
func (p *Pool) place(group string) (*slot, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed.Load() {
		return nil, errPoolClosed
	}
	g := p.groups[group]
	if g == nil {
		g = make([]*slot, p.cfg.Workers)
		for i := range g {
			g[i] = &slot{pool: p, group: group, idx: i, sessions: map[*session]struct{}{}}
		}
		p.groups[group] = g
	}
	best := g[0]
	for _, s := range g[1:] {
		if s.count() < best.count() {
			best = s
		}
	}
	return best, nil
}

var errPoolClosed = errors.New("engine workers are shut down")

// ErrRestartLimited is returned while a worker slot may not restart. It is
// an EngineError, so the client reads this text rather than "internal
// error".
var ErrRestartLimited error = &modelstore.EngineError{Msg: fmt.Sprintf(
	"engine worker restarting too often (%d starts in %v); try again later", restartBurst, restartWindow)}

// Compile implements modelstore.Engine: the model is compiled in a worker
// of the owner's group, which maps the model's buffer read-only.
func (p *Pool) Compile(src modelstore.ModelSource, opts modelstore.SessionOptions) (modelstore.EngineSession, error) {
	if src.Buf == nil || !src.Buf.Shareable() {
		return nil, errors.New("engine workers need the model in a shared buffer")
	}
	sl, err := p.place(p.group(src.Owner))
	if err != nil {
		return nil, err
	}
	s := &session{slot: sl, buf: src.Buf, opts: opts, origin: src.Origin, sum: src.SHA256, sid: p.nextSID.Add(1)}
	src.Buf.Ref()
	pr, err := sl.proc()
	if err == nil {
		s.mu.Lock() // compileOn's rule; no one else has s yet
		err = s.compileOn(pr)
		s.mu.Unlock()
	}
	if err != nil {
		src.Buf.Unref()
		return nil, err
	}
	sl.add(s)
	return s, nil
}

// countDeath adds a worker death to the INFO counters.
func (p *Pool) countDeath(cause string) {
	p.deathsMu.Lock()
	p.deaths[cause]++
	p.deathsMu.Unlock()
}

// Info is the engine's INFO section.
func (p *Pool) Info() [][2]string {
	p.mu.Lock()
	workers, sessions := 0, 0
	for _, g := range p.groups {
		for _, s := range g {
			s.mu.Lock()
			// A slot keeps its dead worker until the next one starts
			// (revive, or the next store where it had no sessions).
			if s.cur != nil && !s.cur.isDead() {
				workers++
			}
			sessions += len(s.sessions)
			s.mu.Unlock()
		}
	}
	groups := len(p.groups)
	p.mu.Unlock()
	f := [][2]string{
		{"engine", p.Name()},
		{"engine_isolation", p.cfg.Isolation},
		{"engine_workers_per_group", strconv.Itoa(p.cfg.Workers)},
		{"engine_worker_memory", strconv.FormatInt(p.cfg.Memory, 10)},
		{"engine_groups", strconv.Itoa(groups)},
		{"engine_workers_running", strconv.Itoa(workers)},
		{"engine_sessions", strconv.Itoa(sessions)},
		{"engine_worker_restarts", strconv.FormatInt(p.restarts.Load(), 10)},
		{"engine_worker_last_restart_us", strconv.FormatInt(p.lastRestart.Load(), 10)},
	}
	p.deathsMu.Lock()
	causes := make([]string, 0, len(p.deaths))
	var total int64
	for c, n := range p.deaths {
		causes = append(causes, c)
		total += n
	}
	sort.Strings(causes)
	f = append(f, [2]string{"engine_worker_deaths", strconv.FormatInt(total, 10)})
	for _, c := range causes {
		name := strings.ReplaceAll(strings.ToLower(c), " ", "_") // "exit 0": engine_worker_deaths_exit_0
		f = append(f, [2]string{"engine_worker_deaths_" + name, strconv.FormatInt(p.deaths[c], 10)})
	}
	p.deathsMu.Unlock()
	return f
}

// slot is one worker of a group, across its restarts.
type slot struct {
	pool  *Pool
	group string
	idx   int

	mu       sync.Mutex
	cur      *proc // nil when no worker runs
	sessions map[*session]struct{}
	starts   []time.Time // restarts within restartWindow
}

func (sl *slot) count() int {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	return len(sl.sessions)
}

func (sl *slot) add(s *session) {
	sl.mu.Lock()
	sl.sessions[s] = struct{}{}
	sl.mu.Unlock()
}

func (sl *slot) remove(s *session) {
	sl.mu.Lock()
	delete(sl.sessions, s)
	sl.mu.Unlock()
}

// proc returns the slot's running worker, starting one if there is none.
func (sl *slot) proc() (*proc, error) {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	if sl.cur != nil && !sl.cur.isDead() {
		if !sl.cur.spun() {
			return sl.cur, nil
		}
		// The watchdog has killed it: a run sent to it now would fail with
		// its death. Its end is a matter of milliseconds (die closes dead
		// before it takes sl.mu), then it is replaced here.
		select {
		case <-sl.cur.dead:
		case <-time.After(time.Second):
			return sl.cur, nil
		}
	}
	restart := sl.cur != nil
	if restart {
		now := time.Now()
		keep := sl.starts[:0]
		for _, t := range sl.starts {
			if now.Sub(t) < restartWindow {
				keep = append(keep, t)
			}
		}
		sl.starts = keep
		if len(sl.starts) >= restartBurst {
			return nil, ErrRestartLimited
		}
		sl.starts = append(sl.starts, now)
		sl.pool.restarts.Add(1)
	}
	p, err := sl.start()
	if err != nil {
		return nil, err
	}
	sl.cur = p
	return p, nil
}

// revive replaces a dead worker at once and recreates its sessions there
// from their shared buffers, so that the next runs do not wait for it.
//
// A slot without sessions is left empty, for the next store to start: a
// worker that cannot start (its library does not load under its memory
// limit) was otherwise started again at each death, five times in 100 ms,
// spending the restart limit on nothing (review).
func (sl *slot) revive() {
	if sl.count() == 0 {
		return
	}
	start := time.Now()
	p, err := sl.proc()
	if err != nil {
		sl.pool.log.Warn("engine worker not restarted", "group", sl.group, "worker", sl.idx, "err", err)
		return
	}
	sl.mu.Lock()
	ss := make([]*session, 0, len(sl.sessions))
	for s := range sl.sessions {
		ss = append(ss, s)
	}
	sl.mu.Unlock()
	n := 0
	for _, s := range ss {
		if s.ensure(p) == nil {
			n++
		}
	}
	took := time.Since(start)
	sl.pool.lastRestart.Store(took.Microseconds())
	sl.pool.log.Info("engine worker restarted", "group", sl.group, "worker", sl.idx, "pid", p.pid(),
		"sessions", n, "took", took.String())
}

// start launches a worker process.
func (sl *slot) start() (*proc, error) {
	cfg := &sl.pool.cfg
	parent, child, err := socketPair()
	if err != nil {
		return nil, err
	}
	defer child.Close()
	errR, errW, err := os.Pipe()
	if err != nil {
		parent.Close()
		return nil, err
	}
	cmd := exec.Command(cfg.Exe)
	// A minimal environment: the server's may hold secrets.
	cmd.Env = []string{envWorker + "=1", modelstore.RuntimeLibraryEnv + "=" + cfg.Lib,
		envMemory + "=" + strconv.FormatInt(cfg.Memory, 10), "GOTRACEBACK=none"}
	if cfg.TestHooks {
		cmd.Env = append(cmd.Env, envTestHooks+"=1")
	}
	if cfg.NoSeccomp {
		cmd.Env = append(cmd.Env, envSeccomp+"=0")
	}
	cmd.Dir = "/"
	cmd.ExtraFiles = []*os.File{child} // fd 3: controlFD
	cmd.Stderr = errW
	// The worker dies with the server; its own process group keeps the
	// terminal's ^C (meant for the server) away from it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	err = cmd.Start()
	errW.Close()
	if err != nil {
		parent.Close()
		errR.Close()
		return nil, fmt.Errorf("starting an engine worker: %w", err)
	}
	ch, err := newChannel(parent)
	if err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		errR.Close()
		return nil, err
	}
	p := &proc{slot: sl, cmd: cmd, ch: ch, pending: map[uint64]*call{}, dead: make(chan struct{}),
		lanes: make(chan *lane, maxLanes), stderrDone: make(chan struct{})}
	go p.readStderr(errR)
	go p.readLoop()
	go p.watchCPU()
	return p, nil
}

// proc is one worker process.
type proc struct {
	slot *slot
	cmd  *exec.Cmd
	ch   *channel

	mu       sync.Mutex
	pending  map[uint64]*call
	nextID   uint64
	killedAs string // why the server killed it ("" if it did not)
	// ready is set when the worker said it started (opReady), before it
	// read any request: from then on what it writes on stderr may be a
	// hostile model's, and never reaches a client (startFailure).
	ready bool
	// idleFrom is when the worker last had no call in flight: zero while
	// one is, and before it is ready (it loads ONNX Runtime then). What
	// CPU it uses from then on is no call's (watchCPU).
	idleFrom time.Time
	lastDone time.Time   // when a call was last answered or given up
	spin     atomic.Bool // killed by the watchdog (markSpin)
	cause    string      // set before dead is closed
	reason   string      // why it could not start, for clients (startFailure); set with cause
	dead     chan struct{}
	nlanes   int        // lanes made (lane.go)
	lanes    chan *lane // the idle ones
	// alone is held for reading by every group of runs sent to the worker
	// and for writing by a session on probation (session.probation): its
	// runs go alone, so that a crash then can be only its own.
	alone sync.RWMutex

	// What it wrote on stderr, for the log only (crashLine): a crash
	// report may run long, and a worker taken over writes what it likes.
	stderrHead []byte // the first stderrMax bytes
	stderrTail []byte // the last stderrMax bytes
	stderrDone chan struct{}
}

type call struct {
	sess  *session // nil for a compile
	stage string   // "store", "run" or "close"
	reply chan reply
	// on is the lane a run was sent on (nil for the control channel's
	// calls), seq its place there: a lane runs its requests one at a
	// time, in order, so the first of its runs still pending when the
	// worker dies is the one it was running (die).
	on  *lane
	seq uint64
	// sent is when a close was sent (closeSession; zero for other calls).
	sent time.Time
}

type reply struct {
	msg []byte
	fds []int
	err error
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

func (p *proc) isDead() bool {
	select {
	case <-p.dead:
		return true
	default:
		return false
	}
}

// addPendingLocked records call c, of id, as in flight; p.mu is held.
func (p *proc) addPendingLocked(id uint64, c *call) {
	p.pending[id] = c
	p.idleFrom = time.Time{}
}

// donePendingLocked records that call id (if still pending) is answered or
// given up; p.mu is held.
func (p *proc) donePendingLocked(id uint64) {
	delete(p.pending, id)
	p.lastDone = time.Now()
	if len(p.pending) == 0 && p.ready && p.idleFrom.IsZero() {
		p.idleFrom = p.lastDone
	}
}

// idleSinceLocked reports whether the worker has had no call in flight
// since t, counting a close as one only for closeGrace: a worker taken
// over that swallows a close (never answers it) must not be exempt from
// the watchdog for good (review). p.mu is held.
func (p *proc) idleSinceLocked(t time.Time) bool {
	if !p.idleFrom.IsZero() {
		return !p.idleFrom.After(t)
	}
	if !p.ready || len(p.pending) == 0 || p.lastDone.After(t) {
		return false // a call ended since t: it was in flight then
	}
	for _, c := range p.pending {
		if c.stage != "close" || c.sent.Add(closeGrace).After(t) {
			return false
		}
	}
	return true
}

// The CPU watchdog (watchCPU): a worker that had no call in flight for a
// whole window of spinWindow and used more than spinShare of a CPU in it
// is killed (cause "spin"). A worker taken over by a hostile model can
// start threads that spin outside any run, which no run's deadline
// bounds; a thousand of them took another tenant's PING from 11 ms to
// 1.1 s on 2 cores (red-team review). An idle worker uses next to nothing:
// its Go runtime's housekeeping, about 10 ms a minute.
const (
	spinWindow = 500 * time.Millisecond
	spinShare  = 0.25
	causeSpin  = "spin"
	// closeGrace is how long a session's close counts as a call in
	// flight: freeing a 1 GB model's memory takes a worker about 0.1 s.
	closeGrace = 5 * time.Second
)

// watchCPU samples the worker's CPU time every spinWindow until it dies,
// and kills it when it spins while idle (spinWindow). A worker whose
// calls are in flight is not judged: its runs' deadlines bound them.
func (p *proc) watchCPU() {
	t := time.NewTicker(spinWindow)
	defer t.Stop()
	last, lastAt := time.Duration(-1), time.Time{}
	for {
		select {
		case <-p.dead:
			return
		case <-t.C:
		}
		used, err := processCPU(p.pid())
		now := time.Now()
		if err != nil {
			last = -1
			continue
		}
		if last >= 0 && float64(used-last) > spinShare*float64(now.Sub(lastAt)) && p.markSpin(lastAt) {
			p.slot.pool.log.Warn("engine worker killed: it used CPU with no call in flight",
				"group", p.slot.group, "worker", p.slot.idx, "pid", p.pid(),
				"cpu", (used - last).String(), "in", now.Sub(lastAt).Round(time.Millisecond).String())
			p.cmd.Process.Kill()
			return
		}
		last, lastAt = used, now
	}
}

// markSpin records, if the worker has had no call in flight since t, that
// it is killed for spinning, and reports whether it had. Under one hold of
// p.mu, so that a call sent meanwhile is either judged or finds the cause.
func (p *proc) markSpin(t time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.idleSinceLocked(t) {
		return false
	}
	if p.killedAs == "" {
		p.killedAs = causeSpin
	}
	p.spin.Store(true)
	return true
}

// spun reports whether the watchdog has killed the worker (markSpin).
// It takes no lock: slot.proc asks it under the slot's.
func (p *proc) spun() bool { return p.spin.Load() }

// processCPU is the CPU time (user and system) process pid has used, all
// its threads together, from /proc/PID/stat: the kernel's count, which a
// worker cannot alter (its name, which it can, is skipped by the last
// parenthesis).
func processCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errors.New("malformed /proc stat")
	}
	// After the name: state (field 3) ... utime (14), stime (15).
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, errors.New("malformed /proc stat")
	}
	var ticks int64
	for _, s := range f[11:13] {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, err
		}
		ticks += n
	}
	// /proc counts in USER_HZ, 100 a second on every Linux ABI.
	return time.Duration(ticks) * 10 * time.Millisecond, nil
}

// kill kills the process (once), recording why.
func (p *proc) kill(why string) {
	p.mu.Lock()
	if p.killedAs == "" {
		p.killedAs = why
	}
	p.mu.Unlock()
	p.cmd.Process.Kill()
}

// stderrMax is how much of a worker's last output is kept.
const stderrMax = 8 << 10

func (p *proc) readStderr(r *os.File) {
	defer close(p.stderrDone)
	defer r.Close()
	br := bufio.NewReader(r)
	buf := make([]byte, 4096)
	for {
		n, err := br.Read(buf)
		if n > 0 {
			p.mu.Lock()
			if room := stderrMax - len(p.stderrHead); room > 0 {
				p.stderrHead = append(p.stderrHead, buf[:min(n, room)]...)
			}
			p.stderrTail = append(p.stderrTail, buf[:n]...)
			if len(p.stderrTail) > stderrMax {
				p.stderrTail = append([]byte(nil), p.stderrTail[len(p.stderrTail)-stderrMax:]...)
			}
			p.mu.Unlock()
		}
		if err != nil {
			return
		}
	}
}

func (p *proc) readLoop() {
	rb := newRecvBuf()
	for {
		msg, fds, err := p.ch.recv(rb)
		if err != nil {
			p.die()
			return
		}
		d := &dec{b: msg}
		op, id := d.u8(), d.u64()
		if op == opReady && d.err == nil {
			p.mu.Lock()
			p.ready = true
			if len(p.pending) == 0 {
				p.idleFrom = time.Now()
			}
			p.mu.Unlock()
			closeAll(fds)
			continue
		}
		if op != opReply || d.err != nil {
			closeAll(fds)
			continue
		}
		p.mu.Lock()
		c := p.pending[id]
		p.donePendingLocked(id)
		p.mu.Unlock()
		if c == nil {
			closeAll(fds) // a run given up on
			continue
		}
		c.reply <- reply{msg: d.b, fds: fds}
		// The caller is now runnable on this P: let it run here before
		// this goroutine blocks in recvmsg again, which would hold the P
		// in a system call until another thread steals the caller.
		runtime.Gosched()
	}
}

// die handles the end of a worker: finds why, fails the calls in flight,
// quarantines the models that crashed it, and starts a replacement.
func (p *proc) die() {
	p.cmd.Process.Kill()
	p.cmd.Wait()
	state := p.cmd.ProcessState
	select {
	case <-p.stderrDone:
	case <-time.After(time.Second): // a descendant holding the pipe
	}
	p.ch.close()
	p.mu.Lock()
	report := append(append([]byte(nil), p.stderrHead...), p.stderrTail...)
	cause := classify(state, p.killedAs)
	p.cause = cause
	if !p.ready {
		p.reason = startFailure(report)
	}
	reason := p.reason
	pending := p.pending
	p.pending = nil
	detail := crashLine(report)
	close(p.dead)
	p.mu.Unlock()
	p.closeLanes()

	pool := p.slot.pool
	if cause == "shutdown" {
		for _, c := range pending {
			c.reply <- reply{err: deathError(c.stage, cause, reason)}
		}
		return
	}
	pool.countDeath(cause)
	crashed := running(pending)
	named := false // a call whose model is logged (compileOn logs stores)
	suspects := len(crashed)
	for _, c := range pending {
		named = named || c.sess != nil
		if c.stage == "store" {
			suspects++ // a session being created, which may have crashed it
		}
	}
	// Quarantined before the failed runs are answered: a client that
	// retries at once is refused. Only a model that was the one suspect
	// is blamed: with two running on two lanes, or one running while
	// another was being created, either may have crashed the worker, and
	// quarantining the runs let one client's crashing model shut
	// another's (another tenant's, under shared isolation) out until it
	// was stored again (engine review). Each suspect's next runs go alone
	// instead (probation), so that a model that crashes the worker is
	// quarantined at its next crash, however many runs an attacker keeps
	// going beside it (diff review).
	quarantine := isCrash(cause) && len(crashed) == 1 && suspects == 1
	for s := range crashed {
		switch {
		case quarantine:
			s.quarantine(cause)
		case isCrash(cause):
			s.probation.Store(true)
		}
		s.logDeath(cause, "run", detail, quarantine, false)
	}
	for _, c := range pending {
		c.reply <- reply{err: deathError(c.stage, cause, reason)}
	}
	if !named {
		pool.log.Warn("engine worker died", "group", p.slot.group, "worker", p.slot.idx, "pid", p.pid(),
			"cause", cause, "stage", "idle", "detail", detail)
	}
	// Under the slot's lock, so that Close, which sets closed before it
	// visits the slots, either finds what revive starts or is seen here.
	// Pool.mu is not taken: it comes before slot.mu, and Info and place,
	// holding it, wait for slot locks (a dying worker that took Pool.mu
	// here hung INFO and AI.MODELSTORE for good: code review).
	p.slot.mu.Lock()
	closed := pool.closed.Load()
	p.slot.mu.Unlock()
	if !closed {
		go p.slot.revive()
	}
}

// running is the sessions whose runs a worker was running when it died,
// given the calls pending then: on each lane, the first of its runs still
// pending (the runs queued behind it had not begun).
func running(pending map[uint64]*call) map[*session]bool {
	first := map[*lane]*call{}
	for _, c := range pending {
		if c.sess == nil || c.stage != "run" || c.on == nil {
			continue
		}
		if f := first[c.on]; f == nil || c.seq < f.seq {
			first[c.on] = c
		}
	}
	out := make(map[*session]bool, len(first))
	for _, c := range first {
		out[c.sess] = true
	}
	return out
}

// deathError is what a call in flight on a worker that died gets; reason
// is why it could not start (startFailure), "" when it did start.
func deathError(stage, cause, reason string) error {
	what := "engine worker died (" + cause + ")"
	switch cause {
	case "timeout":
		what = "engine worker killed: a run or session creation overran its deadline"
	case "shutdown":
		what = "engine worker stopped: the server is shutting down"
	case causeSpin:
		what = "engine worker killed: it used CPU with no run in flight"
	}
	switch {
	case reason != "":
		what = "engine worker could not start (" + cause + "): " + reason
	case stage == "store":
		what += " while creating its session"
	}
	if stage == "store" {
		return &modelstore.EngineError{Msg: "model could not be loaded: " + what}
	}
	return &modelstore.EngineError{Msg: "model execution failed: " + what}
}

// classify names why a worker ended, from the kernel's account of it (its
// wait status) and the server's own: "timeout" or "shutdown" when the
// server killed it, else the signal that ended it ("SIGSEGV"), else
// "exit N". Never from what the worker wrote: a worker taken over by a
// hostile model writes what it likes (red-team review: "SIGKILL" on its
// stderr and an exit passed for a kill from outside, which quarantined
// nothing). A worker's fatal signals end it with that signal
// (defaultCrashSignals), so a crash in ONNX Runtime is reported as one.
func classify(state *os.ProcessState, killedAs string) string {
	if killedAs != "" {
		return killedAs
	}
	if state == nil {
		return "unknown"
	}
	if ws, ok := state.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return signalName(ws.Signal())
	}
	return "exit " + strconv.Itoa(state.ExitCode())
}

func signalName(s syscall.Signal) string {
	names := map[syscall.Signal]string{syscall.SIGSEGV: "SIGSEGV", syscall.SIGABRT: "SIGABRT",
		syscall.SIGFPE: "SIGFPE", syscall.SIGBUS: "SIGBUS", syscall.SIGILL: "SIGILL",
		syscall.SIGKILL: "SIGKILL", syscall.SIGTERM: "SIGTERM", syscall.SIGSYS: "SIGSYS",
		syscall.SIGTRAP: "SIGTRAP", syscall.SIGXCPU: "SIGXCPU"}
	if n, ok := names[s]; ok {
		return n
	}
	return "signal " + strconv.Itoa(int(s))
}

// isCrash: deaths the models in flight are to blame for: every death the
// server did not ask for, by any signal or any exit, status 0 included.
// A worker taken over can exit, or send itself any signal (SIGKILL
// included), so none of these can be told from a kill from outside (an
// operator's, the kernel's OOM killer's, which takes a worker first).
func isCrash(cause string) bool {
	switch cause {
	case "timeout", "shutdown", "unknown", causeSend, causeSpin:
		return false
	}
	return true
}

// causeSend is the cause of a worker killed because the server could not
// send it a request for a reason of the server's side.
const causeSend = "send failed"

// sendFailure is the kill reason after a request could not be sent: none
// where the worker closed its end or is gone (its own doing: its wait
// status says what it was), causeSend where the server could not send
// (out of memory, too many descriptors in flight, ...): killed with no
// reason, that worker's SIGKILL was the model's crash (diff review).
func sendFailure(err error) string {
	if errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ENOTCONN) {
		return ""
	}
	return causeSend
}

// crashLine is the first line of the worker's crash report, or of its own
// error (Main's, which startFailure reads), for the log.
func crashLine(tail []byte) string {
	for _, line := range strings.Split(string(tail), "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "fatal error:") || strings.HasPrefix(line, "SIG") ||
			strings.HasPrefix(line, "terminate called") || strings.HasPrefix(line, "[signal") ||
			strings.HasPrefix(line, startPrefix) {
			return line
		}
	}
	return ""
}

// startPrefix starts the line Main writes when serve fails, which it does
// only before the worker reads its first request: loading ONNX Runtime,
// setting its limits.
const startPrefix = "engine worker: "

// dirs are the directories of the absolute paths in a line.
var dirs = regexp.MustCompile(`(^|[\s"'(=])/(?:[^\s"':/]+/)+`)

// startFailure is why the worker could not start, as it said it, for the
// client: the store that needed it failed with only "exit 1" (review).
// It is read only from a worker that died before it was ready (opReady),
// which had read no model yet.
// The line names the library by its host path, which is the log's only
// (errorText's rule): the directories are cut, leaving file names. "" when
// the worker wrote no such line.
func startFailure(report []byte) string {
	for _, line := range strings.Split(string(report), "\n") {
		if r, ok := strings.CutPrefix(strings.TrimSpace(line), startPrefix); ok {
			return dirs.ReplaceAllString(r, "$1")
		}
	}
	return ""
}

// call sends a request (a compile) on the control channel and waits for
// its reply, the worker's death, or ctx, whose end kills the worker.
func (p *proc) call(ctx context.Context, msg []byte, fds []int, sess *session, stage string) ([]byte, []int, error) {
	c := &call{sess: sess, stage: stage, reply: make(chan reply, 1)}
	p.mu.Lock()
	if p.pending == nil {
		p.mu.Unlock()
		return nil, nil, deathError(stage, p.cause, p.reason)
	}
	p.nextID++
	id := p.nextID
	p.addPendingLocked(id, c)
	p.mu.Unlock()
	// The id goes in the header's bytes 1..8, written by the caller as 0.
	putID(msg, id)
	if err := p.ch.send(msg, fds...); err != nil {
		p.kill(sendFailure(err))
		r := <-c.reply // the reader sees the socket fail
		return r.msg, r.fds, r.err
	}
	select {
	case r := <-c.reply:
		return r.msg, r.fds, r.err
	case <-ctx.Done():
	}
	p.kill("timeout")
	r := <-c.reply
	return r.msg, r.fds, r.err
}

// closeSession asks the worker to close session sid, without waiting.
// The close is a call in flight until the worker answers it, for at most
// closeGrace: freeing a large model's memory takes the worker CPU that is
// no spin (watchCPU).
func (p *proc) closeSession(sid uint64) {
	c := &call{stage: "close", reply: make(chan reply, 1), sent: time.Now()} // answered to no one
	p.mu.Lock()
	if p.pending == nil {
		p.mu.Unlock()
		return
	}
	p.nextID++
	id := p.nextID
	p.addPendingLocked(id, c)
	p.mu.Unlock()
	e := &enc{}
	e.head(opClose, id)
	e.u64(sid)
	if p.ch.send(e.b) != nil {
		p.mu.Lock()
		p.donePendingLocked(id)
		p.mu.Unlock()
	}
}

func putID(msg []byte, id uint64) {
	for i := 0; i < 8; i++ {
		msg[1+i] = byte(id >> (8 * i))
	}
}

// putPoll sets an opRun request's poll: how long the lane's worker thread
// polls for the next request once it has replied (lane.go).
func putPoll(msg []byte, poll time.Duration) {
	binary.LittleEndian.PutUint32(msg[headSize:], uint32(poll.Microseconds()))
}

// session is a model compiled in a worker of a slot. It survives the
// worker: a replacement recompiles it from the shared buffer.
type session struct {
	slot   *slot
	buf    *modelstore.ModelBuffer
	opts   modelstore.SessionOptions
	origin modelstore.Origin
	sum    string
	sid    uint64

	inputs, outputs []modelstore.IOInfo
	weights         modelstore.WeightsMode
	shared          int64

	mu     sync.Mutex
	on     *proc // the worker that has it compiled
	closed bool

	quarantined atomic.Pointer[modelstore.EngineError]
	// probation is set when the session was one of several the worker was
	// running or creating when it crashed: its next group of runs goes
	// alone on the worker (proc.alone). A crash then quarantines it; a
	// group that ends otherwise clears it.
	probation atomic.Bool
}

// compileOn creates the session in worker p; s.mu is held.
func (s *session) compileOn(p *proc) error {
	e := &enc{}
	e.head(opCompile, 0)
	e.u64(s.sid)
	opt := byte(0)
	if s.opts.Optimize {
		opt = 1
	}
	e.u8(opt)
	e.u32(uint32(s.opts.IntraOpThreads))
	e.u32(uint32(s.opts.InterOpThreads))
	e.u64(uint64(s.buf.Len()))
	deadline := s.slot.pool.cfg.CompileTimeout
	if s.origin.Loaded && s.inputs == nil { // its first compile only
		deadline *= modelstore.LoadedCompileFactor
	}
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	msg, fds, err := p.call(ctx, e.b, []int{s.buf.FD()}, s, "store")
	closeAll(fds)
	if err != nil {
		if ctx.Err() != nil {
			s.slot.pool.log.Warn("engine worker killed: session creation overran its deadline",
				"key", s.origin.Key, "owner", s.origin.Owner, "deadline", deadline.String(),
				"stage", "store")
			return &modelstore.EngineError{Msg: fmt.Sprintf("model could not be loaded: session creation did not finish within %s",
				deadline)}
		}
		var ee *modelstore.EngineError
		if errors.As(err, &ee) {
			p.mu.Lock()
			cause := p.cause
			detail := crashLine(p.stderrHead)
			p.mu.Unlock()
			s.logDeath(cause, "store", detail, false, true)
		}
		return err
	}
	d := &dec{b: msg}
	if d.u8() != 0 {
		return getError(d)
	}
	ins, outs := getIO(d), getIO(d)
	mode, shared := modelstore.WeightsMode(d.u8()), int64(d.u64())
	version := d.str()
	if d.err != nil {
		return d.err
	}
	if !plainVersion(version) {
		// INFO prints it as is: a worker taken over by a hostile model
		// wrote lines of its own into every client's INFO (red-team
		// review).
		version = "unknown"
	}
	s.slot.pool.version.CompareAndSwap(nil, &version)
	if s.on == nil && s.inputs == nil { // the first compile describes it
		s.inputs, s.outputs, s.weights, s.shared = ins, outs, mode, shared
	}
	s.on = p
	return nil
}

// ensure makes sure the session is compiled in p.
func (s *session) ensure(p *proc) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return modelstore.ErrSessionClosed
	}
	if q := s.quarantined.Load(); q != nil {
		return q
	}
	if s.on == p {
		return nil
	}
	return s.compileOn(p)
}

func (s *session) quarantine(cause string) {
	s.quarantined.CompareAndSwap(nil, &modelstore.EngineError{Msg: "model execution failed: the model is quarantined: it crashed an engine worker (" +
		cause + "); store it again to retry"})
}

// logDeath logs a worker death that a model of this session was in
// flight for. When the digest is not known it is computed first, in the
// background (a second a GB), holding a reference to the bytes; a session
// closed meanwhile is logged without it. locked says whether the caller
// holds s.mu.
func (s *session) logDeath(cause, stage, detail string, quarantined, locked bool) {
	log := func(sum string) {
		s.slot.pool.log.Warn("engine worker died", "key", s.origin.Key, "sha256", sum, "owner", s.origin.Owner,
			"cause", cause, "stage", stage, "quarantined", quarantined, "group", s.slot.group,
			"worker", s.slot.idx, "detail", detail)
	}
	if s.sum != "" {
		log(s.sum)
		return
	}
	if !locked {
		s.mu.Lock()
	}
	open := !s.closed
	if open {
		s.buf.Ref() // Close drops the session's only after closed is set
	}
	if !locked {
		s.mu.Unlock()
	}
	if !open {
		log("")
		return
	}
	go func() {
		defer s.buf.Unref()
		h := sha256.Sum256(s.buf.Bytes())
		log(hex.EncodeToString(h[:]))
	}()
}

// Inputs implements modelstore.EngineSession.
func (s *session) Inputs() []modelstore.IOInfo { return s.inputs }

// Outputs implements modelstore.EngineSession.
func (s *session) Outputs() []modelstore.IOInfo { return s.outputs }

// Weights implements modelstore.EngineSession.
func (s *session) Weights() (modelstore.WeightsMode, int64) { return s.weights, s.shared }

// Quarantined implements modelstore.Quarantiner.
func (s *session) Quarantined() error {
	if q := s.quarantined.Load(); q != nil {
		return q
	}
	return nil
}

// Close implements modelstore.EngineSession.
func (s *session) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	on := s.on
	s.on = nil
	s.mu.Unlock()
	s.slot.remove(s)
	if on != nil && !on.isDead() {
		on.closeSession(s.sid)
	}
	s.buf.Unref()
	return nil
}

// Run implements modelstore.EngineSession.
func (s *session) Run(ctx context.Context, inputs []*modelstore.Tensor) ([]*modelstore.Tensor, error) {
	var outs []*modelstore.Tensor
	var err error
	s.RunGroup([]modelstore.GroupRun{{Ctx: ctx, Inputs: inputs, Done: func(o []*modelstore.Tensor, e error) { outs, err = o, e }}})
	return outs, err
}

// RunGroup implements modelstore.GroupRunner: the runs travel on one lane
// together (proc.runs), in groups of at most maxGroup requests and
// maxGroupBytes.
func (s *session) RunGroup(runs []modelstore.GroupRun) {
	var p *proc
	var group []laneRun
	var owners []int // group[k] is runs[owners[k]]'s
	var bytes int
	flush := func() {
		if len(group) == 0 {
			return
		}
		p.runs(group, s, func(k int, msg []byte, fds []int, err error) {
			for _, fd := range group[k].fds {
				syscall.Close(fd)
			}
			r := runs[owners[k]]
			var outs []*modelstore.Tensor
			if err == nil {
				outs, err = s.outputsOf(msg, fds, modelstore.OutputLimit(r.Ctx))
			} else {
				closeAll(fds)
			}
			if errors.Is(err, context.Canceled) && r.Ctx.Err() != nil {
				err = r.Ctx.Err() // cancelled before it ran: as in process
			}
			r.Done(outs, err)
		})
		for _, r := range group {
			recycleRequest(r.msg)
		}
		clear(group)
		group, owners, bytes = group[:0], owners[:0], 0
	}
	for i, r := range runs {
		if err := s.check(r.Ctx, r.Inputs); err != nil {
			r.Done(nil, err)
			continue
		}
		if p == nil {
			var err error
			if p, err = s.slot.proc(); err == nil {
				err = s.ensure(p)
			}
			if err != nil {
				for _, r := range runs[i:] {
					r.Done(nil, err)
				}
				return
			}
		}
		msg, fds, err := s.request(r.Inputs)
		if err != nil {
			r.Done(nil, err)
			continue
		}
		if len(group) == maxGroup || (len(group) > 0 && bytes+len(msg) > maxGroupBytes) {
			flush()
		}
		group = append(group, laneRun{ctx: r.Ctx, msg: msg, fds: fds})
		owners = append(owners, i)
		bytes += len(msg)
	}
	flush()
}

// check refuses a run before it is sent.
func (s *session) check(ctx context.Context, inputs []*modelstore.Tensor) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if q := s.quarantined.Load(); q != nil {
		return q
	}
	if len(inputs) != len(s.inputs) {
		return fmt.Errorf("%w: expected %d inputs but got %d", modelstore.ErrInputCount, len(s.inputs), len(inputs))
	}
	if len(s.inputs) == 0 {
		return fmt.Errorf("%w: the model has no inputs", modelstore.ErrInputCount)
	}
	for _, t := range inputs {
		if t == nil {
			return errors.New("missing tensor")
		}
	}
	return nil
}

// request encodes a run of inputs (its id and poll left 0) and their payload
// (putPayload: the caller closes the descriptors once sent).
func (s *session) request(inputs []*modelstore.Tensor) ([]byte, []int, error) {
	size := headSize + 4 + 8 + payloadSize(inputs)
	e := &enc{}
	if p, _ := requestBufs.Get().(*[]byte); p != nil && cap(*p) >= size {
		e.b = (*p)[:0]
	} else {
		e.b = make([]byte, 0, size)
	}
	e.head(opRun, 0)
	e.u32(0) // poll: putPoll
	e.u64(s.sid)
	fds, err := putPayload(e, inputs)
	if err != nil {
		return nil, nil, err
	}
	return e.b, fds, nil
}

// requestBufs holds the buffers of run requests that have been sent
// (*[]byte, at most maxMessage bytes each), for the next requests to be
// built in: otherwise each request was garbage the size of its inputs
// (64 KB a run of the transformer). A buffer goes back once proc.runs is
// done with its group (RunGroup): its message was written to a lane,
// which copies it, or failed to be. The next request overwrites it from
// the start and sends only what it wrote, so an earlier run's bytes past
// that never leave the server.
var requestBufs sync.Pool

// recycleRequest gives a request's buffer to requestBufs (its box, the
// *[]byte, is the one allocation a recycled request costs).
func recycleRequest(msg []byte) {
	if cap(msg) <= maxMessage {
		msg = msg[:0]
		requestBufs.Put(&msg)
	}
}

// outputsOf decodes a run's reply (its fds are closed); outputs of more
// than max bytes (0: no bound) are refused before they are copied.
func (s *session) outputsOf(msg []byte, fds []int, max int64) ([]*modelstore.Tensor, error) {
	defer closeAll(fds)
	d := &dec{b: msg}
	if d.u8() != 0 {
		return nil, getError(d)
	}
	outs, done, err := recvTensors(d, fds, true, max)
	if err != nil {
		return nil, err
	}
	done()
	if len(outs) != len(s.outputs) {
		return nil, fmt.Errorf("engine worker returned %d outputs for %d", len(outs), len(s.outputs))
	}
	for _, t := range outs {
		if t == nil {
			continue
		}
		if err := modelstore.CheckTensor(t); err != nil {
			return nil, fmt.Errorf("%w: engine worker returned a malformed output (%s %v, %d bytes)",
				err, t.DType, t.Shape, len(t.Data))
		}
	}
	return outs, nil
}
