package modelstore

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// A waiting RunContext (a run queued behind others of its group) does not
// end before Start, however long it waits; from Start it ends its timeout
// later, its Done channel too when made before Start.
func TestWaitingRunContext(t *testing.T) {
	ctx, rc := waitingExecContext(20 * time.Millisecond)
	done := ctx.Done()
	time.Sleep(40 * time.Millisecond)
	if err := ctx.Err(); err != nil {
		t.Fatalf("before Start: %v", err)
	}
	rc.Start()
	if d, _ := ctx.Deadline(); time.Until(d) > 20*time.Millisecond || time.Until(d) < 0 {
		t.Errorf("deadline %v from now", time.Until(d))
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Done not closed after the deadline")
	}
	if err := ctx.Err(); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("after the deadline: %v", err)
	}
	rc.Start() // once ended, it stays so
	if err := ctx.Err(); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("after a second Start: %v", err)
	}
	if ctx, none := waitingExecContext(0); ctx != context.Background() || none != nil {
		t.Errorf("waitingExecContext(0) = %v, %v", ctx, none)
	} else {
		none.Start()
	}
}

// A RunContext ends at its deadline by the clock alone: no channel or
// timer until Done is asked for, one allocation in all (issue 9), and the
// first error it reports is the one it keeps.
func TestRunContext(t *testing.T) {
	if got := testing.AllocsPerRun(100, func() {
		rc := NewRunContext(time.Second)
		if rc.Err() != nil || !Watchable(rc) {
			t.Fatal("a fresh RunContext ended, or is not watchable")
		}
		rc.Release()
	}); got != 1 {
		t.Errorf("a RunContext made, checked and released: %.1f allocations, want 1", got)
	}

	// Without MODEL_EXECUTION_TIMEOUT a run has no deadline, and nothing
	// to release.
	if ctx, none := execContext(0); ctx != context.Background() || none != nil || Watchable(ctx) {
		t.Errorf("execContext(0) = %v, %v", ctx, none)
	} else {
		none.Release()
	}
	if ctx, rc := execContext(time.Second); ctx != context.Context(rc) || rc == nil {
		t.Errorf("execContext(1s) = %v, %v", ctx, rc)
	}

	rc := NewRunContext(30 * time.Millisecond)
	if d, ok := rc.Deadline(); !ok || time.Until(d) > 30*time.Millisecond {
		t.Errorf("deadline %v %v", d, ok)
	}
	if Watchable(rc); rc.done != nil {
		t.Error("Watchable made the Done channel")
	}
	done := rc.Done()
	select {
	case <-done:
		t.Fatal("Done closed before the deadline")
	default:
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Done not closed after the deadline")
	}
	if err := rc.Err(); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("after the deadline: %v", err)
	}
	rc.Release()
	if err := rc.Err(); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("released after the deadline: %v, want the deadline's error kept", err)
	}

	// Released first: canceled, kept past the deadline. Expired by Err
	// before anyone asked for Done. Either way a Done asked for afterwards
	// is closed already.
	for _, tc := range []struct {
		name    string
		release bool
		want    error
	}{{"released, then past the deadline", true, context.Canceled}, {"past the deadline", false, context.DeadlineExceeded}} {
		rc := NewRunContext(time.Millisecond)
		if tc.release {
			rc.Release()
		}
		time.Sleep(5 * time.Millisecond)
		if err := rc.Err(); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
		select {
		case <-rc.Done():
		default:
			t.Errorf("%s: Done is open", tc.name)
		}
	}
}

// Done, Err and Release race without a double close or a lost close (run
// under -race by make test).
func TestRunContextConcurrent(t *testing.T) {
	for range 200 {
		rc := NewRunContext(time.Millisecond)
		var wg sync.WaitGroup
		wg.Go(func() { <-rc.Done() })
		wg.Go(func() { rc.Release() })
		wg.Go(func() {
			for rc.Err() == nil {
				runtime.Gosched()
			}
		})
		wg.Wait()
	}
}

type countStops struct{ n atomic.Int32 }

func (c *countStops) Stop() { c.n.Add(1) }

// The watchdog stops a run once its context ends, once, and not after
// Unwatch; a context that cannot end is not watchable.
func TestWatch(t *testing.T) {
	if Watchable(context.Background()) {
		t.Error("context.Background is watchable")
	}
	var s countStops
	var w Watched
	rc := NewRunContext(20 * time.Millisecond)
	start := time.Now()
	Watch(&w, rc, &s)
	for s.n.Load() == 0 && time.Since(start) < 5*time.Second {
		time.Sleep(time.Millisecond)
	}
	if e := time.Since(start); s.n.Load() != 1 || e < 20*time.Millisecond {
		t.Fatalf("%d stops after %v", s.n.Load(), e)
	}
	time.Sleep(3 * watchTick)
	if !Unwatch(&w) || s.n.Load() != 1 {
		t.Errorf("stopped %d times, or Unwatch did not tell", s.n.Load())
	}

	// Unwatched before its deadline: never stopped.
	var s2 countStops
	ctx, cancel := context.WithTimeout(context.Background(), 3*watchTick)
	defer cancel()
	Watch(&w, ctx, &s2)
	if Unwatch(&w) {
		t.Error("Unwatch says stopped")
	}
	<-ctx.Done()
	time.Sleep(3 * watchTick)
	if s2.n.Load() != 0 {
		t.Error("the watchdog stopped a run after Unwatch")
	}
}
