//go:build cgo && !noort

package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/enclaveai/enclaveai/bench/benchproc"

	"github.com/redis/go-redis/v9"
)

// sample is what one measurement gives: a count of operations over a
// number of seconds, and the latency of each.
type sample struct {
	ops  int
	secs float64
	lat  []time.Duration
	// cpuPerOp is the server's CPU time per operation, recorded ones or
	// not (0: not measured); clientPerOp is this process's (the clients').
	cpuPerOp, clientPerOp time.Duration
}

func (s sample) rate() float64 { return float64(s.ops) / s.secs }

// merge pools the latencies of several samples (for percentiles over
// every round).
func merge(ss []sample) sample {
	var m sample
	for _, s := range ss {
		m.ops += s.ops
		m.secs += s.secs
		m.lat = append(m.lat, s.lat...)
	}
	slices.Sort(m.lat)
	return m
}

// pct is the nearest-rank percentile q of the (sorted) latencies.
func (s sample) pct(q float64) time.Duration {
	if len(s.lat) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(s.lat)))) - 1
	return s.lat[max(i, 0)]
}

// body is one iteration of a loop on a connection; id tells the clients
// apart (each has keys of its own).
type body func(ctx context.Context, c *redis.Conn, id int) error

// runLoop runs body on `clients` connections at once for warm+dur and
// records the iterations that started after warm and ended within dur;
// srv (if not nil) is the server, whose CPU time per iteration it records.
func runLoop(addr string, srv *benchproc.Proc, clients int, warm, dur time.Duration, f body) (sample, error) {
	ctx := context.Background()
	cl := redis.NewClient(&redis.Options{Addr: addr, Protocol: 2, PoolSize: clients, MaxRetries: -1,
		ReadTimeout: 30 * time.Second, WriteTimeout: 30 * time.Second, ContextTimeoutEnabled: false})
	defer cl.Close()
	conns := make([]*redis.Conn, clients)
	for i := range conns {
		conns[i] = cl.Conn()
		defer conns[i].Close()
		if err := conns[i].Ping(ctx).Err(); err != nil {
			return sample{}, err
		}
	}
	var cpu0 time.Duration
	if srv != nil {
		cpu0 = cpu(srv)
	}
	self0 := cpuOf(os.Getpid())
	start := time.Now()
	from, until := start.Add(warm), start.Add(warm+dur)
	lats := make([][]time.Duration, clients)
	counts := make([]int, clients)
	errs := make([]error, clients)
	var wg sync.WaitGroup
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lat := make([]time.Duration, 0, 1<<14)
			for {
				t0 := time.Now()
				if err := f(ctx, conns[i], i); err != nil {
					errs[i] = err
					return
				}
				t1 := time.Now()
				counts[i]++
				if t1.After(until) {
					break
				}
				if !t0.Before(from) {
					lat = append(lat, t1.Sub(t0))
				}
			}
			lats[i] = lat
		}()
	}
	wg.Wait()
	var s sample
	if srv != nil {
		all := 0
		for _, n := range counts {
			all += n
		}
		s.cpuPerOp = (cpu(srv) - cpu0) / time.Duration(max(all, 1))
		s.clientPerOp = (cpuOf(os.Getpid()) - self0) / time.Duration(max(all, 1))
	}
	for i := range clients {
		if errs[i] != nil {
			return sample{}, fmt.Errorf("client %d: %w", i, errs[i])
		}
		s.lat = append(s.lat, lats[i]...)
	}
	s.ops, s.secs = len(s.lat), dur.Seconds()
	slices.Sort(s.lat)
	return s, nil
}

// timeCalls runs f n times, one at a time, after pause (untimed, if not
// nil), and records each call's latency; secs is their total time.
func timeCalls(n int, pause func(), f func() error) (sample, error) {
	s := sample{lat: make([]time.Duration, 0, n)}
	t := time.Now()
	for range n {
		if pause != nil {
			pause()
		}
		t0 := time.Now()
		if err := f(); err != nil {
			return sample{}, err
		}
		s.lat = append(s.lat, time.Since(t0))
	}
	s.ops, s.secs = n, time.Since(t).Seconds()
	slices.Sort(s.lat)
	return s, nil
}

// timeFor runs f back to back for warm+dur and counts the calls that
// started after warm and ended within dur (in-process throughput).
func timeFor(warm, dur time.Duration, f func() error) (sample, error) {
	start := time.Now()
	from, until := start.Add(warm), start.Add(warm+dur)
	var s sample
	for {
		t0 := time.Now()
		if err := f(); err != nil {
			return sample{}, err
		}
		t1 := time.Now()
		if t1.After(until) {
			break
		}
		if !t0.Before(from) {
			s.lat = append(s.lat, t1.Sub(t0))
		}
	}
	s.ops, s.secs = len(s.lat), dur.Seconds()
	slices.Sort(s.lat)
	return s, nil
}

var rpsLine = regexp.MustCompile(`: ([0-9.]+) requests per second`)

// redisBenchmark runs redis-benchmark against port (over TLS when tls)
// and returns its rate and the CPU time it used itself; -q redraws its
// line with carriage returns, the last figure is final.
func redisBenchmark(port string, tls bool, requests, clients, pipeline int, args ...string) (float64, time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	full := []string{"-h", "127.0.0.1", "-p", port, "-n", strconv.Itoa(requests),
		"-c", strconv.Itoa(clients), "-P", strconv.Itoa(pipeline), "-q"}
	if tls {
		full = append(full, "--tls", "--insecure") // the servers' own certificates
	}
	full = append(full, args...)
	cmd := exec.CommandContext(ctx, "redis-benchmark", full...)
	out, err := cmd.Output()
	if err != nil {
		return 0, 0, fmt.Errorf("redis-benchmark %s: %w", args[0], err)
	}
	used := cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	m := rpsLine.FindAllStringSubmatch(strings.ReplaceAll(string(out), "\r", "\n"), -1)
	if len(m) == 0 {
		return 0, 0, fmt.Errorf("redis-benchmark %s gave no figure: %q", args[0], out)
	}
	rps, err := strconv.ParseFloat(m[len(m)-1][1], 64)
	return rps, used, err
}

// median of a list (NaN when empty).
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if n := len(s); n%2 == 1 {
		return s[n/2]
	} else {
		return (s[n/2-1] + s[n/2]) / 2
	}
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
