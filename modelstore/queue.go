package modelstore

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"sync"
	"time"
)

// RunQueue is a device's run queue, as in RedisAI (REDISAI.md 5.1):
// requests wait in arrival order and a fixed set of worker goroutines
// (THREADS_PER_QUEUE) take them, so that however many clients there are,
// at most that many model runs execute at once, each on a session that
// runs on its caller's thread. A client's goroutine waits on a channel
// meanwhile, costing no CPU; one that finds the queue empty and a slot
// free runs its request itself (runHere). A worker that takes a request
// for a batched model takes the compatible requests queued behind it too
// (batch.go).
//
// A worker that takes a request for an unbatched model whose session
// runs in another process (a GroupRunner: engine workers) takes its share
// of the requests for the same model queued behind it too, and sends them
// in one round trip (groupLocked): each stays a run of its own, with its
// own outputs and errors, but the group pays for one wake-up each way.
//
// Requests wait in one lane per owner of their models (ModelMeta.Owner:
// the user who stored the model, when users are configured), each lane in
// arrival order, and the workers take from the lanes in turn (next),
// passing over an owner who has had more than fairQuantum of run time
// beyond the least served owner waiting (lane.used), so that a user with
// more clients than workers cannot keep every slot for his backlog while
// another user's request waits: that request waits for one run to end,
// not for the backlog (red-team review: another tenant's 4 ms run waited
// 25-29 s behind a user's 12 clients running a model of 3 s); and one
// whose runs are long cannot take the workers' time from one whose runs
// are short by taking as many turns (by turns alone, a tenant's 8 ms runs
// had eight times the worker of another's 1 ms runs). A batch or a group
// is of one model, so of one lane. Without users every model has the one
// owner, and its lane is RedisAI's queue.
//
// Only the CPU device exists, so the server has one queue.
type RunQueue struct {
	mu   sync.Mutex
	cond sync.Cond // workers wait on it for work (guarded by mu)
	// lanes holds the requests waiting, one lane per owner with requests
	// waiting (and one, maybe empty, kept for the next), in turn: next
	// looks at lanes[0] first. waiting counts the requests in every lane;
	// served is the owner whose request was taken last (next, runHere).
	lanes   []*lane
	waiting int
	served  string
	want    int // workers asked for (SetWorkers)
	workers int // worker goroutines alive
	busy    int // slots running a model now (workers and callers)
	// timerAt is when the timer armed for a MINBATCHTIMEOUT wakes the
	// workers (zero: none armed).
	timerAt time.Time
	closed  bool // Close: no workers, no requests
	// quantum is how far ahead of the least used lane waiting a lane may
	// be and still take its turn (fairQuantum; tests set their own).
	quantum time.Duration
	// vtime is the least run time used of the lanes waiting, as last seen
	// (leastLocked): it only grows. idle holds what the owners whose lanes
	// emptied while ahead of it had used: such an owner's lane made again
	// starts there (laneLocked), so that emptying its lane between
	// requests, as one client waiting for each reply does, clears no debt.
	// An entry goes once vtime reaches it (tidyLocked).
	vtime time.Duration
	idle  map[string]time.Duration
}

// fairQuantum: an owner whose lane has had more than this of run time
// beyond the least served owner waiting lets the others run first
// (next). Owners within it take turns, so that runs of about the same
// time alternate as they arrive whatever their few microseconds of
// difference; an 8 ms run puts its owner 8 ms ahead, and owners of 1 ms
// runs then run about eight times before it runs again.
const fairQuantum = time.Millisecond

// lane is the requests waiting for the models of one owner, in arrival
// order. used is the run time charged to the owner: a run's expected time
// when a worker takes it, corrected by what it took when it ends
// (chargeLocked). A new lane starts level with the least used of the lanes
// waiting, or where its owner's last lane was if that is further
// (laneLocked): an owner gets no credit for the time it had nothing
// queued, and keeps its debt when its lane empties.
type lane struct {
	owner string
	jobs  []*job
	used  time.Duration
}

// job is one request in the queue.
type job struct {
	m    *Model
	req  *RunRequest
	size int64 // dimension 0 of the inputs, 0 when they cannot be batched
	// taken is set, under the queue's lock, by the worker that takes the
	// job; a waiter whose TIMEOUT passes before then removes it instead.
	taken bool
	done  chan jobResult // capacity 1: finish never blocks
}

type jobResult struct {
	outs []*Tensor
	err  error
}

func (j *job) finish(outs []*Tensor, err error) { j.done <- jobResult{outs, err} }

// NewRunQueue returns a queue served by n workers (at least 1).
func NewRunQueue(n int) *RunQueue {
	q := &RunQueue{quantum: fairQuantum}
	q.cond.L = &q.mu
	q.SetWorkers(n)
	return q
}

// SetWorkers changes the number of workers (at least 1). Extra workers
// end once they have finished the run they are doing. It does nothing
// once the queue is closed.
func (q *RunQueue) SetWorkers(n int) {
	n = max(n, 1)
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return
	}
	q.want = n
	for ; q.workers < n; q.workers++ {
		go q.work()
	}
	q.cond.Broadcast()
}

// ErrQueueClosed answers a request made of a closed queue.
var ErrQueueClosed = errors.New("the run queue is closed")

// Close ends the queue's workers, each once the run it is doing returns,
// and answers the requests waiting, and any made later, ErrQueueClosed.
// A server closes its queue when it stops; without it, the workers'
// goroutines outlive it (the fuzz tests make a server for every input).
func (q *RunQueue) Close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed, q.want = true, 0
	for _, l := range q.lanes {
		for _, j := range l.jobs {
			j.taken = true
			j.finish(nil, ErrQueueClosed)
		}
	}
	q.lanes, q.waiting = nil, 0
	q.cond.Broadcast()
}

// Workers is the number of workers asked for.
func (q *RunQueue) Workers() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.want
}

// Busy is the number of runs executing now.
func (q *RunQueue) Busy() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.busy
}

// Pending is the number of requests waiting for a worker.
func (q *RunQueue) Pending() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.waiting
}

// ErrTimedOut is returned when a run waited in the queue longer than the
// request's TIMEOUT (RedisAI replies TIMEDOUT).
var ErrTimedOut = errors.New("timed out")

// ErrCanceled is returned when a request's Cancel closed before a worker
// took it: it never runs.
var ErrCanceled = errors.New("the request was withdrawn before it ran")

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
	// MaxOutput bounds the bytes of the run's outputs (0: no bound): a run
	// whose outputs would take more fails with ErrOutputTooBig, refused
	// by an engine worker's reply before its outputs are copied into this
	// process (OutputLimit). A model whose output shape comes from an
	// input (ConstantOfShape) could otherwise put gigabytes in the server.
	MaxOutput int64
	// Cancel, when it closes, withdraws a request that no worker has
	// taken yet (ErrCanceled): its client was killed. One already running
	// is waited for, since its inputs are in use.
	Cancel <-chan struct{}
}

// outputLimitKey is the context key of WithOutputLimit.
type outputLimitKey struct{}

// WithOutputLimit makes ctx carry a run's MaxOutput to its engine (none
// when n <= 0).
func WithOutputLimit(ctx context.Context, n int64) context.Context {
	if n <= 0 {
		return ctx
	}
	return context.WithValue(ctx, outputLimitKey{}, n)
}

// OutputLimit is the MaxOutput ctx carries, 0 for none.
func OutputLimit(ctx context.Context) int64 {
	n, _ := ctx.Value(outputLimitKey{}).(int64)
	return n
}

// stringElemCost is about what one STRING element of an input costs an
// engine beyond its own bytes: ONNX Runtime's binding makes a Go string, a
// C string and a pointer to it for each, and ORT a std::string of it. A
// 40-byte AI.TENSORSET of 20,000,000 empty strings took an engine worker
// to 1.8-2.2 GB when it ran, 100 to 150 bytes an element (review).
const stringElemCost = 128

// checkStringInputs refuses STRING inputs whose elements would take an
// engine more than max bytes, what the run's outputs may take (0: no
// bound), before anything is built for them.
func checkStringInputs(inputs []*Tensor, max int64) error {
	if max <= 0 {
		return nil
	}
	for i, t := range inputs {
		if t != nil && t.DType == String && t.Len() > max/stringElemCost {
			return fmt.Errorf("%w: input %d holds %d STRING elements, about %d bytes in the engine, past the %d bytes a run may take",
				ErrUnsupportedShape, i, t.Len(), t.Len()*stringElemCost, max)
		}
	}
	return nil
}

// checkOutputs reports ErrOutputTooBig when outs take more than max bytes
// (0: no bound).
func checkOutputs(outs []*Tensor, max int64) error {
	if max <= 0 {
		return nil
	}
	var n int64
	for _, t := range outs {
		if t != nil {
			n += int64(len(t.Data))
		}
	}
	if n > max {
		return ErrOutputTooBig
	}
	return nil
}

// Run queues m's execution on req and waits for its outputs (nil entries
// for outputs that are not tensors). The caller holds no lock. A request
// whose Timeout passes before a worker takes it returns ErrTimedOut and
// never runs.
func (q *RunQueue) Run(m *Model, req *RunRequest) ([]*Tensor, error) {
	if err := checkStringInputs(req.Inputs, req.MaxOutput); err != nil {
		return nil, err
	}
	queued.Add(1)
	defer queued.Add(-1)
	if req.Queued.IsZero() {
		req.Queued = time.Now()
	}
	// The model may have been deleted since the caller fetched it: then its
	// session is closed (or closing) and it reads as missing. The reference
	// keeps the session open while the request waits.
	if !m.Blob.TryRetain() {
		return nil, ErrNoModel
	}
	defer m.Blob.Release()
	var size int64
	if m.BatchSize > 0 {
		size = batchDim(req.Inputs)
	}
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return nil, ErrQueueClosed
	}
	if q.busy < q.want && q.waiting == 0 && (size == 0 || size >= m.BatchSize) {
		return q.runHere(m, req)
	}
	j := &job{m: m, req: req, size: size, done: make(chan jobResult, 1)}
	l := q.laneLocked(m.Owner)
	l.jobs = append(l.jobs, j)
	q.waiting++
	q.cond.Signal()
	q.mu.Unlock()
	if req.Timeout <= 0 && req.Cancel == nil {
		r := <-j.done
		return r.outs, r.err
	}
	var expired <-chan time.Time
	if req.Timeout > 0 {
		t := time.NewTimer(max(req.Timeout-time.Since(req.Queued), 0))
		defer t.Stop()
		expired = t.C
	}
	giveUp := ErrTimedOut
	select {
	case r := <-j.done:
		return r.outs, r.err
	case <-expired:
	case <-req.Cancel:
		giveUp = ErrCanceled
	}
	q.mu.Lock()
	if !j.taken {
		l := q.laneLocked(m.Owner) // j's: a lane goes only once empty
		l.jobs = slices.DeleteFunc(l.jobs, func(x *job) bool { return x == j })
		q.waiting--
		q.mu.Unlock()
		return nil, giveUp
	}
	q.mu.Unlock()
	r := <-j.done // it runs: its TIMEOUT bounded the wait only
	return r.outs, r.err
}

// runHere runs m on req on the caller's goroutine, which holds q.mu and a
// free slot: a request that finds the queue empty skips the handoff to a
// worker (a wake-up, and a run on a thread whose core has gone idle and
// whose caches have gone cold, which doubles a small model's run time).
// Requests that a batched model may merge always go through the queue:
// run at once, each would be a batch of one.
func (q *RunQueue) runHere(m *Model, req *RunRequest) ([]*Tensor, error) {
	q.busy++
	q.served = m.Owner
	q.mu.Unlock()
	start := time.Now()
	outs, err := m.runSession(req.Inputs, req.ExecTimeout, req.MaxOutput)
	m.account(start, outs, err)
	q.mu.Lock()
	q.busy--
	if q.waiting > 0 {
		q.cond.Signal() // requests queued meanwhile: a worker takes them
	}
	q.mu.Unlock()
	return outs, err
}

// work is a worker: it takes the next runnable batch (or single request)
// and runs it, until SetWorkers asks for fewer workers.
func (q *RunQueue) work() {
	q.mu.Lock()
	settled := false // settleLocked ran since this worker last took work
	for {
		if q.workers > q.want {
			q.workers--
			q.mu.Unlock()
			return
		}
		if q.busy >= q.want {
			q.cond.Wait() // every slot runs a model (some on their callers)
			continue
		}
		if !settled && q.settleLocked() {
			settled = true
			continue // the queue may have changed meanwhile: look again
		}
		settled = false
		batch, gathered, at := q.next(time.Now())
		if batch == nil {
			q.armLocked(at)
			q.cond.Wait()
			continue
		}
		q.busy++
		owner, expected := batch[0].m.Owner, expectedRun(batch, gathered)
		q.chargeLocked(owner, expected)
		start := time.Now()
		q.mu.Unlock()
		switch {
		case gathered && len(batch) > 1:
			runBatch(batch)
		case len(batch) > 1:
			runGroup(batch)
		default:
			j := batch[0]
			outs, err := j.m.runSession(j.req.Inputs, j.req.ExecTimeout, j.req.MaxOutput)
			j.m.account(start, outs, err)
			j.finish(outs, err)
		}
		q.mu.Lock()
		q.chargeLocked(owner, time.Since(start)-expected)
		q.busy--
		if gathered {
			batch[0].m.batching--
		}
		if q.waiting > 0 {
			q.cond.Signal() // this worker looks too, but may be told to stop
		}
	}
}

// settleYields bounds the times a worker yields in settleLocked.
const settleYields = 4

// settleLocked lets the requests that the server has already received join
// the batch a worker is about to form. The worker is woken by the first
// request queued for an idle queue and would run at once, often before the
// connections whose commands have arrived behind it have queued theirs: a
// batch of one, then another of a few. So when the oldest request is a
// batched model's, the queue holds fewer than its BATCHSIZE and commands of
// other clients are executing (Busy), the worker yields its thread
// (runtime.Gosched) to the goroutines ready to run, and again while the
// queue grew meanwhile, up to settleYields times. It never waits on a
// clock. The oldest request is the one of the lane whose turn it is. A
// lone client's requests never yield: a yield with nothing else to
// run wakes an idle thread (the runtime's wakep), which may take the worker
// to another CPU, gone cold. Under load the batches grow: mlp at 32 clients
// with BATCHSIZE 32 went from about 8 requests a batch to about 9.5
// (docs/BENCHMARKS.md). It reports whether it yielded; q.mu is held, and
// released while it yields.
func (q *RunQueue) settleLocked() bool {
	yielded := false
	for range settleYields {
		if q.waiting == 0 {
			break
		}
		l := q.lanes[0]
		if len(l.jobs) == 0 {
			break
		}
		j := l.jobs[0]
		if j.alone() || int64(len(l.jobs)) >= j.m.BatchSize || !Busy() || q.heldBackLocked(j.m) {
			break
		}
		n := q.waiting
		q.mu.Unlock()
		runtime.Gosched()
		q.mu.Lock()
		yielded = true
		if q.waiting <= n {
			break // nothing came in while the others ran
		}
	}
	return yielded
}

// next removes and returns the first runnable work in the queue, taking
// the lanes in turn: the oldest runnable request of the first lane that
// has one, passing over a lane that has had more than a quantum of run
// time beyond the least used lane waiting (lane.used, fairQuantum) while
// another has work to run; that lane then goes last in the turn. It runs
// alone, or with the compatible requests behind it in its lane when its
// model is batched (gathered), or with its share of the requests for its
// model when they go to its session in one round trip (groupLocked). A batched model has
// one batch running at a time while at least half the slots are busy
// (spareLocked): its requests wait in the
// queue meanwhile, to form the next batch with the ones that arrive during
// the run (otherwise idle workers would take them one by one as they come,
// and nothing would ever be batched). With more than half the slots free,
// as on a machine of many cores serving few clients, a free worker starts
// another batch of the model at once: waiting for the running one would
// leave cores idle while requests wait (on 16 cores at 8 clients, one batch
// at a time ran the batched loop at 0.6x the unbatched one,
// docs/BENCHMARKS.md). With one or two workers (a 2-CPU machine) a running
// batch always holds half the slots, so nothing changes there. A batch
// short of MINBATCHSIZE is passed over (its requests wait, the ones
// behind are served). With nothing runnable it returns nil
// and the earliest time a waiting batch's MINBATCHTIMEOUT passes (zero if
// none). gathered tells a batched model's batch (which the caller marks
// done) from requests run one by one. Requests whose TIMEOUT has passed are
// answered TIMEDOUT without running, as RedisAI's workers do when they
// pick one up.
func (q *RunQueue) next(now time.Time) (batch []*job, gathered bool, at time.Time) {
	if len(q.lanes) > 1 {
		q.tidyLocked()
	}
	var wake time.Time
	take := func(l *lane) (batch []*job, gathered bool) {
		batch, gathered, at := q.nextIn(l, now)
		if batch != nil {
			q.served = l.owner
			if i := slices.Index(q.lanes, l); len(q.lanes) > 1 { // l goes last in the turn
				copy(q.lanes[i:], q.lanes[i+1:])
				q.lanes[len(q.lanes)-1] = l
			}
		} else if !at.IsZero() && (wake.IsZero() || at.Before(wake)) {
			wake = at
		}
		return batch, gathered
	}
	// A lane more than a quantum ahead of the least used one waiting is
	// passed over, and looked at only if no other has work to run.
	least := q.leastLocked()
	var ahead []*lane
	for _, l := range q.lanes {
		if l.used > least+q.quantum {
			ahead = append(ahead, l)
			continue
		}
		if batch, gathered := take(l); batch != nil {
			return batch, gathered, time.Time{}
		}
	}
	for _, l := range ahead {
		if batch, gathered := take(l); batch != nil {
			return batch, gathered, time.Time{}
		}
	}
	return nil, false, wake
}

// nextIn is next within lane l.
func (q *RunQueue) nextIn(l *lane, now time.Time) (batch []*job, gathered bool, at time.Time) {
	var wake time.Time
	var waiting []*Model // batched models whose batch is short this time
	busy := Busy()
	for i := 0; i < len(l.jobs); i++ {
		j := l.jobs[i]
		if j.expired(now) {
			l.jobs = slices.Delete(l.jobs, i, i+1)
			q.waiting--
			i--
			j.taken = true
			j.finish(nil, ErrTimedOut)
			continue
		}
		if j.alone() {
			l.jobs = slices.Delete(l.jobs, i, i+1)
			q.waiting--
			j.taken = true
			return q.groupLocked(l, j, now), false, time.Time{}
		}
		if q.heldBackLocked(j.m) || slices.Contains(waiting, j.m) {
			continue
		}
		batch, ready, at := gather(l.jobs, i, now, busy)
		if !ready {
			waiting = append(waiting, j.m)
			if !at.IsZero() && (wake.IsZero() || at.Before(wake)) {
				wake = at
			}
			continue
		}
		for _, b := range batch {
			b.taken = true
		}
		j.m.batching++
		l.jobs = slices.DeleteFunc(l.jobs, func(x *job) bool { return x.taken })
		q.waiting -= len(batch)
		return batch, true, time.Time{}
	}
	return nil, false, wake
}

// laneLocked is owner's lane. A new one goes last in the turn, but before
// the lane of the owner served last: the owners already waiting go first,
// and then the new one, before the one just served has another turn; it
// starts level with the least used of the lanes waiting, or with what its
// owner had used (idle) if more. The only lane, when empty, is reused (a
// server without users makes it once). q.mu is held.
func (q *RunQueue) laneLocked(owner string) *lane {
	for _, l := range q.lanes {
		if l.owner == owner {
			return l
		}
	}
	start := max(q.leastLocked(), q.idle[owner])
	delete(q.idle, owner)
	if len(q.lanes) == 1 && len(q.lanes[0].jobs) == 0 {
		q.idleLocked(q.lanes[0])
		q.lanes[0].owner, q.lanes[0].used = owner, start
		return q.lanes[0]
	}
	l := &lane{owner: owner, used: start}
	if n := len(q.lanes); n > 0 && q.lanes[n-1].owner == q.served {
		q.lanes = slices.Insert(q.lanes, n-1, l)
	} else {
		q.lanes = append(q.lanes, l)
	}
	return l
}

// chargeLocked adds d (which may be negative: a correction) to what
// owner has used: to its lane's, or, when its lane has gone, to its entry
// in idle (which starts at vtime). q.mu is held.
func (q *RunQueue) chargeLocked(owner string, d time.Duration) {
	for _, l := range q.lanes {
		if l.owner == owner {
			l.used = max(l.used+d, 0)
			return
		}
	}
	q.idleLocked(&lane{owner: owner, used: max(q.idle[owner], q.vtime) + d})
}

// leastLocked is the least run time used of the lanes waiting, and vtime
// when none waits; vtime follows it. q.mu is held.
func (q *RunQueue) leastLocked() time.Duration {
	least := time.Duration(-1)
	for _, l := range q.lanes {
		if len(l.jobs) > 0 && (least < 0 || l.used < least) {
			least = l.used
		}
	}
	q.vtime = max(q.vtime, least)
	return q.vtime
}

// idleLocked keeps what l's owner has used once l goes, if it is ahead
// of vtime (idle), and forgets it otherwise. q.mu is held.
func (q *RunQueue) idleLocked(l *lane) {
	if l.used <= q.vtime {
		delete(q.idle, l.owner)
		return
	}
	if q.idle == nil {
		q.idle = make(map[string]time.Duration)
	}
	q.idle[l.owner] = l.used
}

// expectedRun is how long the work a worker took is expected to run: its
// model's mean run for a single request or a batch, that times the
// requests of a group (0 before the model's first run).
func expectedRun(batch []*job, gathered bool) time.Duration {
	mean, _ := batch[0].m.meanRun()
	if gathered {
		return mean
	}
	return mean * time.Duration(len(batch))
}

// tidyLocked drops the empty lanes, but one when all are, so that the
// lanes are those of the owners with requests waiting (with JWT users,
// owners come and go); what their owners had used is kept in idle while
// ahead of vtime. q.mu is held.
func (q *RunQueue) tidyLocked() {
	keep := q.lanes[0]
	q.lanes = slices.DeleteFunc(q.lanes, func(l *lane) bool {
		if len(l.jobs) > 0 {
			return false
		}
		q.idleLocked(l)
		return true
	})
	if len(q.lanes) == 0 {
		delete(q.idle, keep.owner) // kept in its lane
		q.lanes = append(q.lanes, keep)
	}
	v := q.leastLocked()
	maps.DeleteFunc(q.idle, func(_ string, used time.Duration) bool { return used <= v })
}

// heldBackLocked reports whether m's requests wait for its running batch
// to end before forming the next (next). q.mu is held.
func (q *RunQueue) heldBackLocked(m *Model) bool { return m.batching > 0 && !q.spareLocked() }

// spareLocked reports whether more than half the slots are free, so that
// a batched model may run another batch beside the one it is running
// (next). q.mu is held.
func (q *RunQueue) spareLocked() bool { return 2*q.busy < q.want }

// armLocked makes sure the workers are woken at `at` (if not zero), when
// a short batch's MINBATCHTIMEOUT passes.
func (q *RunQueue) armLocked(at time.Time) {
	if at.IsZero() || (!q.timerAt.IsZero() && !at.Before(q.timerAt)) {
		return
	}
	q.timerAt = at
	time.AfterFunc(time.Until(at), func() {
		q.mu.Lock()
		if q.timerAt.Equal(at) {
			q.timerAt = time.Time{}
		}
		q.cond.Broadcast()
		q.mu.Unlock()
	})
}

// maxGroupRuns bounds the requests a worker takes for one round trip
// (groupLocked). A request's wait grows by the runs ahead of it in its
// group, as it would in the queue.
const maxGroupRuns = 8

// groupMaxRun: the requests of a model whose runs take longer than this
// on average are not grouped. A group saves two wake-ups per run (100 to
// 200 µs on the 2-vCPU machine of docs/BENCHMARKS.md), which a long run
// does not notice, while a group's runs execute one after another on one
// lane: a transformer's (6 ms) grouped left a core idle at 8 clients.
const groupMaxRun = time.Millisecond

// groupLocked returns j alone, or, when j's model is unbatched, its runs
// short (groupMaxRun) and its session a GroupRunner, j with the requests
// for the same model queued behind it in its lane l: a share of them, so
// that the other queue workers take the rest (with n such requests and w
// workers, this one is given about n/w; none when the queue holds no
// other). Requests whose TIMEOUT has passed are left for next to answer.
// q.mu is held.
func (q *RunQueue) groupLocked(l *lane, j *job, now time.Time) []*job {
	if _, ok := j.m.Blob.Session.(GroupRunner); !ok || j.m.BatchSize > 0 {
		return []*job{j}
	}
	if mean, ok := j.m.meanRun(); !ok || mean > groupMaxRun {
		return []*job{j}
	}
	n := 0
	for _, x := range l.jobs {
		if x.m == j.m && !x.expired(now) {
			n++
		}
	}
	take := min(maxGroupRuns, (n+q.want)/q.want) - 1 // ceil((n+1)/want), j included
	group := []*job{j}
	for _, x := range l.jobs {
		if len(group) > take {
			break
		}
		if x.m == j.m && !x.expired(now) {
			x.taken = true
			group = append(group, x)
		}
	}
	if len(group) > 1 {
		l.jobs = slices.DeleteFunc(l.jobs, func(x *job) bool { return x.taken })
		q.waiting -= len(group) - 1
	}
	return group
}

// alone tells a request that runs by itself: its model is unbatched, its
// inputs cannot be batched, or it fills a batch on its own.
func (j *job) alone() bool { return j.size == 0 || j.size >= j.m.BatchSize }

// expired tells a request whose TIMEOUT passed while it waited.
func (j *job) expired(now time.Time) bool {
	return j.req.Timeout > 0 && now.Sub(j.req.Queued) > j.req.Timeout
}

// runGroup runs requests for one model in one round trip (the worker holds
// no lock); each is answered as its outputs arrive.
func runGroup(group []*job) {
	m := group[0].m
	runs := make([]GroupRun, len(group))
	clocks := make([]*RunContext, len(group))
	start := time.Now()
	for i, j := range group {
		// The worker runs them in turn: each one's MODEL_EXECUTION_TIMEOUT
		// counts from when the one before it is answered.
		newContext := execContext
		if i > 0 {
			newContext = waitingExecContext
		}
		ctx, rc := newContext(j.req.ExecTimeout)
		clocks[i] = rc
		runs[i] = GroupRun{Ctx: WithOutputLimit(ctx, j.req.MaxOutput), Inputs: j.req.Inputs, Done: func(outs []*Tensor, err error) {
			rc.Release()
			if i+1 < len(clocks) {
				clocks[i+1].Start()
			}
			if err == nil {
				if err = checkOutputs(outs, j.req.MaxOutput); err != nil {
					outs = nil
				}
			}
			m.account(start, outs, err) // a run's time: since the one before it ended
			start = time.Now()
			j.finish(outs, err)
		}}
	}
	m.Blob.Session.(GroupRunner).RunGroup(runs)
}
