//go:build cgo && !noort

package modelstore

import (
	"context"
	"sync"
	"time"

	ort "github.com/yalue/onnxruntime_go"
)

// The kill switch of runs whose context ends (MODEL_EXECUTION_TIMEOUT's
// deadline, or a cancellation): like RedisAI's, which sets ORT's terminate
// flag from Redis's cron tick, one watchdog goroutine looks at the runs in
// flight every watchTick, and only while there are some. Per run this costs
// an entry in a list, where a callback registered on each run's context
// (context.AfterFunc) cost half a dozen allocations and a lock of the
// context's own.

// watchTick is how often the watchdog looks: a run is terminated at most
// this long after its context ends (and then within one ORT node).
const watchTick = 5 * time.Millisecond

// runOpts are ORT run options a Session keeps for reuse, with what the
// watchdog needs to know about the run using them.
type runOpts struct {
	ro         *ort.RunOptions
	ctx        context.Context // the run's; nil while pooled
	terminated bool            // the watchdog set ro's terminate flag
	idx        int             // position in watchdog.runs while watched
}

var watchdog struct {
	mu      sync.Mutex
	runs    []*runOpts
	running bool // the goroutine is alive
}

// watch makes the watchdog terminate r's run once ctx is done.
func watch(r *runOpts, ctx context.Context) {
	watchdog.mu.Lock()
	defer watchdog.mu.Unlock()
	r.ctx, r.idx = ctx, len(watchdog.runs)
	watchdog.runs = append(watchdog.runs, r)
	if !watchdog.running {
		watchdog.running = true
		go watchLoop()
	}
}

// unwatch removes r; once it returns, the watchdog no longer touches r.
// It reports whether r's terminate flag was set.
func unwatch(r *runOpts) bool {
	watchdog.mu.Lock()
	defer watchdog.mu.Unlock()
	last := len(watchdog.runs) - 1
	moved := watchdog.runs[last]
	watchdog.runs[r.idx], moved.idx = moved, r.idx
	watchdog.runs[last] = nil
	watchdog.runs = watchdog.runs[:last]
	r.ctx = nil
	return r.terminated
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
		for _, r := range watchdog.runs {
			if !r.terminated && r.ctx.Err() != nil {
				r.ro.Terminate()
				r.terminated = true
			}
		}
		watchdog.mu.Unlock()
	}
}

// takeRunOpts returns pooled run options, or new ones. The caller holds a
// run (acquire) and gives them back with putRunOpts before release.
func (s *Session) takeRunOpts() (*runOpts, error) {
	s.mu.Lock()
	if n := len(s.pool); n > 0 {
		r := s.pool[n-1]
		s.pool = s.pool[:n-1]
		s.mu.Unlock()
		return r, nil
	}
	s.mu.Unlock()
	ro, err := ort.NewRunOptions()
	if err != nil {
		return nil, newORTError(err)
	}
	return &runOpts{ro: ro}, nil
}

// putRunOpts pools r once its run has ended (terminated: its flag was set,
// and is cleared first), or destroys it if the session is closed.
func (s *Session) putRunOpts(r *runOpts, terminated bool) {
	if terminated {
		r.terminated = false
		if r.ro.UnsetTerminate() != nil {
			r.ro.Destroy() // not reusable
			return
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		r.ro.Destroy()
		return
	}
	s.pool = append(s.pool, r)
}
