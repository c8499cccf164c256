package modelstore

import (
	"context"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// The kill switch of runs whose context ends (MODEL_EXECUTION_TIMEOUT's
// deadline, or a cancellation): like RedisAI's, which sets ORT's terminate
// flag from Redis's cron tick, one watchdog goroutine looks at the runs in
// flight every watchTick, and only while there are some. Per run this costs
// an entry in a list, where a callback registered on each run's context
// (context.AfterFunc) cost half a dozen allocations and a lock of the
// context's own. Both engines stop their runs through it: the in-process
// one sets ORT's terminate flag (onnx.go), the engine workers' client asks
// the worker to stop the run (package worker).

// watchTick is how often the watchdog looks: a run is stopped at most this
// long after its context ends.
const watchTick = 5 * time.Millisecond

// Stopper stops a run the watchdog found overdue. Stop is called at most
// once per Watch, on the watchdog's goroutine with its lock held: it must
// not block nor take a lock (docs/LOCKS.md).
type Stopper interface{ Stop() }

// Watched is a run's entry in the watchdog: the caller keeps it (in a
// struct of its own, so that watching allocates nothing) between Watch and
// Unwatch.
type Watched struct {
	ctx     context.Context // the run's; nil while not watched
	s       Stopper
	stopped bool // the watchdog called s.Stop
	idx     int  // position in watchdog.runs while watched
}

var watchdog struct {
	mu      sync.Mutex
	runs    []*Watched
	running bool // the goroutine is alive
}

// Watchable reports whether ctx can end (it has a deadline or a Done
// channel), so that a run it bounds needs watching. It does not make a
// RunContext's Done channel.
func Watchable(ctx context.Context) bool {
	_, ok := ctx.Deadline()
	return ok || ctx.Done() != nil
}

// Watch makes the watchdog call s.Stop once ctx ends (Watchable). w must
// be given to Unwatch once the run is over.
func Watch(w *Watched, ctx context.Context, s Stopper) {
	watchdog.mu.Lock()
	defer watchdog.mu.Unlock()
	*w = Watched{ctx: ctx, s: s, idx: len(watchdog.runs)}
	watchdog.runs = append(watchdog.runs, w)
	if !watchdog.running {
		watchdog.running = true
		go watchLoop()
	}
}

// Unwatch removes w; once it returns, the watchdog no longer calls its
// Stop. It reports whether Stop was called.
func Unwatch(w *Watched) bool {
	watchdog.mu.Lock()
	defer watchdog.mu.Unlock()
	last := len(watchdog.runs) - 1
	moved := watchdog.runs[last]
	watchdog.runs[w.idx], moved.idx = moved, w.idx
	watchdog.runs[last] = nil
	watchdog.runs = watchdog.runs[:last]
	w.ctx, w.s = nil, nil
	return w.stopped
}

func watchLoop() {
	for {
		time.Sleep(watchTick)
		watchdog.mu.Lock()
		if len(watchdog.runs) == 0 {
			watchdog.running = false
			watchdog.mu.Unlock()
			return
		}
		for _, w := range watchdog.runs {
			if !w.stopped && w.ctx.Err() != nil {
				w.s.Stop()
				w.stopped = true
			}
		}
		watchdog.mu.Unlock()
	}
}

// RunContext is the context of a run bounded by MODEL_EXECUTION_TIMEOUT:
// it ends at its deadline with no timer of its own, since the watchdog
// polls its Err (context.WithTimeout's timer, and the context.AfterFunc a
// worker's client hung on it, were 9 of the server's 44 allocations for an
// AI.MODELEXECUTE, issue 9). Done, for any other reader, makes a channel
// and a timer on first use; Release ends the context (context.Canceled)
// and stops that timer. The first error Err returns is the one it keeps.
type RunContext struct {
	// at is the deadline, in nanoseconds of the monotonic clock since
	// clockBase; notStarted until Start for one made by waitingExecContext.
	at      atomic.Int64
	timeout time.Duration
	state   atomic.Int32 // ctxLive, ctxCanceled or ctxExpired
	mu      sync.Mutex   // guards done, closed and timer (a leaf lock)
	done    chan struct{}
	// closed: done is closed; timer closes it at the deadline.
	closed bool
	timer  *time.Timer
}

const (
	ctxLive int32 = iota
	ctxCanceled
	ctxExpired
)

// clockBase is the origin of RunContext's deadlines, which keep the
// monotonic clock's reading this way.
var clockBase = time.Now()

// notStarted is the deadline of a RunContext whose clock has not started.
const notStarted = math.MaxInt64

// NewRunContext returns a context that ends timeout from now.
func NewRunContext(timeout time.Duration) *RunContext {
	c := &RunContext{timeout: timeout}
	c.at.Store(int64(time.Since(clockBase) + timeout))
	return c
}

// waitingExecContext is execContext for a run that waits behind others
// sent with it to an engine worker (runGroup): its clock starts when Start
// says that its turn came, as RedisAI's starts when its run does. Started
// at once, the runs at the back of a group spent their time waiting, and
// one whose time ran out before it started was answered an internal error
// (models review).
func waitingExecContext(t time.Duration) (context.Context, *RunContext) {
	if t <= 0 {
		return context.Background(), nil
	}
	c := &RunContext{timeout: t}
	c.at.Store(notStarted)
	return c, c
}

// Start starts the clock of a context made by waitingExecContext: it ends
// its timeout from now. It does nothing to one that runs already, or nil.
func (c *RunContext) Start() {
	if c == nil || !c.at.CompareAndSwap(notStarted, int64(time.Since(clockBase)+c.timeout)) {
		return
	}
	c.mu.Lock()
	if c.timer != nil {
		c.timer.Reset(c.timeout)
	}
	c.mu.Unlock()
}

// execContext is the context of a run under MODEL_EXECUTION_TIMEOUT t,
// and the RunContext to Release once the run is over: nil, and
// context.Background, when t is 0 (no limit).
func execContext(t time.Duration) (context.Context, *RunContext) {
	if t <= 0 {
		return context.Background(), nil
	}
	rc := NewRunContext(t)
	return rc, rc
}

// Deadline implements context.Context.
func (c *RunContext) Deadline() (time.Time, bool) {
	return clockBase.Add(time.Duration(c.at.Load())), true
}

// Value implements context.Context: a RunContext carries no values.
func (c *RunContext) Value(any) any { return nil }

// Err implements context.Context by reading the clock.
func (c *RunContext) Err() error {
	if c.state.Load() == ctxLive {
		if int64(time.Since(clockBase)) < c.at.Load() {
			return nil
		}
		c.end(ctxExpired)
	}
	if c.state.Load() == ctxCanceled {
		return context.Canceled
	}
	return context.DeadlineExceeded
}

// Done implements context.Context; the first call makes the channel, and
// a timer to close it at the deadline.
func (c *RunContext) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done == nil {
		c.done = make(chan struct{})
		if c.state.Load() != ctxLive {
			close(c.done)
			c.closed = true
		} else {
			left := time.Duration(c.at.Load()) - time.Since(clockBase) // notStarted: centuries
			c.timer = time.AfterFunc(left, func() { c.end(ctxExpired) })
		}
	}
	return c.done
}

// Release ends the context if it has not ended (context.Canceled): the
// run it bounds is over. A nil RunContext's does nothing (execContext).
func (c *RunContext) Release() {
	if c != nil {
		c.end(ctxCanceled)
	}
}

// end moves the context from live to state s (once), closing Done if it
// was made.
func (c *RunContext) end(s int32) {
	if !c.state.CompareAndSwap(ctxLive, s) {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done != nil && !c.closed {
		close(c.done)
		c.closed = true
	}
	if c.timer != nil {
		c.timer.Stop()
	}
}
