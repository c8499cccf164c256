//go:build cgo && !noort

package modelstore

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"
)

// queueModel stores a testdata model as a Model with the given batching.
func queueModel(t testing.TB, name string, meta ModelMeta) *Model {
	t.Helper()
	requireRuntime(t)
	b, err := NewRegistry(nil).AcquireIfRoom(readModel(t, name), Origin{}, SessionOptions{Optimize: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	m := NewModel(meta, b)
	t.Cleanup(m.Release)
	return m
}

// slowRun is a run of slow.onnx (seconds long) that the kill switch ends
// after d: it keeps one worker busy for about d.
func slowRun(q *RunQueue, m *Model, d time.Duration) error {
	_, err := q.Run(m, &RunRequest{Inputs: []*Tensor{floats([]int64{1, 1}, 0.5)}, ExecTimeout: d})
	return err
}

// waitFor polls cond (never sleeps for a fixed time to be ready).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// However many requests arrive at once, no more runs execute together than
// the queue has workers; the others wait in the queue, and SetWorkers
// changes the bound.
func TestRunQueueBoundsConcurrentRuns(t *testing.T) {
	slow := queueModel(t, "slow.onnx", ModelMeta{})
	q := NewRunQueue(2)
	t.Cleanup(q.Close)
	maxBusy := 0
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			select {
			case <-stop:
				return
			default:
			}
			maxBusy = max(maxBusy, q.Busy())
			time.Sleep(200 * time.Microsecond)
		}
	}()
	var wg sync.WaitGroup
	errs := make([]error, 6)
	for i := range errs {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = slowRun(q, slow, 150*time.Millisecond) }()
	}
	waitFor(t, "2 runs execute and 4 wait", func() bool { return q.Busy() == 2 && q.Pending() == 4 })
	wg.Wait()
	close(stop)
	<-sampled
	if maxBusy != 2 {
		t.Errorf("at most %d runs at once with 2 workers, want 2", maxBusy)
	}
	for _, err := range errs {
		wantORTError(t, err, "terminate flag")
	}
	if c := slow.Stats.Calls.Load(); c != 6 {
		t.Errorf("%d calls, want 6", c)
	}

	q.SetWorkers(3)
	for i := range 3 {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = slowRun(q, slow, 300*time.Millisecond) }()
	}
	waitFor(t, "3 runs execute with 3 workers", func() bool { return q.Busy() == 3 })
	wg.Wait()
	if q.Workers() != 3 {
		t.Errorf("Workers() = %d, want 3", q.Workers())
	}
}

// Requests of different batch sizes from different clients, queued while
// the only worker is busy, run as one batch when it is free, and each gets
// its own rows back: the same outputs as running alone.
func TestRunQueueBatchesMergeAndSplit(t *testing.T) {
	slow := queueModel(t, "slow.onnx", ModelMeta{})
	lin := queueModel(t, "linear.onnx", ModelMeta{BatchSize: 8})
	plain := queueModel(t, "linear.onnx", ModelMeta{})
	q := NewRunQueue(1)
	busy := make(chan error, 1)
	go func() { busy <- slowRun(q, slow, 200*time.Millisecond) }()
	waitFor(t, "the worker is busy", func() bool { return q.Busy() == 1 })

	sizes := []int{1, 3, 2, 2} // 8 rows: one batch
	inputs := make([]*Tensor, len(sizes))
	for i, n := range sizes {
		x := make([]float32, 4*n)
		for k := range x {
			x[k] = float32(10*i + k)
		}
		inputs[i] = floats([]int64{int64(n), 4}, x...)
	}
	outs := make([][]*Tensor, len(sizes))
	errs := make([]error, len(sizes))
	var wg sync.WaitGroup
	for i := range sizes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			outs[i], errs[i] = q.Run(lin, &RunRequest{Inputs: []*Tensor{inputs[i]}})
		}()
		// In order, so that the batch's rows are in a known order.
		waitFor(t, "the request is queued", func() bool { return q.Pending() == i+1 })
	}
	wg.Wait()
	<-busy
	for i, n := range sizes {
		if errs[i] != nil {
			t.Fatalf("request %d: %v", i, errs[i])
		}
		alone, err := q.Run(plain, &RunRequest{Inputs: []*Tensor{inputs[i]}})
		if err != nil {
			t.Fatal(err)
		}
		got := outs[i][0]
		if got.Shape[0] != int64(n) || got.Shape[1] != 3 {
			t.Errorf("request %d: shape %v, want [%d 3]", i, got.Shape, n)
		}
		if string(got.Data) != string(alone[0].Data) {
			t.Errorf("request %d: batched output %v differs from the output alone %v", i, tensorFloats(got), tensorFloats(alone[0]))
		}
	}
	// They were one run: their outputs are consecutive rows of one buffer.
	for i := 1; i < len(sizes); i++ {
		prev, cur := outs[i-1][0].Data, outs[i][0].Data
		if unsafe.Add(unsafe.Pointer(unsafe.SliceData(prev)), len(prev)) != unsafe.Pointer(unsafe.SliceData(cur)) {
			t.Errorf("request %d's output does not follow request %d's in one batch output", i, i-1)
		}
	}
	// Each request counts one call and its own rows (RedisAI's stats).
	if c, s := lin.Stats.Calls.Load(), lin.Stats.Samples.Load(); c != 4 || s != 8 {
		t.Errorf("calls %d samples %d, want 4 and 8", c, s)
	}
}

// gatedSession holds each run until open is closed, and counts the runs
// it holds at once.
type gatedSession struct {
	EngineSession
	open    chan struct{}
	mu      sync.Mutex
	running int
	most    int
}

func (g *gatedSession) Run(ctx context.Context, in []*Tensor) ([]*Tensor, error) {
	g.mu.Lock()
	g.running++
	g.most = max(g.most, g.running)
	g.mu.Unlock()
	<-g.open
	defer func() { g.mu.Lock(); g.running--; g.mu.Unlock() }()
	return g.EngineSession.Run(ctx, in)
}

func (g *gatedSession) held() int { g.mu.Lock(); defer g.mu.Unlock(); return g.running }

// A batched model runs one batch at a time while at least half the queue's
// workers are busy, so that requests arriving meanwhile form the next
// batch; with more than half of them free (many cores, few clients), a
// free worker starts another batch of it rather than leave the requests
// waiting beside idle workers.
func TestRunQueueBatchesInFlight(t *testing.T) {
	for _, tc := range []struct {
		workers, want int
	}{{2, 1}, {4, 2}, {8, 4}} {
		t.Run(fmt.Sprintf("%d workers", tc.workers), func(t *testing.T) {
			lin := queueModel(t, "linear.onnx", ModelMeta{BatchSize: 8})
			g := &gatedSession{EngineSession: lin.Blob.Session, open: make(chan struct{})}
			lin.Blob.Session = g
			q := NewRunQueue(tc.workers)
			t.Cleanup(q.Close)
			const n = 6
			errs := make([]error, n)
			var wg sync.WaitGroup
			for i := range n {
				wg.Go(func() {
					_, errs[i] = q.Run(lin, &RunRequest{Inputs: []*Tensor{floats([]int64{1, 4}, float32(i), 1, 2, 3)}})
				})
				// One at a time: each finds the batches before it running.
				waitFor(t, "the request runs or waits", func() bool { return g.held()+q.Pending() == i+1 })
			}
			if got := g.held(); got != tc.want {
				t.Errorf("%d batches running at once, want %d", got, tc.want)
			}
			if got := q.Pending(); got != n-tc.want {
				t.Errorf("%d requests waiting, want %d", got, n-tc.want)
			}
			close(g.open)
			wg.Wait()
			for i, err := range errs {
				if err != nil {
					t.Errorf("request %d: %v", i, err)
				}
			}
			if g.most != tc.want {
				t.Errorf("at most %d batches at once, want %d", g.most, tc.want)
			}
			if c := lin.Stats.Calls.Load(); c != n {
				t.Errorf("%d calls, want %d", c, n)
			}
		})
	}
}

// groupRecorder is a session that says it runs in another process
// (GroupRunner): it records the groups the queue hands it and runs each
// request on its own.
type groupRecorder struct {
	EngineSession
	mu     sync.Mutex
	groups []int
}

func (g *groupRecorder) RunGroup(runs []GroupRun) {
	g.mu.Lock()
	g.groups = append(g.groups, len(runs))
	g.mu.Unlock()
	for _, r := range runs {
		r.Done(g.Run(r.Ctx, r.Inputs))
	}
}

// slowGroup is a GroupRunner whose runs take 80 ms each, in turn, as an
// engine worker runs a group's: a run whose context has ended by the time
// it is over was stopped by the kill switch.
type slowGroup struct {
	EngineSession
	groups []int
}

func (g *slowGroup) RunGroup(runs []GroupRun) {
	g.groups = append(g.groups, len(runs))
	for _, r := range runs {
		time.Sleep(80 * time.Millisecond)
		if err := r.Ctx.Err(); err != nil {
			r.Done(nil, err)
			continue
		}
		r.Done(g.Run(r.Ctx, r.Inputs))
	}
}

// MODEL_EXECUTION_TIMEOUT bounds each run of a group from when its turn
// comes, as RedisAI's bounds a run from its start: four runs of 80 ms
// under a 150 ms limit all succeed. When every clock started with the
// group, the third and fourth ran out waiting (models review: a run
// stopped by the terminate flag, another answered an internal error).
func TestRunQueueGroupRunClockStartsAtItsTurn(t *testing.T) {
	slow := queueModel(t, "slow.onnx", ModelMeta{})
	lin := queueModel(t, "linear.onnx", ModelMeta{})
	g := &slowGroup{EngineSession: lin.Blob.Session}
	lin.Blob.Session = g
	q := NewRunQueue(1)
	if _, err := q.Run(lin, &RunRequest{Inputs: []*Tensor{floats([]int64{1, 4}, 1, 2, 3, 4)}}); err != nil {
		t.Fatal(err)
	}
	lin.Stats.Duration.Store(0) // its runs count as short: they are grouped
	g.groups = nil
	busy := make(chan error, 1)
	go func() { busy <- slowRun(q, slow, 200*time.Millisecond) }()
	waitFor(t, "the worker is busy", func() bool { return q.Busy() == 1 })
	errs := make([]error, 4)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = q.Run(lin, &RunRequest{Inputs: []*Tensor{floats([]int64{1, 4}, 1, 2, 3, 4)}, ExecTimeout: 150 * time.Millisecond})
		}()
	}
	waitFor(t, "4 requests are queued", func() bool { return q.Pending() == len(errs) })
	wg.Wait()
	<-busy
	if fmt.Sprint(g.groups) != "[4]" {
		t.Errorf("groups %v, want one of 4", g.groups)
	}
	for i, err := range errs {
		if err != nil {
			t.Errorf("run %d of the group: %v", i, err)
		}
	}
}

// Requests for an unbatched model whose session is a GroupRunner, queued
// together, go to it in one group (a share of them per free worker); each
// keeps its own outputs, errors and statistics.
func TestRunQueueGroupsRuns(t *testing.T) {
	lin := queueModel(t, "linear.onnx", ModelMeta{})
	gate := queueModel(t, "linear.onnx", ModelMeta{})
	g := &gatedSession{EngineSession: gate.Blob.Session}
	gate.Blob.Session = g
	rec := &groupRecorder{EngineSession: lin.Blob.Session}
	lin.Blob.Session = rec
	q := NewRunQueue(1)
	// A first run tells the queue that the model's runs are short. Its time
	// is zeroed: a first run can take over groupMaxRun on a loaded machine
	// (CI ran the packages' tests at once), and then the first request
	// queued below went alone and the other five as a group.
	if _, err := q.Run(lin, &RunRequest{Inputs: []*Tensor{floats([]int64{1, 4}, 1, 2, 3, 4)}}); err != nil {
		t.Fatal(err)
	}
	lin.Stats.Duration.Store(0)
	// hold keeps the queue's one slot with a run until release: the
	// requests queue behind it however loaded the machine is (a slow
	// model's run of 1 s ended before 3 requests had queued, under make
	// test's race target).
	hold := func() (release func()) {
		g.open = make(chan struct{})
		done := make(chan error, 1)
		go func() {
			_, err := q.Run(gate, &RunRequest{Inputs: []*Tensor{floats([]int64{1, 4}, 1, 2, 3, 4)}})
			done <- err
		}()
		waitFor(t, "the slot is held", func() bool { return q.Busy() == 1 && g.held() == 1 })
		return func() {
			close(g.open)
			if err := <-done; err != nil {
				t.Error(err)
			}
		}
	}
	release := hold()

	const n = 6
	reqs := make([]*RunRequest, n)
	for i := range reqs {
		in := floats([]int64{1, 4}, float32(i), 1, 2, 3)
		if i == 2 {
			in = floats([]int64{1, 5}, 1, 1, 1, 1, 1) // refused by the model
		}
		reqs[i] = &RunRequest{Inputs: []*Tensor{in}}
	}
	outs := make([][]*Tensor, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range reqs {
		wg.Add(1)
		go func() { defer wg.Done(); outs[i], errs[i] = q.Run(lin, reqs[i]) }()
		waitFor(t, "the request is queued", func() bool { return q.Pending() == i+1 })
	}
	release()
	wg.Wait()
	if fmt.Sprint(rec.groups) != "[6]" {
		t.Errorf("groups %v, want one of the 6 queued", rec.groups)
	}
	for i, r := range reqs {
		switch i {
		case 2:
			if errs[i] == nil {
				t.Errorf("request 2: no error for the wrong shape")
			}
		default:
			alone, err := rec.EngineSession.Run(context.Background(), r.Inputs)
			if errs[i] != nil || err != nil || string(outs[i][0].Data) != string(alone[0].Data) {
				t.Errorf("request %d: %v %v, or its output differs from its run alone", i, errs[i], err)
			}
		}
	}
	if c, e := lin.Stats.Calls.Load(), lin.Stats.Errors.Load(); c != 7 || e != 1 {
		t.Errorf("calls %d errors %d, want 7 and 1", c, e)
	}

	// A group holds at most maxGroupRuns: 20 queued go as 8, 8 and 4.
	rec.groups = nil
	lin.Stats.Duration.Store(0)
	release = hold()
	errs = make([]error, 20)
	for i := range errs {
		wg.Add(1)
		go func() { defer wg.Done(); _, errs[i] = q.Run(lin, &RunRequest{Inputs: reqs[0].Inputs}) }()
	}
	waitFor(t, "20 requests are queued", func() bool { return q.Pending() == len(errs) })
	release()
	wg.Wait()
	if fmt.Sprint(rec.groups) != "[8 8 4]" {
		t.Errorf("groups %v, want [8 8 4]", rec.groups)
	}
	for i, err := range errs {
		if err != nil {
			t.Errorf("request %d: %v", i, err)
		}
	}

	// Long runs are not grouped: each keeps a queue worker of its own.
	rec.groups = nil
	lin.Stats.Duration.Add(int64(time.Hour / time.Microsecond))
	release = hold()
	for i := range 3 {
		wg.Add(1)
		go func() { defer wg.Done(); _, errs[i] = q.Run(lin, &RunRequest{Inputs: reqs[0].Inputs}) }()
	}
	waitFor(t, "3 requests are queued", func() bool { return q.Pending() == 3 })
	release()
	wg.Wait()
	if len(rec.groups) != 0 {
		t.Errorf("groups %v for a model whose runs are long", rec.groups)
	}
}

// A batch stops once it reaches BATCHSIZE (the request that reaches it
// may overshoot, as in RedisAI), and the rest form the next batch.
func TestRunQueueBatchLimits(t *testing.T) {
	slow := queueModel(t, "slow.onnx", ModelMeta{})
	lin := queueModel(t, "linear.onnx", ModelMeta{BatchSize: 3})
	q := NewRunQueue(1)
	busy := make(chan error, 1)
	go func() { busy <- slowRun(q, slow, 200*time.Millisecond) }()
	waitFor(t, "the worker is busy", func() bool { return q.Busy() == 1 })
	sizes := []int{2, 2, 1, 4}
	outs := make([][]*Tensor, len(sizes))
	errs := make([]error, len(sizes))
	var wg sync.WaitGroup
	for i, n := range sizes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			outs[i], errs[i] = q.Run(lin, &RunRequest{Inputs: []*Tensor{floats([]int64{int64(n), 4}, make([]float32, 4*n)...)}})
		}()
		waitFor(t, "the request is queued", func() bool { return q.Pending() == i+1 })
	}
	wg.Wait()
	<-busy
	for i, n := range sizes {
		if errs[i] != nil || outs[i][0].Shape[0] != int64(n) {
			t.Fatalf("request %d: %v %v", i, errs[i], outs[i])
		}
	}
	// 2+2 (overshooting 3), then 1+4: each request counts one call and
	// its own rows.
	if c, s := lin.Stats.Calls.Load(), lin.Stats.Samples.Load(); c != 4 || s != 9 {
		t.Errorf("calls %d samples %d, want 4 and 9", c, s)
	}
}

// A request short of MINBATCHSIZE waits for others until MINBATCHTIMEOUT,
// then runs alone; requests for other models are served meanwhile.
func TestRunQueueMinBatch(t *testing.T) {
	lin := queueModel(t, "linear.onnx", ModelMeta{BatchSize: 8, MinBatchSize: 4, MinBatchTimeout: 150})
	plain := queueModel(t, "linear.onnx", ModelMeta{})
	q := NewRunQueue(1)
	start := time.Now()
	done := make(chan error, 1)
	go func() {
		_, err := q.Run(lin, &RunRequest{Inputs: []*Tensor{floats([]int64{1, 4}, 1, 2, 3, 4)}})
		done <- err
	}()
	waitFor(t, "the request is queued", func() bool { return q.Pending() == 1 })
	if _, err := q.Run(plain, &RunRequest{Inputs: []*Tensor{floats([]int64{1, 4}, 1, 2, 3, 4)}}); err != nil {
		t.Fatal(err)
	}
	if q.Pending() != 1 || time.Since(start) >= 150*time.Millisecond {
		t.Fatalf("pending %d after %v: the other model's request was not served first", q.Pending(), time.Since(start))
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if e := time.Since(start); e < 150*time.Millisecond {
		t.Errorf("the short batch ran after %v, before MINBATCHTIMEOUT", e)
	}
}

// TIMEOUT bounds the wait in the queue: a request still queued when it
// passes is answered ErrTimedOut and never runs. The kill switch
// (ExecTimeout) still ends a runaway run, and the worker then serves the
// next request.
func TestRunQueueTimeouts(t *testing.T) {
	slow := queueModel(t, "slow.onnx", ModelMeta{})
	lin := queueModel(t, "linear.onnx", ModelMeta{})
	q := NewRunQueue(1)
	busy := make(chan error, 1)
	start := time.Now()
	go func() { busy <- slowRun(q, slow, 300*time.Millisecond) }()
	waitFor(t, "the worker is busy", func() bool { return q.Busy() == 1 })
	x := floats([]int64{1, 4}, 1, 2, 3, 4)
	_, err := q.Run(lin, &RunRequest{Inputs: []*Tensor{x}, Timeout: 50 * time.Millisecond})
	if !errors.Is(err, ErrTimedOut) {
		t.Fatalf("queued behind a slow run with TIMEOUT 50ms: %v", err)
	}
	if q.Pending() != 0 || lin.Stats.Calls.Load() != 0 {
		t.Errorf("the timed-out request stayed queued (%d) or ran (%d calls)", q.Pending(), lin.Stats.Calls.Load())
	}
	wantORTError(t, <-busy, "terminate flag")
	if e := time.Since(start); e > 5*time.Second {
		t.Errorf("the runaway run ended after %v", e)
	}
	out, err := q.Run(lin, &RunRequest{Inputs: []*Tensor{x}, Timeout: time.Second})
	if err != nil || !closeTo(tensorFloats(out[0]), linearWant([]float32{1, 2, 3, 4}), 1e-6) {
		t.Fatalf("after the kill switch: %v %v", out, err)
	}
}

// A request for a model deleted while it waits for MINBATCHSIZE (no
// timeout) runs with what there is instead of waiting forever.
func TestRunQueueReleasedModelRuns(t *testing.T) {
	lin := queueModel(t, "linear.onnx", ModelMeta{BatchSize: 8, MinBatchSize: 4})
	q := NewRunQueue(1)
	done := make(chan error, 1)
	go func() {
		_, err := q.Run(lin, &RunRequest{Inputs: []*Tensor{floats([]int64{1, 4}, 1, 2, 3, 4)}})
		done <- err
	}()
	waitFor(t, "the request is queued", func() bool { return q.Pending() == 1 })
	lin.Release() // the request holds its own reference to the session
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the request of a deleted model still waits")
	}
}

// runOrder records the runs of the sessions it wraps (orderedSession) in
// the order they start, each by its first input's label; every run waits
// until open is closed.
type runOrder struct {
	mu     sync.Mutex
	labels map[*Tensor]string
	runs   []string
	open   chan struct{}
}

type orderedSession struct {
	EngineSession
	o *runOrder
}

func (s orderedSession) Run(ctx context.Context, in []*Tensor) ([]*Tensor, error) {
	s.o.mu.Lock()
	s.o.runs = append(s.o.runs, s.o.labels[in[0]])
	s.o.mu.Unlock()
	<-s.o.open
	return in, nil
}

// Requests wait in one lane per owner of their models, and the worker
// takes from the lanes in turn: a user's request queued behind another
// user's backlog runs next, not after the backlog (red-team review: 25-29 s
// behind 12 clients' runs of 3 s), and owners waiting together take turns
// in the order they came. One owner's requests, for any of its models, run
// in arrival order, as in one queue. Each row is "owner/model" requests:
// the first runs and holds the one worker while the others queue in order;
// want is the order the runs start in.
func TestRunQueueTakesOwnersInTurn(t *testing.T) {
	for _, tc := range []struct{ queued, want string }{
		{"bob/m bob/m bob/m bob/m bob/m alice/m",
			"bob/m#0 alice/m#0 bob/m#1 bob/m#2 bob/m#3 bob/m#4"},
		{"bob/m bob/m bob/m carol/m carol/m alice/m",
			"bob/m#0 carol/m#0 alice/m#0 bob/m#1 carol/m#1 bob/m#2"},
		{"bob/m alice/m bob/m alice/m bob/m alice/m",
			"bob/m#0 alice/m#0 bob/m#1 alice/m#1 bob/m#2 alice/m#2"},
		// One owner (a server without users): arrival order.
		{"/a /a /b /a /b /b /a", "/a#0 /a#1 /b#0 /a#2 /b#1 /b#2 /a#3"},
		{"bob/a bob/b bob/a bob/b", "bob/a#0 bob/b#0 bob/a#1 bob/b#1"},
	} {
		t.Run(tc.queued, func(t *testing.T) {
			o := &runOrder{labels: map[*Tensor]string{}, open: make(chan struct{})}
			q := NewRunQueue(1)
			q.quantum = time.Hour // runs of one model take turns, however long each took
			t.Cleanup(q.Close)
			models := map[string]*Model{}
			count := map[string]int{}
			var wg sync.WaitGroup
			for i, spec := range strings.Fields(tc.queued) {
				m := models[spec]
				if m == nil {
					owner, _, _ := strings.Cut(spec, "/")
					m = queueModel(t, "linear.onnx", ModelMeta{Owner: owner})
					m.Blob.Session = orderedSession{m.Blob.Session, o}
					models[spec] = m
				}
				in := floats([]int64{1, 4}, 1, 2, 3, 4)
				o.mu.Lock()
				o.labels[in] = fmt.Sprintf("%s#%d", spec, count[spec])
				o.mu.Unlock()
				count[spec]++
				wg.Go(func() {
					if _, err := q.Run(m, &RunRequest{Inputs: []*Tensor{in}}); err != nil {
						t.Error(err)
					}
				})
				if i == 0 {
					waitFor(t, "the first request runs", func() bool { return q.Busy() == 1 })
				} else {
					waitFor(t, "the request is queued", func() bool { return q.Pending() == i })
				}
			}
			close(o.open)
			wg.Wait()
			if got := strings.Join(o.runs, " "); got != tc.want {
				t.Errorf("runs started in the order\n%s\nwant\n%s", got, tc.want)
			}
			q.mu.Lock()
			defer q.mu.Unlock()
			if len(q.lanes) != 1 || q.waiting != 0 {
				t.Errorf("%d lanes and %d requests left, want one empty lane", len(q.lanes), q.waiting)
			}
		})
	}
}

// timedSession takes d a run and records each run's owner and the time it
// took, in the order they ran.
type timedSession struct {
	EngineSession
	d     time.Duration
	owner string
	log   *runLog
}

// timedModel is a model of owner's whose runs take d, logged in log.
func timedModel(t *testing.T, owner string, d time.Duration, log *runLog) *Model {
	m := queueModel(t, "linear.onnx", ModelMeta{Owner: owner})
	m.Blob.Session = timedSession{m.Blob.Session, d, owner, log}
	return m
}

type runLog struct {
	mu   sync.Mutex
	runs []timedRun
}

type timedRun struct {
	owner string
	took  time.Duration
}

func (s timedSession) Run(ctx context.Context, in []*Tensor) ([]*Tensor, error) {
	start := time.Now()
	time.Sleep(s.d)
	s.log.mu.Lock()
	s.log.runs = append(s.log.runs, timedRun{s.owner, time.Since(start)})
	s.log.mu.Unlock()
	return s.EngineSession.Run(ctx, in)
}

// Owners share the workers' time, not their turns: with heavy's runs
// taking 8 ms and light's 1 ms, both with a backlog on one worker, light
// runs until it has had as much run time as heavy before heavy runs again.
// By turns (the queue before) they alternated, and heavy had eight times
// light's time.
func TestRunQueueSharesRunTimeBetweenOwners(t *testing.T) {
	q := NewRunQueue(1)
	t.Cleanup(q.Close)
	log := &runLog{}
	heavy, light := timedModel(t, "heavy", 8*time.Millisecond, log), timedModel(t, "light", time.Millisecond, log)
	gate := queueModel(t, "linear.onnx", ModelMeta{Owner: "gate"})
	g := &gatedSession{EngineSession: gate.Blob.Session, open: make(chan struct{})}
	gate.Blob.Session = g
	var wg sync.WaitGroup
	run := func(m *Model) {
		wg.Go(func() {
			if _, err := q.Run(m, &RunRequest{Inputs: []*Tensor{floats([]int64{1, 4}, 1, 2, 3, 4)}}); err != nil {
				t.Error(err)
			}
		})
	}
	run(gate) // holds the one worker's slot while the backlogs queue
	waitFor(t, "the gate runs", func() bool { return g.held() == 1 })
	const heavies, lights = 4, 40
	for range heavies {
		run(heavy)
	}
	for range lights {
		run(light)
	}
	waitFor(t, "the backlogs are queued", func() bool { return q.Pending() == heavies+lights })
	close(g.open)
	wg.Wait()
	// Each time heavy runs again while light still has requests queued,
	// light has had at least about as much run time as heavy so far. The
	// log has each run's sleep; the queue charges what it measures around
	// the run, the worker's own steps included, which on a loaded machine
	// (make test's packages side by side) adds a few tenths of a
	// millisecond to each of light's short runs: half of heavy's is the
	// bar (by turns, light had an eighth).
	var heavyTime, lightTime time.Duration
	lightRuns, checked := 0, 0
	for i, r := range log.runs {
		if r.owner == "heavy" {
			if i > 0 && lightRuns < lights {
				checked++
				if lightTime < heavyTime/2 {
					t.Errorf("run %d is heavy's after %v of its own and %v of light's (%d runs): want light's at least half of heavy's",
						i, heavyTime, lightTime, lightRuns)
				}
			}
			heavyTime += r.took
		} else {
			lightTime += r.took
			lightRuns++
		}
	}
	if checked < 2 {
		t.Errorf("heavy ran again %d times while light had requests queued, want at least 2 (runs %v)", checked, log.runs)
	}
}

// An owner keeps its debt when its lane empties between requests: heavy's
// one client sends its next 8 ms run only once the last is answered, so
// its lane is empty, and dropped, every time light's four clients' 1 ms
// runs are taken. Before, its next request made a new lane level with
// light's, and heavy ran after every light run or two: 80-90% of the
// worker's time. Now the lane made again starts where heavy's was.
func TestRunQueueKeepsTheDebtOfAnEmptiedLane(t *testing.T) {
	q := NewRunQueue(1)
	t.Cleanup(q.Close)
	log := &runLog{}
	heavy, light := timedModel(t, "heavy", 8*time.Millisecond, log), timedModel(t, "light", time.Millisecond, log)
	var stop atomic.Bool
	var wg sync.WaitGroup
	client := func(m *Model) {
		wg.Go(func() {
			for !stop.Load() {
				if _, err := q.Run(m, &RunRequest{Inputs: []*Tensor{floats([]int64{1, 4}, 1, 2, 3, 4)}}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	for range 4 {
		client(light)
	}
	client(heavy)
	waitFor(t, "heavy runs 25 times", func() bool {
		log.mu.Lock()
		defer log.mu.Unlock()
		n := 0
		for _, r := range log.runs {
			if r.owner == "heavy" {
				n++
			}
		}
		return n >= 25
	})
	stop.Store(true)
	wg.Wait()
	var heavyTime, lightTime time.Duration
	for _, r := range log.runs[5:] { // past the first runs, which have no mean yet
		if r.owner == "heavy" {
			heavyTime += r.took
		} else {
			lightTime += r.took
		}
	}
	// About half: the queue charges light's short runs a little more than
	// their logged sleep (TestRunQueueSharesRunTimeBetweenOwners), so
	// the bar leaves room; without the debt, heavy had 80-90%.
	share := float64(heavyTime) / float64(heavyTime+lightTime)
	t.Logf("heavy %v, light %v of run time (%.0f%% heavy)", heavyTime, lightTime, 100*share)
	if share > 0.7 {
		t.Errorf("heavy had %v of run time against light's %v (%.0f%%), want about half", heavyTime, lightTime, 100*share)
	}
}

// A request withdrawn (its Cancel closed: CLIENT KILL) while it waits for
// MINBATCHSIZE leaves the queue at once, and its rows do not make up a
// later request's batch (models review: the killed client's connection
// stayed open, and a 7-row request filled a MINBATCHSIZE of 8 with it).
func TestRunQueueCanceledRequestLeaves(t *testing.T) {
	lin := queueModel(t, "linear.onnx", ModelMeta{BatchSize: 8, MinBatchSize: 2})
	q := NewRunQueue(1)
	cancel := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := q.Run(lin, &RunRequest{Inputs: []*Tensor{floats([]int64{1, 4}, 1, 2, 3, 4)}, Cancel: cancel})
		done <- err
	}()
	waitFor(t, "the request is queued", func() bool { return q.Pending() == 1 })
	if Requests() != 1 {
		t.Errorf("Requests %d while one waits", Requests())
	}
	close(cancel)
	select {
	case err := <-done:
		if !errors.Is(err, ErrCanceled) {
			t.Fatalf("withdrawn: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a withdrawn request still waits")
	}
	if q.Pending() != 0 || Requests() != 0 {
		t.Fatalf("pending %d, requests %d after it left", q.Pending(), Requests())
	}
	// One row alone now waits for a second (MINBATCHSIZE 2): its TIMEOUT
	// ends the wait, no withdrawn row makes up its batch.
	_, err := q.Run(lin, &RunRequest{Inputs: []*Tensor{floats([]int64{1, 4}, 1, 2, 3, 4)}, Timeout: 100 * time.Millisecond})
	if !errors.Is(err, ErrTimedOut) {
		t.Errorf("a lone row: %v, want it to time out waiting for a batch", err)
	}
	if c := lin.Stats.Calls.Load(); c != 0 {
		t.Errorf("%d calls, want none", c)
	}
}

// aloneRecorder records what Alone reports during each of its runs.
type aloneRecorder struct {
	EngineSession
	mu   sync.Mutex
	seen []bool
}

func (a *aloneRecorder) Run(ctx context.Context, in []*Tensor) ([]*Tensor, error) {
	a.mu.Lock()
	a.seen = append(a.seen, Alone())
	a.mu.Unlock()
	return a.EngineSession.Run(ctx, in)
}

// Alone holds during a run only while one client's commands execute
// (BeginWork) and the run is the only request in the run queues.
func TestAlone(t *testing.T) {
	slow := queueModel(t, "slow.onnx", ModelMeta{})
	lin := queueModel(t, "linear.onnx", ModelMeta{})
	rec := &aloneRecorder{EngineSession: lin.Blob.Session}
	lin.Blob.Session = rec
	q := NewRunQueue(2)
	run := func() {
		t.Helper()
		if _, err := q.Run(lin, &RunRequest{Inputs: []*Tensor{floats([]int64{1, 4}, 1, 2, 3, 4)}}); err != nil {
			t.Fatal(err)
		}
	}
	run() // no client's commands executing (a run the front end did not start)
	BeginWork(1)
	run() // one client, but only just
	time.Sleep(SoloAfter)
	run() // one client, the only one for SoloAfter
	BeginWork(2)
	run() // two clients
	EndWork()
	run() // one client executing, but another's commands came within SoloAfter
	time.Sleep(SoloAfter)
	run() // one client
	busy := make(chan error, 1)
	go func() { busy <- slowRun(q, slow, 200*time.Millisecond) }()
	waitFor(t, "a slow run executes", func() bool { return q.Busy() == 1 })
	run() // one client, but another run in the queue
	<-busy
	run() // one client again, one run
	EndWork()
	if got, want := fmt.Sprint(rec.seen), "[false false true false false true false true]"; got != want {
		t.Errorf("Alone during the runs: %s, want %s", got, want)
	}
	if Alone() {
		t.Error("Alone with nothing executing")
	}
}

// Close answers the requests waiting and any made later ErrQueueClosed,
// lets the run in progress finish, and ends every worker.
func TestRunQueueClose(t *testing.T) {
	lin := queueModel(t, "linear.onnx", ModelMeta{})
	g := &gatedSession{EngineSession: lin.Blob.Session, open: make(chan struct{})}
	lin.Blob.Session = g
	q := NewRunQueue(1)
	in := func() *RunRequest { return &RunRequest{Inputs: []*Tensor{floats([]int64{1, 4}, 1, 2, 3, 4)}} }
	var running, waiting error
	var wg sync.WaitGroup
	wg.Go(func() { _, running = q.Run(lin, in()) })
	waitFor(t, "the first request runs", func() bool { return g.held() == 1 })
	wg.Go(func() { _, waiting = q.Run(lin, in()) })
	waitFor(t, "the second request waits", func() bool { return q.Pending() == 1 })

	q.Close()
	if _, err := q.Run(lin, in()); !errors.Is(err, ErrQueueClosed) {
		t.Errorf("a request after Close: %v, want ErrQueueClosed", err)
	}
	close(g.open)
	wg.Wait()
	if running != nil || !errors.Is(waiting, ErrQueueClosed) {
		t.Errorf("the running request: %v (want none); the waiting one: %v (want ErrQueueClosed)", running, waiting)
	}
	waitFor(t, "the worker ends", func() bool { q.mu.Lock(); defer q.mu.Unlock(); return q.workers == 0 })
	if q.SetWorkers(2); q.Workers() != 0 {
		t.Errorf("SetWorkers after Close: %d workers asked for, want 0", q.Workers())
	}
	if c := lin.Stats.Calls.Load(); c != 1 {
		t.Errorf("%d calls, want 1", c)
	}
}

// batchRecorder records the rows of each run its session is handed, and
// answers with the inputs, in Go: no call into C lets the runtime hand the
// thread to another goroutine meanwhile.
type batchRecorder struct {
	EngineSession
	mu   sync.Mutex
	rows []int64
}

func (b *batchRecorder) Run(ctx context.Context, in []*Tensor) ([]*Tensor, error) {
	b.mu.Lock()
	b.rows = append(b.rows, in[0].Shape[0])
	b.mu.Unlock()
	return in, nil
}

// Requests whose goroutines are ready to run when the first of them wakes
// the idle queue's worker join that worker's batch (settleLocked) while
// the server is busy with several clients' commands; without the worker's
// yield, it runs each request alone, as it does when the server is not
// busy (a lone client's request never waits for others). One thread
// (GOMAXPROCS 1) makes the order of the goroutines the scheduler's, as on
// a busy machine (the race detector shuffles that order, so only the
// busy rounds' batches are checked). The scheduler takes the global run queue first one time
// in 61, which then ends a yield early: a round may fail that way, so the
// busy case has three tries. Each request gets its own row back.
func TestRunQueueBatchSettles(t *testing.T) {
	lin := queueModel(t, "linear.onnx", ModelMeta{BatchSize: 8})
	rec := &batchRecorder{EngineSession: lin.Blob.Session}
	lin.Blob.Session = rec
	q := NewRunQueue(1)
	t.Cleanup(q.Close)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	const n = 6
	round := func() []int64 {
		rec.rows = nil
		start := make(chan struct{})
		var wg sync.WaitGroup
		var ready atomic.Int32
		for i := range n {
			wg.Go(func() {
				ready.Add(1)
				<-start
				in := floats([]int64{1, 4}, float32(i), 1, 2, 3)
				outs, err := q.Run(lin, &RunRequest{Inputs: []*Tensor{in}})
				if err != nil || len(outs) != 1 || !slices.Equal(outs[0].Data, in.Data) {
					t.Errorf("request %d: %v, %v: not its own row", i, outs, err)
				}
			})
		}
		waitFor(t, "the requests wait to start", func() bool { return ready.Load() == n })
		close(start) // all n ready to run at once
		wg.Wait()
		return rec.rows
	}
	round()
	// Not busy, a worker does not yield (the order the rounds' goroutines
	// ran in is the runtime's, which the race detector shuffles).
	q.mu.Lock()
	q.lanes, q.waiting = []*lane{{jobs: []*job{{m: lin, req: &RunRequest{}, size: 1}}}}, 1
	if q.settleLocked() {
		t.Error("the worker yielded for a lone client")
	}
	q.lanes, q.waiting = nil, 0
	q.mu.Unlock()
	BeginWork(1) // two clients' commands executing
	BeginWork(2)
	defer EndWork()
	defer EndWork()
	var rows []int64
	for range 3 {
		if rows = round(); slices.Equal(rows, []int64{n}) {
			return
		}
	}
	t.Errorf("busy: batches of %v rows, want one of %d", rows, n)
}

// Under load, a batched model's request that would run alone waits for
// company (companyWait): at most the model's mean run, at most
// companyWait, from when it was queued. It does not wait when a second
// request is there, when the server executes no other client's command
// (Busy false), when MINBATCHSIZE governs the wait, when its model is
// deleted, or before the model has a run to go by; and through the queue,
// a second request queued meanwhile runs with it.
func TestRunQueueWaitsForCompany(t *testing.T) {
	lin := queueModel(t, "linear.onnx", ModelMeta{BatchSize: 8})
	row := func() *job {
		return &job{m: lin, size: 1, req: &RunRequest{Inputs: []*Tensor{floats([]int64{1, 4}, 1, 2, 3, 4)}, Queued: time.Unix(100, 0)}}
	}
	one, two := []*job{row()}, []*job{row(), row()}
	queued := one[0].req.Queued
	if _, ready, _ := gather(one, 0, queued, true); !ready {
		t.Error("a model with no run yet waited")
	}
	lin.Stats.Calls.Store(1)
	lin.Stats.Duration.Store(40) // a mean run of 40 µs
	if _, ready, at := gather(one, 0, queued.Add(10*time.Microsecond), true); ready || !at.Equal(queued.Add(40*time.Microsecond)) {
		t.Errorf("alone under load: ready %v until %v, want a wait until its mean run has passed", ready, at.Sub(queued))
	}
	lin.Stats.Duration.Store(5000)
	if _, ready, at := gather(one, 0, queued, true); ready || !at.Equal(queued.Add(companyWait)) {
		t.Errorf("alone under load, runs of 5 ms: ready %v until %v, want a wait of companyWait", ready, at.Sub(queued))
	}
	for _, c := range []struct {
		what string
		jobs []*job
		now  time.Time
		busy bool
	}{
		{"with company", two, queued, true},
		{"alone, no other client's command executing", one, queued, false},
		{"alone, its wait over", one, queued.Add(companyWait), true},
	} {
		if batch, ready, _ := gather(c.jobs, 0, c.now, c.busy); !ready || len(batch) != len(c.jobs) {
			t.Errorf("%s: ready %v with %d requests, want it to run", c.what, ready, len(batch))
		}
	}
	lin.MinBatchSize = 1 // MINBATCHSIZE decides, and one row reaches it
	if _, ready, _ := gather(one, 0, queued, true); !ready {
		t.Error("a batch that reached MINBATCHSIZE waited for company")
	}
	lin.MinBatchSize = 0
	lin.released.Store(true)
	if _, ready, _ := gather(one, 0, queued, true); !ready {
		t.Error("a deleted model's request waited for company")
	}
	lin.released.Store(false)

	// Through the queue: a lone request under load runs once its wait has
	// passed, and a second queued meanwhile joins it.
	rec := &batchRecorder{EngineSession: lin.Blob.Session}
	lin.Blob.Session = rec
	q := NewRunQueue(1)
	t.Cleanup(q.Close)
	BeginWork(1) // two clients' commands executing
	BeginWork(2)
	defer EndWork()
	defer EndWork()
	run := func(i int) {
		if _, err := q.Run(lin, &RunRequest{Inputs: []*Tensor{floats([]int64{1, 4}, float32(i), 1, 2, 3)}}); err != nil {
			t.Error(err)
		}
	}
	start := time.Now()
	run(0)
	if e := time.Since(start); e < companyWait {
		t.Errorf("a lone request under load ran after %v, before its wait for company (%v) had passed", e, companyWait)
	}
	for range 3 { // the second must be queued within companyWait: a loaded machine may miss it
		rec.rows = nil
		var wg sync.WaitGroup
		for i := range 2 {
			wg.Go(func() { run(i) })
		}
		wg.Wait()
		if slices.Equal(rec.rows, []int64{2}) {
			return
		}
	}
	t.Errorf("the second request queued while the first waited for company did not join it: batches of %v rows", rec.rows)
}

// echoSession answers a run with its inputs after a little work (about a
// microsecond, the same each time), in Go: a benchmark of the queue times
// the queue, not inference, and the runs last long enough for requests to
// queue.
type echoSession struct{ EngineSession }

// echoSink keeps echoSession's work from being optimised away.
var echoSink atomic.Uint64

func (echoSession) Run(ctx context.Context, in []*Tensor) ([]*Tensor, error) {
	x := uint64(len(in))
	for i := range uint64(1000) {
		x = x*6364136223846793005 + i
	}
	echoSink.Store(x)
	return in, nil
}

// The queue's own cost per run, with 32 clients of one owner (the server
// without users) on 2 workers: runs of about a microsecond, unbatched and
// batched (BATCHSIZE 32).
func BenchmarkRunQueue(b *testing.B) {
	for _, batch := range []int64{0, 32} {
		b.Run(fmt.Sprintf("batch%d", batch), func(b *testing.B) {
			m := queueModel(b, "linear.onnx", ModelMeta{BatchSize: batch})
			m.Blob.Session = echoSession{m.Blob.Session}
			q := NewRunQueue(2)
			b.Cleanup(q.Close)
			b.SetParallelism(32 / runtime.GOMAXPROCS(0))
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				in := floats([]int64{1, 4}, 1, 2, 3, 4)
				for pb.Next() {
					if _, err := q.Run(m, &RunRequest{Inputs: []*Tensor{in}}); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
