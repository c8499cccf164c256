//go:build cgo && !noort

package modelstore

import ort "github.com/yalue/onnxruntime_go"

// runOpts are ORT run options a Session keeps for reuse, with the
// watchdog's entry for the run using them (watch.go): the watchdog stops
// that run by setting the options' terminate flag.
type runOpts struct {
	ro *ort.RunOptions
	w  Watched
}

// Stop implements Stopper: ORT stops the run within one node.
func (r *runOpts) Stop() { r.ro.Terminate() }

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

// putRunOpts pools r once its run has ended (terminated: the watchdog set
// its flag, which is cleared first), or destroys it if the session is
// closed.
func (s *Session) putRunOpts(r *runOpts, terminated bool) {
	if terminated {
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
