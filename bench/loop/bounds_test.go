//go:build cgo && !noort

package main

import (
	"strings"
	"testing"
	"time"
)

// boundsReport is a report with the figures the bounds read, in two
// rounds whose medians are: a floor of 20 µs of server and 30 µs of
// clients CPU a loop at 32 clients and 5,000 loops/s at 1 client; runs of
// 40 µs of CPU (12.8 µs a row in a batch of 32), ort's p50 25 µs against
// ort-1thr's 38; a process round trip of 16 µs of CPU and 18 µs of latency.
func boundsReport() *report {
	u := time.Microsecond
	cpu := func(server, client time.Duration) sample {
		return sample{ops: 30000, secs: 1, cpuPerOp: server, clientPerOp: client}
	}
	run := func(p50, cpu time.Duration) sample {
		return sample{lat: []time.Duration{p50}, cpuPerOp: cpu}
	}
	// Each pair's mean is the median of two.
	return &report{
		loops: &loops{
			by: map[string][]sample{
				loopKey("floor", 32): {cpu(19*u, 29*u), cpu(21*u, 31*u)},
				loopKey("floor", 1):  {{ops: 4000, secs: 0.8}, {ops: 6000, secs: 1.2}},
			},
			runs: map[string][]sample{
				loopKey("ort", 32):          {run(25*u, 0), run(25*u, 0)},
				loopKey("ort-1thr", 32):     {run(38*u, 39*u), run(38*u, 41*u)},
				loopKey("ort-1thr-b32", 32): {run(400*u, 32*12700*time.Nanosecond), run(400*u, 32*12900*time.Nanosecond)},
				loopKey("ort", 1):           {run(24*u, 0), run(26*u, 0)},
				loopKey("ort-1thr", 1):      {run(38*u, 40*u), run(38*u, 40*u)},
				loopKey("ort-1thr-b32", 1):  {run(400*u, 0), run(400*u, 0)},
			},
		},
		mach: &machine{
			trip:    map[string]float64{"process-c": 35, "process-go": 18},
			tripCPU: map[string]float64{"process-c": 25, "process-go": 16},
		},
	}
}

func TestBounds(t *testing.T) {
	b := newBounds(boundsReport())
	for _, c := range []struct {
		kind    string
		clients int
		goal    float64
		want    []string
	}{
		// (20 + 30) / (20 + 40 + 16 + 30) = 0.47: 6% under 0.5.
		{"mlp", 32, 0.5, []string{"**out of reach**", "at best 0.47x", "20.0 + 40.0 + 16.0 = 76.0"}},
		// Without the wall (20 + 30) / (20 + 40 + 30) = 0.56.
		{"mlp-off", 32, 0.5, []string{"not ruled out", "at best 0.56x", "20.0 + 40.0 + 0.0 = 60.0"}},
		// A full batch's row and the round trip over 32 rows:
		// (20 + 30) / (20 + 12.8 + 0.5 + 30) = 0.79, within 5% of 0.8.
		{"mlp-batch32", 32, 0.8, []string{"at the edge", "at best 0.79x", "20.0 + 12.8 + 0.5 = 33.3"}},
		// 200 µs a loop, the faster run (25) and the cheaper trip (18):
		// 200 / 243 = 0.82.
		{"mlp-nolog", 1, 0.75, []string{"not ruled out", "at best 0.82x", "200 + 25.0 + 18.0 = 243"}},
		{"mlp", 8, 0.5, nil},
	} {
		got := b.loop(c.kind, c.clients, c.goal)
		if c.want == nil {
			if got != "" {
				t.Errorf("%s at %d: %q, want no bound", c.kind, c.clients, got)
			}
			continue
		}
		if !strings.HasPrefix(got, c.want[0]) {
			t.Errorf("%s at %d: %q, want it to start %q", c.kind, c.clients, got, c.want[0])
		}
		for _, w := range c.want[1:] {
			if !strings.Contains(got, w) {
				t.Errorf("%s at %d: %q, want %q in it", c.kind, c.clients, got, w)
			}
		}
	}
	if got := b.wall(); !strings.HasPrefix(got, "**out of reach**") || !strings.Contains(got, "18.0 µs") {
		t.Errorf("wall: %q", got)
	}
	// PING 20 + ort 24 + 20 = 64 µs allowed; a run that does not spin
	// takes 38, the trip 18: 76 µs at least, 64 / 76 = 0.84.
	if got := b.modelExecute(20, 24, 38); !strings.HasPrefix(got, "**out of reach**") || !strings.Contains(got, "20.0 + 38.0 + 18.0 = 76.0") {
		t.Errorf("MODELEXECUTE: %q, want out of reach (76 µs against 64)", got)
	}
	// A run of 20 µs leaves room: 64 / 58 = 1.10.
	if got := b.modelExecute(20, 24, 20); !strings.HasPrefix(got, "not ruled out") {
		t.Errorf("MODELEXECUTE with a run of 20 µs: %q, want not ruled out", got)
	}
}

// TestBoundsNeedTheirFigures: without section machine the wall's kinds
// get no bound (the round trip is unknown); the others still do; without
// the model's runs beside the loops, none does.
func TestBoundsNeedTheirFigures(t *testing.T) {
	r := boundsReport()
	r.mach = nil
	b := newBounds(r)
	if got := b.loop("mlp", 32, 0.5); got != "" {
		t.Errorf("mlp without section machine: %q", got)
	}
	if got := b.loop("mlp-off", 32, 0.5); got == "" {
		t.Error("mlp-off without section machine: no bound")
	}
	if b.wall() != "" || b.modelExecute(20, 24, 38) != "" {
		t.Error("wall bounds without section machine")
	}
	r.loops.runs = nil
	if got := newBounds(r).loop("mlp-off", 32, 0.5); got != "" {
		t.Errorf("without the model's runs: %q", got)
	}
}

// TestBoundsGoFloor: with floor-go's figures, a 32-client bound adds what
// a goroutine per connection allows, from floor-go's server CPU in place
// of the floor's, and keeps the first bound's verdict.
func TestBoundsGoFloor(t *testing.T) {
	r := boundsReport()
	if got := newBounds(r).loop("mlp", 32, 0.5); strings.Contains(got, "goroutine") {
		t.Errorf("without floor-go: %q", got)
	}
	u := time.Microsecond
	r.loops.by[loopKey("floor-go", 32)] = []sample{
		{ops: 30000, secs: 1, cpuPerOp: 29 * u}, {ops: 30000, secs: 1, cpuPerOp: 31 * u},
	}
	// Per round (19 + 29) / (29 + 39 + 16 + 29) = 0.425 and
	// (21 + 31) / (31 + 41 + 16 + 31) = 0.437: 0.43.
	got := newBounds(r).loop("mlp", 32, 0.5)
	for _, w := range []string{"**out of reach**", "at best 0.47x", "goroutine per connection, at best 0.43x", "30.0 + 40.0 + 16.0 = 86.0"} {
		if !strings.Contains(got, w) {
			t.Errorf("with floor-go: %q, want %q in it", got, w)
		}
	}
	if got := newBounds(r).loop("mlp", 1, 0.75); strings.Contains(got, "goroutine") {
		t.Errorf("one client: %q, want no goroutine bound", got)
	}
}

// TestBoundsFrontEnd: with floor-ea's figures (EnclaveAI serving the
// floor's loop), a 32-client bound adds what EnclaveAI's own front end
// allows, after floor-go's, and the verdict stays the first bound's.
func TestBoundsFrontEnd(t *testing.T) {
	r := boundsReport()
	u := time.Microsecond
	r.loops.by[loopKey("floor-go", 32)] = []sample{{ops: 30000, secs: 1, cpuPerOp: 30 * u}, {ops: 30000, secs: 1, cpuPerOp: 30 * u}}
	r.loops.by[loopKey("floor-ea", 32)] = []sample{{ops: 30000, secs: 1, cpuPerOp: 35 * u}, {ops: 30000, secs: 1, cpuPerOp: 37 * u}}
	// Batched: (19 + 29) / (35 + 12.7 + 0.5 + 29) = 0.622 and
	// (21 + 31) / (37 + 12.9 + 0.5 + 31) = 0.639: 0.63, where the
	// machine allows 0.79 (TestBounds).
	got := newBounds(r).loop("mlp-batch32", 32, 0.8)
	for _, w := range []string{"at the edge", "at best 0.79x", "goroutine per connection", "; EnclaveAI's own front end, at best 0.63x (36.0 + 12.8 + 0.5 = 49.3 µs, floor-ea's 36.0 instead of the floor's)"} {
		if !strings.Contains(got, w) {
			t.Errorf("with floor-ea: %q, want %q in it", got, w)
		}
	}
	if strings.Index(got, "goroutine") > strings.Index(got, "EnclaveAI's own") {
		t.Errorf("%q: want floor-go's bound before floor-ea's", got)
	}
}

// TestBoundsTakeTheCheapestRun: where a run with a pool cost less CPU
// than one thread (two cores' caches holding weights one core's does not),
// the 32-client bound takes it, unbatched and batched.
func TestBoundsTakeTheCheapestRun(t *testing.T) {
	r := boundsReport()
	u := time.Microsecond
	run := func(cpu time.Duration) sample { return sample{lat: []time.Duration{20 * u}, cpuPerOp: cpu} }
	r.loops.runs[loopKey("ort", 32)] = []sample{run(29 * u), run(31 * u)}
	r.loops.runs[loopKey("ort-2thr-nospin", 32)] = []sample{run(45 * u), run(45 * u)}
	r.loops.runs[loopKey("ort-b32", 32)] = []sample{run(32 * 9 * u), run(32 * 11 * u)}
	b := newBounds(r)
	// Per round (19 + 29) / (19 + 29 + 29) and (21 + 31) / (21 + 31 + 31):
	// 0.62 without the wall.
	if got := b.loop("mlp-off", 32, 0.5); !strings.Contains(got, "at best 0.62x") || !strings.Contains(got, "20.0 + 30.0 + 0.0 = 50.0") {
		t.Errorf("mlp-off with ort at 30 µs: %q, want ort's run", got)
	}
	// Per round 48 / (19 + 9 + 29) and 52 / (21 + 11 + 31): 0.83.
	if got := b.loop("mlp-off-batch32", 32, 0.8); !strings.Contains(got, "at best 0.83x") || !strings.Contains(got, "20.0 + 10.0 + 0.0 = 30.0") {
		t.Errorf("mlp-off-batch32 with ort-b32 at 10 µs a row: %q, want ort-b32's run", got)
	}
	// A pool's run dearer than one thread's leaves the bound as it was.
	r.loops.runs[loopKey("ort", 32)] = []sample{run(60 * u), run(60 * u)}
	if got := newBounds(r).loop("mlp-off", 32, 0.5); !strings.Contains(got, "20.0 + 40.0 + 0.0 = 60.0") {
		t.Errorf("mlp-off with ort at 60 µs: %q, want ort-1thr's 40", got)
	}
}
