//go:build cgo && !noort

// Command latency measures the latency of AI.MODELEXECUTE against running
// the same model directly through ONNX Runtime in this process, and against
// a loopback PING, all in one run so that the machine's state (its load,
// its clock speed) is the same for every figure. `make bench` runs it; the
// figures it prints go into docs/BENCHMARKS.md.
//
// Usage:
//
//	latency [-model redis_tests/models/mlp.onnx] [-n 2000] [-warmup 200]
//	        [-server bin/enclaveai-server | -addr 127.0.0.1:6379]
//
// It times, one call at a time, batch 1 (a FLOAT 1x784 input):
//
//   - ort: onnxruntime_go's DynamicAdvancedSession.Run with tensors
//     allocated once, the least any Go program can pay per inference;
//   - modelstore: modelstore.Session.Run, the call the server makes (it
//     wraps the input and copies the output each time);
//   - modelstore+5s: the same under a 5 s deadline, as the server runs it
//     (MODEL_EXECUTION_TIMEOUT);
//   - modelstore-idle: the same after an untimed 100 µs sleep each time.
//     Back-to-back runs find ORT's pool threads still spinning and the CPU
//     awake; a server's runs, one per round trip, do not, and this shows
//     what that alone costs;
//   - MODELEXECUTE: one client, one go-redis connection, one command in
//     flight: AI.MODELEXECUTE m INPUTS 1 x OUTPUTS 1 y on the server, which
//     it starts on a free 127.0.0.1 port unless -addr is given;
//   - PING on the same connection: the round trip without any work;
//   - MODELEXECUTE-off and PING-off: the same on a second server started
//     with engine-isolation off (ONNX Runtime in the server process), so
//     that the engine wall's cost per run is their difference (only when
//     the tool starts the servers itself).
//
// Both sessions use the options AI.MODELSTORE uses by default (all graph
// optimizations, ORT's default thread pools), so the server's extra cost
// is protocol, copying and scheduling, not a different model plan.
//
// Each kind is timed in rounds (n/rounds calls each, kinds taking turns),
// so that a burst of load elsewhere on the machine spreads over all of
// them instead of landing on one; every turn begins with a few unrecorded
// calls because the in-process ORT threads spin for a while after a run
// and would otherwise slow the server's first calls.
package main

import (
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"slices"
	"time"

	"github.com/enclaveai/enclaveai/bench/benchproc"

	"github.com/redis/go-redis/v9"
	ort "github.com/yalue/onnxruntime_go"

	"github.com/enclaveai/enclaveai/modelstore"
)

const (
	inputLen  = 784
	outputLen = 10
	// turnWarmup calls start every turn unrecorded (see the package doc).
	turnWarmup = 20
	// execTimeout is the server's default MODEL_EXECUTION_TIMEOUT.
	execTimeout = 5 * time.Second
	// idleGap is the pause before each modelstore-idle call: about the
	// time a server's session sits idle between one client's commands.
	idleGap = 100 * time.Microsecond
)

func main() {
	var (
		model   = flag.String("model", "redis_tests/models/mlp.onnx", "ONNX model: one FLOAT [N,784] input, one [N,10] output")
		n       = flag.Int("n", 2000, "timed calls of each kind")
		warmup  = flag.Int("warmup", 200, "untimed calls of each kind before the first round")
		rounds  = flag.Int("rounds", 4, "rounds the timed calls are split into")
		binPath = flag.String("server", "bin/enclaveai-server", "server binary to start on a free port")
		addr    = flag.String("addr", "", "use the server at this address instead of starting one")
		lib     = flag.String("lib", "", "ONNX Runtime library (default: modelstore.FindRuntimeLibrary)")
	)
	flag.Parse()
	// go-redis logs every refused dial, which benchproc.Start's polling for
	// readiness expects; errors that matter are returned and reported.
	redis.SetLogger(quiet{})
	if *n < *rounds || *rounds < 1 || *warmup < 0 {
		fatal(errors.New("need n >= rounds >= 1 and warmup >= 0"))
	}
	if err := run(*model, *n, *warmup, *rounds, *binPath, *addr, *lib); err != nil {
		fatal(err)
	}
}

type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "latency:", err)
	os.Exit(1)
}

// kind is one way of running the model (or PING), timed by call.
type kind struct {
	name string
	// pause, when set, runs untimed before every call.
	pause func()
	call  func() error
	lat   []time.Duration
}

func run(modelPath string, n, warmup, rounds int, binPath, addr, lib string) error {
	onnx, err := os.ReadFile(modelPath)
	if err != nil {
		return err
	}
	input := make([]float32, inputLen)
	for i := range input {
		input[i] = float32(i%17) / 17 // any fixed values: the cost does not depend on them
	}
	blob := make([]byte, 4*inputLen)
	for i, v := range input {
		binary.LittleEndian.PutUint32(blob[4*i:], math.Float32bits(v))
	}

	libPath, err := modelstore.FindRuntimeLibrary(lib)
	if err != nil {
		return err
	}
	if err := modelstore.InitRuntime(libPath); err != nil {
		return err
	}
	raw, closeRaw, err := rawORT(onnx, input)
	if err != nil {
		return err
	}
	defer closeRaw()
	direct, directTimed, want, closeDirect, err := modelstoreRun(onnx, blob)
	if err != nil {
		return err
	}
	defer closeDirect()

	ctx := context.Background()
	var connOff *redis.Conn // the server with engine-isolation off, if started
	if addr == "" {
		srv, err := benchproc.Start("enclaveai-server", binPath, nil)
		if err != nil {
			return err
		}
		defer srv.Stop()
		addr = srv.Addr
		off, err := benchproc.Start("enclaveai-server", binPath, nil, "--engine-isolation", "off")
		if err != nil {
			return err
		}
		defer off.Stop()
		clientOff := redis.NewClient(&redis.Options{Addr: off.Addr, Protocol: 2, PoolSize: 1})
		defer clientOff.Close()
		connOff = clientOff.Conn()
		defer connOff.Close()
		if err := connOff.Do(ctx, "AI.MODELSTORE", "bench:mlp", "ONNX", "CPU", "BLOB", onnx).Err(); err != nil {
			return fmt.Errorf("AI.MODELSTORE: %w", err)
		}
		if err := connOff.Do(ctx, "AI.TENSORSET", "bench:x", "FLOAT", 1, inputLen, "BLOB", blob).Err(); err != nil {
			return fmt.Errorf("AI.TENSORSET: %w", err)
		}
	}
	// Protocol 2: the RESP2 replies redis-benchmark and most clients read.
	client := redis.NewClient(&redis.Options{Addr: addr, Protocol: 2, PoolSize: 1})
	defer client.Close()
	conn := client.Conn() // one connection for everything below
	defer conn.Close()
	if err := conn.Do(ctx, "AI.MODELSTORE", "bench:mlp", "ONNX", "CPU", "BLOB", onnx).Err(); err != nil {
		return fmt.Errorf("AI.MODELSTORE: %w", err)
	}
	if err := conn.Do(ctx, "AI.TENSORSET", "bench:x", "FLOAT", 1, inputLen, "BLOB", blob).Err(); err != nil {
		return fmt.Errorf("AI.TENSORSET: %w", err)
	}
	kinds := []*kind{
		{name: "ort", call: raw},
		{name: "modelstore", call: direct},
		{name: "modelstore+5s", call: directTimed},
		{name: "modelstore-idle", pause: func() { time.Sleep(idleGap) }, call: direct},
		{name: "MODELEXECUTE", call: func() error {
			return conn.Do(ctx, "AI.MODELEXECUTE", "bench:mlp", "INPUTS", 1, "bench:x", "OUTPUTS", 1, "bench:y").Err()
		}},
		{name: "PING", call: func() error { return conn.Ping(ctx).Err() }},
	}
	if connOff != nil {
		kinds = append(kinds, &kind{name: "MODELEXECUTE-off", call: func() error {
			return connOff.Do(ctx, "AI.MODELEXECUTE", "bench:mlp", "INPUTS", 1, "bench:x", "OUTPUTS", 1, "bench:y").Err()
		}}, &kind{name: "PING-off", call: func() error { return connOff.Ping(ctx).Err() }})
	}
	for _, k := range kinds {
		for range warmup {
			if err := k.once(); err != nil {
				return fmt.Errorf("%s: %w", k.name, err)
			}
		}
	}
	// The server must have computed what the model computes here: a wrong
	// reply timed fast would be no figure at all.
	got, err := conn.Do(ctx, "AI.TENSORGET", "bench:y", "BLOB").Text()
	if err != nil {
		return fmt.Errorf("AI.TENSORGET: %w", err)
	}
	if err := benchproc.SameFloats([]byte(got), want); err != nil {
		return fmt.Errorf("server output differs from the direct run: %w", err)
	}

	for r := range rounds {
		per := n / rounds
		if r == rounds-1 {
			per = n - per*(rounds-1)
		}
		for _, k := range kinds {
			if err := k.time(per); err != nil {
				return err
			}
		}
	}
	report(kinds, n, warmup, rounds, modelPath)
	return nil
}

// time records per calls after turnWarmup unrecorded ones.
func (k *kind) time(per int) error {
	for range turnWarmup {
		if err := k.once(); err != nil {
			return fmt.Errorf("%s: %w", k.name, err)
		}
	}
	for range per {
		if k.pause != nil {
			k.pause()
		}
		t0 := time.Now()
		err := k.call()
		d := time.Since(t0)
		if err != nil {
			return fmt.Errorf("%s: %w", k.name, err)
		}
		k.lat = append(k.lat, d)
	}
	return nil
}

// once makes one untimed call, after the pause if there is one.
func (k *kind) once() error {
	if k.pause != nil {
		k.pause()
	}
	return k.call()
}

// rawORT returns a call that runs the model through onnxruntime_go with
// its input and output tensors allocated once, as a program that owns its
// buffers would.
func rawORT(onnx []byte, input []float32) (call func() error, closeFn func(), err error) {
	in, err := ort.NewTensor(ort.NewShape(1, inputLen), slices.Clone(input))
	if err != nil {
		return nil, nil, err
	}
	out, err := ort.NewEmptyTensor[float32](ort.NewShape(1, outputLen))
	if err != nil {
		in.Destroy()
		return nil, nil, err
	}
	opts, err := ort.NewSessionOptions()
	if err != nil {
		return nil, nil, err
	}
	defer opts.Destroy()
	// AI.MODELSTORE's default (OPTIMIZE 1) is ORT's full optimization.
	if err := opts.SetGraphOptimizationLevel(ort.GraphOptimizationLevelEnableAll); err != nil {
		return nil, nil, err
	}
	sess, err := ort.NewDynamicAdvancedSessionWithONNXData(onnx, []string{"x"}, []string{"y"}, opts)
	if err != nil {
		in.Destroy()
		out.Destroy()
		return nil, nil, err
	}
	ins, outs := []ort.Value{in}, []ort.Value{out}
	call = func() error { return sess.Run(ins, outs) }
	return call, func() { sess.Destroy(); in.Destroy(); out.Destroy() }, nil
}

// modelstoreRun returns a call that runs the model as the server does, and
// the output of one such run (the reference for the server's reply).
func modelstoreRun(onnx, blob []byte) (call, timed func() error, want []byte, closeFn func(), err error) {
	sess, err := modelstore.NewSession(onnx, modelstore.SessionOptions{Optimize: true})
	if err != nil {
		return nil, nil, nil, nil, err
	}
	in, err := modelstore.NewTensorFromBlob(modelstore.Float, []int64{1, inputLen}, blob)
	if err != nil {
		sess.Close()
		return nil, nil, nil, nil, err
	}
	inputs := []*modelstore.Tensor{in}
	ctx := context.Background()
	outs, err := sess.Run(ctx, inputs)
	if err != nil {
		sess.Close()
		return nil, nil, nil, nil, err
	}
	call = func() error { _, err := sess.Run(ctx, inputs); return err }
	// The server runs each model under MODEL_EXECUTION_TIMEOUT (5 s by
	// default): a context with a deadline, which makes Run create ORT run
	// options and arm a terminate callback per call. Timed separately so
	// that this cost shows on its own.
	timed = func() error {
		ctx, cancel := context.WithTimeout(ctx, execTimeout)
		defer cancel()
		_, err := sess.Run(ctx, inputs)
		return err
	}
	return call, timed, outs[0].Data, func() { sess.Close() }, nil
}

// stats are one kind's latency figures.
type stats struct{ p50, p99, mean, min time.Duration }

func summarize(lat []time.Duration) stats {
	s := slices.Clone(lat)
	slices.Sort(s)
	var sum time.Duration
	for _, d := range s {
		sum += d
	}
	return stats{p50: rank(s, 0.50), p99: rank(s, 0.99), mean: sum / time.Duration(len(s)), min: s[0]}
}

// rank is the nearest-rank percentile q of sorted durations.
func rank(sorted []time.Duration, q float64) time.Duration {
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[max(i, 0)]
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// report prints a table for people and RESULT lines for bench/run.sh.
func report(kinds []*kind, n, warmup, rounds int, modelPath string) {
	fmt.Printf("model %s, batch 1, one call at a time: %d timed calls per kind (%d rounds), after %d warm-up\n",
		modelPath, n, rounds, warmup)
	fmt.Printf("ONNX Runtime %s, GOMAXPROCS of this process %s\n", modelstore.RuntimeVersion(), envOr("GOMAXPROCS", "default"))
	fmt.Printf("%-16s %10s %10s %10s %10s\n", "kind", "p50 us", "p99 us", "mean us", "min us")
	st := map[string]stats{}
	for _, k := range kinds {
		s := summarize(k.lat)
		st[k.name] = s
		fmt.Printf("%-16s %10.1f %10.1f %10.1f %10.1f\n", k.name, us(s.p50), us(s.p99), us(s.mean), us(s.min))
	}
	for _, k := range kinds {
		s := st[k.name]
		fmt.Printf("RESULT latency %s p50_us=%.1f p99_us=%.1f mean_us=%.1f\n", k.name, us(s.p50), us(s.p99), us(s.mean))
	}
	m, d, o, p, idle := st["MODELEXECUTE"], st["modelstore"], st["ort"], st["PING"], st["modelstore-idle"]
	fmt.Printf("MODELEXECUTE / modelstore: p50 %.2fx, p99 %.2fx\n", ratio(m.p50, d.p50), ratio(m.p99, d.p99))
	fmt.Printf("MODELEXECUTE / ort:        p50 %.2fx, p99 %.2fx\n", ratio(m.p50, o.p50), ratio(m.p99, o.p99))
	// What the server adds beyond running the model and the round trip,
	// against back-to-back runs and against runs after an idle pause.
	fmt.Printf("MODELEXECUTE - PING - modelstore, p50: %.1f us; - modelstore-idle instead: %.1f us\n",
		us(m.p50-p.p50-d.p50), us(m.p50-p.p50-idle.p50))
	fmt.Printf("RESULT ratio MODELEXECUTE/modelstore p50=%.2f p99=%.2f\n", ratio(m.p50, d.p50), ratio(m.p99, d.p99))
	fmt.Printf("RESULT ratio MODELEXECUTE/ort p50=%.2f p99=%.2f\n", ratio(m.p50, o.p50), ratio(m.p99, o.p99))
}

func ratio(a, b time.Duration) float64 { return float64(a) / float64(b) }

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
