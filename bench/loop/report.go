//go:build cgo && !noort

package main

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"time"
)

// report is everything one run measured.
type report struct {
	o                        *options
	start, end               time.Time
	loadBefore, loadAfter    string
	ortVersion, redisVersion string
	mach                     *machine
	lat                      *latency
	loops                    *loops
	tf                       *transformer
	core                     *core
	notes                    []string
}

// loopTargets are issue 9's throughput targets: a kind at a client count
// reaches goal times the floor's loops/s.
var loopTargets = []struct {
	kind    string
	clients int
	goal    float64
}{
	{"mlp", 1, 0.75}, {"mlp", 32, 0.5}, {"mlp-batch32", 32, 0.8},
	{"mlp-off", 1, 0.75}, {"mlp-off", 32, 0.5}, {"mlp-off-batch32", 32, 0.8},
	{"mlp-nolog", 1, 0.75}, {"mlp-nolog", 32, 0.5}, {"mlp-nolog-batch32", 32, 0.8},
}

// target is one of issue 9's goals, checked against this run; bound is
// what this machine allows it at best (bounds), "" where none applies.
type target struct {
	what, measured, bound string
	met                   bool
}

func (r *report) markdown() string {
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	p("%s\n", beginMarker)
	p("Run: %s–%s UTC, commit %s; %d CPUs (%s), %s, ONNX Runtime %s, Redis %s; load average %s before, %s after.\n",
		r.start.UTC().Format("2006-01-02 15:04"), r.end.UTC().Format("15:04"), commit(), runtime.NumCPU(), cpuModel(),
		runtime.Version(), r.ortVersion, r.redisVersion, r.loadBefore, r.loadAfter)
	p("Command: `bench/loop %s`.\n", strings.Join(os.Args[1:], " "))
	var targets []target
	bnd := newBounds(r)
	if l := r.loops; l != nil {
		p("\nLoop: per client AI.TENSORSET [1,784] FLOAT → AI.MODELEXECUTE mlp → AI.TENSORGET BLOB [1,10], against the floor: Redis SET 3136 B → PING → GET 40 B (Redis's defaults: no append-only file). mlp runs on EnclaveAI's defaults (engine workers, sealed log fsynced every second), -off on a server with --engine-isolation off, -nolog on one with --appendonly no (like with like against the floor); batch32 is the model stored with BATCHSIZE 32; floor-ea is the floor's loop on EnclaveAI without the log (AI.TENSORSET of 3136 B, PING, AI.TENSORGET of 40 B: the front end's own cost); floor-go and floor-go-loop are the floor's loop on a Go server of this benchmark's that does nothing else (bench/loop/gofloor.go), with a goroutine per connection as EnclaveAI's front end has, and with one thread waiting in epoll for every connection as Redis does: what the loop's round trips cost a server because it is written in Go that way. ")
		p("%d rounds of %s (after %s unrecorded) per kind and client count; loops/s is the median over rounds, x floor the median of each round's ratio to the floor run beside it, p50/p99 are over every loop of every round; server CPU is the CPU time the server process, its engine workers included (Redis for the floor), used per loop, a figure that other load on the machine disturbs little; clients CPU is this benchmark's own (the go-redis clients).\n\n", r.o.rounds, r.o.dur, r.o.warm)
		p("| clients | kind | loops/s | x floor | p50 µs | p99 µs | p99 / floor p99 | server CPU µs/loop | clients CPU µs/loop |\n|---:|---|---:|---:|---:|---:|---:|---:|---:|\n")
		for _, c := range r.o.clients {
			fl := merge(l.by[loopKey("floor", c)])
			for _, k := range r.o.kinds {
				ss := l.by[loopKey(k, c)]
				m := merge(ss)
				x := r.ratio(k, c)
				name := k
				if k == "floor" {
					name = "floor (Redis)"
				}
				p("| %d | %s | %.0f | %.2f | %.0f | %.0f | %.2f | %.1f | %.1f |\n", c, name, medianRate(ss), x,
					us(m.pct(0.5)), us(m.pct(0.99)), us(m.pct(0.99))/us(fl.pct(0.99)), us(medianCPU(ss)), us(medianClientCPU(ss)))
			}
		}
		r.allowance(p)
		add := func(kind string, c int, goal float64) {
			if !slices.Contains(r.o.clients, c) || !slices.Contains(r.o.kinds, kind) || !slices.Contains(r.o.kinds, "floor") {
				return
			}
			x := r.ratio(kind, c)
			targets = append(targets, target{fmt.Sprintf("%s at %d clients ≥ %.2fx floor", kind, c, goal), fmt.Sprintf("%.2fx", x), bnd.loop(kind, c, goal), x >= goal})
		}
		for _, t := range loopTargets {
			add(t.kind, t.clients, t.goal)
		}
		if slices.Contains(r.o.clients, 32) && slices.Contains(r.o.kinds, "floor") {
			fl := merge(l.by[loopKey("floor", 32)])
			for _, k := range []string{"mlp", "mlp-batch32"} {
				if !slices.Contains(r.o.kinds, k) {
					continue
				}
				m := merge(l.by[loopKey(k, 32)])
				x := us(m.pct(0.99)) / us(fl.pct(0.99))
				targets = append(targets, target{k + " p99 at 32 clients ≤ 2x floor's p99", fmt.Sprintf("%.2fx (%.0f / %.0f µs)", x, us(m.pct(0.99)), us(fl.pct(0.99))), "", x <= 2})
			}
		}
	}
	if m := r.mach; m != nil {
		p("\nThe machine's own costs, the floor under every round trip here (section machine; medians of %d batches): one system call (getppid) %.2f µs; a page's first write (a minor fault) %.1f µs. A round trip of one byte over two pipes, with plain blocking reads and writes, loops in C (the kernel's cost) and in Go on locked threads (with the Go runtime's entry and exit around each call):\n\n",
			machineRounds, m.syscallNs/1000, m.faultUs)
		p("| round trip | µs | CPU µs, both ends |\n|---|---:|---:|\n")
		for _, k := range tripKinds {
			p("| %s | %.1f | %.1f |\n", k, m.trip[k], m.tripCPU[k])
		}
	}
	if l := r.lat; l != nil {
		p("\nLatency, one connection, one call at a time (%d calls of each kind in 4 alternating blocks): ort is the model run in the benchmark's own process through onnxruntime_go (ORT's default options: all optimizations, a spinning pool of one thread per core; ort-1thr: 1 intra-op thread; ort-1thr-b32: the same, a batch of 32 rows a call; ort-b32: ORT's default options, a batch of 32 rows a call; ort-1thr-idle: ort-1thr, each call after an untimed 100 µs sleep, as a server's thread runs a model after waiting for the network; ort-2thr-nospin: 2 intra-op threads that do not spin, the server's policy), tensors allocated once. CPU is the CPU time a call (the median over blocks): the calling thread's for ort-1thr and ort-1thr-b32, which ORT runs on the calling thread, and this process's for ort, ort-b32 and ort-2thr-nospin, their pools' spinning included.\n\n", r.o.latencyN)
		p("| kind | p50 µs | p99 µs | CPU µs a call |\n|---|---:|---:|---:|\n")
		for _, k := range l.kinds {
			s := l.by[k]
			c := "–"
			if s.cpuPerOp > 0 {
				c = fmt.Sprintf("%.1f", us(s.cpuPerOp))
			}
			p("| %s | %.1f | %.1f | %s |\n", k, us(s.pct(0.5)), us(s.pct(0.99)), c)
		}
		me, ping, ort := us(l.by["MODELEXECUTE"].pct(0.5)), us(l.by["PING"].pct(0.5)), us(l.by["ort"].pct(0.5))
		nospin := min(us(l.by["ort-1thr"].pct(0.5)), us(l.by["ort-2thr-nospin"].pct(0.5)))
		targets = append(targets, target{"MODELEXECUTE p50 ≤ PING p50 + ort p50 + 20 µs",
			fmt.Sprintf("%.1f ≤ %.1f + %.1f + 20 = %.1f µs", me, ping, ort, ping+ort+20), bnd.modelExecute(ping, ort, nospin), me <= ping+ort+20})
		meOff := us(l.by["MODELEXECUTE-off"].pct(0.5))
		targets = append(targets, target{"the engine wall adds ≤ 15 µs to MODELEXECUTE p50 (issue 18)",
			fmt.Sprintf("%.1f − %.1f = %.1f µs", me, meOff, me-meOff), bnd.wall(), me-meOff <= 15})
	}
	if t := r.tf; t != nil {
		p("\nTransformer (input FLOAT %v): in this process back to back with 1 and 2 intra-op threads, and the loop above through the server at 1 and 8 clients. Rates are medians over %d rounds.\n\n", t.shape, len(t.by["ort-1thr"]))
		p("| kind | runs/s | p50 ms | p99 ms |\n|---|---:|---:|---:|\n")
		for _, k := range t.kinds {
			m := merge(t.by[k])
			p("| %s | %.1f | %.2f | %.2f |\n", k, medianRate(t.by[k]), us(m.pct(0.5))/1000, us(m.pct(0.99))/1000)
		}
		s8, o2 := medianRate(t.by["server-8"]), medianRate(t.by["ort-2thr"])
		targets = append(targets, target{"transformer, 8 clients ≥ in-process 2 threads",
			fmt.Sprintf("%.1f vs %.1f runs/s (%.2fx)", s8, o2, s8/o2), "", s8 >= o2})
	}
	if c := r.core; c != nil {
		p("\nTensors against Redis strings: `redis-benchmark -n %d -c %d -P %d` of AI.TENSORSET t FLOAT 784 BLOB <3136 B> / AI.TENSORGET t BLOB against SET t <3136 B> / GET t, %d rounds alternating; medians, and x the median of per-round ratios. Like with like: both without a log (EnclaveAI `--appendonly no`, Redis `--appendonly no`), both with their append-only log fsynced every second (EnclaveAI's default, sealed; Redis `--appendonly yes --appendfsync everysec`), and both without a log over TLS (redis-benchmark `--tls`; EnclaveAI's `--tls-port`, Redis's with a self-signed certificate; no target, the way an attested client talks to EnclaveAI). CPU is the server's (its threads' schedstat, engine workers included) and redis-benchmark's own (its user and system time), a request, medians over rounds: redis-benchmark drives the load from one thread, so where it uses more CPU a request than either server, the rates are mostly its own.\n\n",
			c.requests, c.clients, c.pipeline, len(c.by["redis SET"]))
		p("| operation | log | Redis ops/s | EnclaveAI ops/s | x | CPU µs a request, Redis / redis-benchmark | CPU µs a request, EnclaveAI / redis-benchmark |\n|---|---|---:|---:|---:|---:|---:|\n")
		for _, pair := range [][3]string{{"redis", "enclaveai", "none"}, {"redis-aof", "enclaveai-log", "everysec"}, {"redis-tls", "enclaveai-tls", "none, TLS"}} {
			for _, op := range []string{"SET", "GET"} {
				rk, ek := pair[0]+" "+op, pair[1]+" "+op
				x := c.ratio(pair[0], pair[1], op)
				rs, rc, es, ec := median(c.serverCPU[rk]), median(c.clientCPU[rk]), median(c.serverCPU[ek]), median(c.clientCPU[ek])
				p("| %s / TENSOR%s | %s | %.0f | %.0f | %.2f | %.2f / %.2f | %.2f / %.2f |\n", op, op, pair[2], median(c.by[rk]), median(c.by[ek]), x, rs, rc, es, ec)
				if pair[0] != "redis-tls" {
					bound := ""
					if min(rc, ec) > max(rs, es) {
						bound = fmt.Sprintf("the client's: redis-benchmark's one thread used %.2f and %.2f µs a request against Redis and EnclaveAI, more than either server (%.2f, %.2f): the rate is mostly the client's", rc, ec, rs, es)
					}
					targets = append(targets, target{"TENSOR" + op + " ≥ 1.0x Redis " + op + ", log " + pair[2] + " on both", fmt.Sprintf("%.2fx", x), bound, x >= 1})
				}
			}
		}
	}
	if len(targets) > 0 {
		p("\nBounds: what no server could do better on this machine, from this run's figures, each the cheapest measured. At 32 clients, where the CPUs are the limit, a loop costs a server at least the floor's server CPU (Redis's own three round trips of the same sizes), plus the model's run at its cheapest in CPU (the least of ort-1thr's, ort's and ort-2thr-nospin's; of ort-1thr-b32's and ort-b32's over 32 rows for a batched kind, as if every batch were full: a pool's run can be the cheapest), plus, with the engine wall, the cheaper process round trip's CPU (section machine; over 32 rows batched); a target allows at most (the floor's server and clients CPU) / goal − the floor's clients CPU (clients as cheap as Redis's). At 1 client a loop takes at least the floor's loop (1 / its loops/s), the faster of ort's and ort-1thr's p50 and, with the wall, the cheaper process round trip, for a server that sleeps while it waits, as Redis does: waking a sleeping thread on an idle CPU is dear here, and a server that polls can do better. The log's cost is left out. A target whose bound misses it by more than 5%% is out of reach here, whatever the server does; within 5%% either way it is at the edge (these figures are as noisy as the ones they bound); one not ruled out may still be out of reach. Where floor-go and floor-ea ran, a 32-client bound adds what a server with a goroutine per connection, as EnclaveAI's front end is, allows at best, and then what EnclaveAI's own front end allows: the same sum with floor-go's, then floor-ea's, server CPU in place of the floor's (floor-ea's is what the loop's three round trips cost this server, which no inference can lower; the verdict stays the machine's).\n")
		p("\n| target (issue 9) | measured | met | this machine's bound |\n|---|---|---|---|\n")
		for _, t := range targets {
			met := "no"
			if t.met {
				met = "yes"
			}
			bound := t.bound
			if bound == "" {
				bound = "none"
			}
			p("| %s | %s | %s | %s |\n", t.what, t.measured, met, bound)
		}
	}
	for _, n := range r.notes {
		p("\nNote: %s\n", n)
	}
	p("%s\n", endMarker)
	return b.String()
}

// ratio is the median over rounds of kind's loops/s over the floor's at
// the same client count in the same round.
func (r *report) ratio(kind string, clients int) float64 {
	ks, fs := r.loops.by[loopKey(kind, clients)], r.loops.by[loopKey("floor", clients)]
	var xs []float64
	for i := range min(len(ks), len(fs)) {
		xs = append(xs, ks[i].rate()/fs[i].rate())
	}
	if len(xs) == 0 {
		return 0
	}
	return median(xs)
}

// ratio is the median over rounds of server b's rate of op over server a's.
func (c *core) ratio(a, b, op string) float64 {
	e, r := c.by[b+" "+op], c.by[a+" "+op]
	var xs []float64
	for i := range min(len(e), len(r)) {
		xs = append(xs, e[i]/r[i])
	}
	return median(xs)
}

// allowance writes, for the 32-client targets, the server CPU per loop
// each one leaves this server on this machine: where the machine is the
// bound (every CPU busy, as at 32 clients), a loop costs the server's CPU
// plus the clients', so a kind reaches goal times the floor's rate if its
// server and clients together spend no more than the floor's server and
// clients did, divided by goal. It assumes the machine as busy in both runs.
func (r *report) allowance(p func(string, ...any)) {
	l := r.loops
	if !slices.Contains(r.o.clients, 32) || !slices.Contains(r.o.kinds, "floor") {
		return
	}
	fl := l.by[loopKey("floor", 32)]
	floor := us(medianCPU(fl)) + us(medianClientCPU(fl))
	var lines []string
	for _, t := range loopTargets {
		ss := l.by[loopKey(t.kind, t.clients)]
		if t.clients != 32 || len(ss) == 0 {
			continue
		}
		client := us(medianClientCPU(ss))
		lines = append(lines, fmt.Sprintf("%s (%.2gx): %.1f / %.2g − %.1f = %.1f µs, against %.1f",
			t.kind, t.goal, floor, t.goal, client, floor/t.goal-client, us(medianCPU(ss))))
	}
	if len(lines) > 0 {
		p("\nWhat the 32-client targets leave the server, with every CPU busy as in the floor's run: (the floor's server and clients CPU per loop) / goal − this kind's clients CPU per loop, against the server CPU it used: %s.\n", strings.Join(lines, "; "))
	}
}

// medianClientCPU is the median over rounds of the clients' CPU per loop.
func medianClientCPU(ss []sample) time.Duration {
	xs := make([]float64, len(ss))
	for i, s := range ss {
		xs[i] = float64(s.clientPerOp)
	}
	return time.Duration(median(xs))
}

// medianCPU is the median over rounds of the server's CPU per loop.
func medianCPU(ss []sample) time.Duration {
	xs := make([]float64, len(ss))
	for i, s := range ss {
		xs[i] = float64(s.cpuPerOp)
	}
	return time.Duration(median(xs))
}

func medianRate(ss []sample) float64 {
	xs := make([]float64, len(ss))
	for i, s := range ss {
		xs[i] = s.rate()
	}
	return median(xs)
}

func commit() string {
	out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "?"
	}
	c := strings.TrimSpace(string(out))
	if st, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(st) > 0 {
		c += " with uncommitted changes"
	}
	return c
}

func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "?"
	}
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "?"
}

// The report's place in docs/BENCHMARKS.md: between the markers, inside
// the section with this heading. What the section says outside the
// markers (how to read the figures, the profiles) is written by hand and
// kept.
const (
	sectionHeading = "## Inference loop: MODELEXECUTE against Redis round trips"
	beginMarker    = "<!-- bench/loop: figures from here are rewritten by `make bench-loop` -->"
	endMarker      = "<!-- bench/loop: end of figures -->"
)

// writeSection puts text (which carries the markers) in place of the
// marked part of the section, adding the section or the marked part at
// its end when missing.
func writeSection(path, text string) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	doc := string(raw)
	text = strings.TrimRight(text, "\n")
	if i := strings.Index(doc, beginMarker); i >= 0 {
		j := strings.Index(doc[i:], endMarker)
		if j < 0 {
			return fmt.Errorf("%s: %q without %q", path, beginMarker, endMarker)
		}
		doc = doc[:i] + text + doc[i+j+len(endMarker):]
	} else if i := strings.Index(doc, "\n"+sectionHeading+"\n"); i >= 0 {
		end := len(doc)
		if j := strings.Index(doc[i+1+len(sectionHeading):], "\n## "); j >= 0 {
			end = i + 1 + len(sectionHeading) + j + 1
		}
		doc = strings.TrimRight(doc[:end], "\n") + "\n\n" + text + "\n\n" + strings.TrimLeft(doc[end:], "\n")
	} else {
		doc = strings.TrimRight(doc, "\n") + "\n\n" + sectionHeading + "\n\n" + text + "\n"
	}
	return os.WriteFile(path, []byte(doc), 0o644)
}
