//go:build cgo && !noort

// Command loop measures EnclaveAI's inference loop against the round trips
// of Redis itself, all in one run so that every ratio compares figures
// taken under the same machine state. `make bench-loop` runs it and
// rewrites its part of docs/BENCHMARKS.md.
//
// Usage:
//
//	loop [-server bin/enclaveai-server] [-model redis_tests/models/mlp.onnx]
//	     [-transformer redis_tests/models/transformer.onnx] [-clients 1,8,32]
//	     [-rounds 3] [-warm 500ms] [-dur 2s] [-sections latency,loop,transformer,core]
//	     [-doc docs/BENCHMARKS.md]
//
// It starts redis-server and the EnclaveAI server on free 127.0.0.1 ports
// (snapshots off) and measures, with go-redis v9 clients (RESP2, one
// connection per client, one command in flight per connection):
//
//   - loop: per client, AI.TENSORSET of a FLOAT [1,784] input, then
//     AI.MODELEXECUTE of mlp.onnx (784->512->512->10), then AI.TENSORGET
//     BLOB of the [1,10] output; with the model stored plain ("mlp") and
//     with BATCHSIZE 32 ("mlp-batch32"). Its floor is the same three round
//     trips of the same sizes on Redis: SET of 3136 bytes, PING, GET of 40
//     bytes. The "-off" kinds run the same loop on a second EnclaveAI
//     server started with --engine-isolation off (ONNX Runtime in the
//     server's process, no worker wall), for the wall's cost in the same
//     run; the "-nolog" kinds on a third started with --appendonly no
//     (the floor's Redis runs without its append-only file, Redis's
//     default, where EnclaveAI's default is its sealed log at everysec),
//     for the loop like with like; "floor-ea" is the floor's loop on that
//     third server (AI.TENSORSET, PING, AI.TENSORGET of the same sizes),
//     the network front end against Redis's; "floor-go" and
//     "floor-go-loop" the floor's loop on a Go server that does nothing
//     else, this binary re-executed (gofloor.go), with a goroutine per
//     connection and with one epoll loop. Each client count runs every
//     kind in turn, in rounds whose order alternates (ABBA), for -dur
//     after -warm each;
//   - machine: what this machine charges for the parts of any round trip,
//     with raw system calls on locked threads: a system call, a page's
//     first write (a minor fault), and a one-byte round trip over two
//     pipes between two threads and between two processes (this binary
//     re-executed as an echo), with the CPU the latter costs;
//   - latency: one connection, MODELEXECUTE (on both servers) and PING on
//     EnclaveAI one at a time, and the model run in this process through onnxruntime_go with
//     tensors allocated once (ORT's default options, and 1 intra-op
//     thread at batch 1 and at a full batch of 32, with the calling
//     thread's CPU time), in alternating blocks;
//   - transformer: the 4-layer transformer (`make models`) run in this
//     process back to back with 1 and with 2 intra-op threads, and the
//     same loop as above with it at 1 and 8 clients;
//   - core: redis-benchmark -c 50 -P 16 of AI.TENSORSET / AI.TENSORGET of
//     3136 bytes against Redis's SET / GET of the same bytes, alternating,
//     like with like: both without a log, and both with their append-only
//     log at appendfsync everysec (two more servers, started for it).
//
// The report ends with issue 9's targets, each with what this machine
// allows it at best from the same run's figures (bounds.go): which targets
// no server could meet here.
//
// The servers' environment is this process's: ENCLAVEAI_CPUPROFILE=file
// gets a CPU profile of each EnclaveAI server over the sections run, in
// file.default, file.off, file.nolog (and file.tls, section core), one
// for each (serverEnv).
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
	"strconv"
	"strings"
	"time"

	"github.com/enclaveai/enclaveai/bench/benchproc"

	"github.com/redis/go-redis/v9"

	"github.com/enclaveai/enclaveai/modelstore"
)

const (
	inputLen  = 784
	outputLen = 10
	batchSize = 32
)

type options struct {
	server, redisServer, model, transformer, lib, doc string
	clients                                           []int
	kinds                                             []string
	aiconfig                                          [][2]string
	serverEnv, serverArgs                             []string
	rounds                                            int
	warm, dur                                         time.Duration
	sections                                          map[string]bool
	latencyN, rbRequests                              int
}

// env is the environment of the EnclaveAI server named role: -server-env's
// settings, and a CPU profile file of its own when ENCLAVEAI_CPUPROFILE is
// set (the servers would otherwise all write the one file, and the last
// to stop would leave a mix of theirs).
func (o *options) env(role string) []string {
	env := slices.Clone(o.serverEnv)
	if path := os.Getenv("ENCLAVEAI_CPUPROFILE"); path != "" {
		env = append(env, "ENCLAVEAI_CPUPROFILE="+path+"."+role)
	}
	return env
}

func main() {
	runEcho()    // section machine's peer process, when it is one
	runGoFloor() // a Go floor's server, when it is one
	var o options
	var clients, sections, kinds, aiconfig, serverEnv, serverArgs string
	flag.StringVar(&o.server, "server", "bin/enclaveai-server", "EnclaveAI server binary")
	flag.StringVar(&o.redisServer, "redis-server", "redis-server", "Redis server binary (the floor)")
	flag.StringVar(&o.model, "model", "redis_tests/models/mlp.onnx", "ONNX model: one FLOAT [N,784] input, one [N,10] output")
	flag.StringVar(&o.transformer, "transformer", "redis_tests/models/transformer.onnx", "transformer model (section transformer; skipped if missing)")
	flag.StringVar(&o.lib, "lib", "", "ONNX Runtime library (default: modelstore.FindRuntimeLibrary)")
	flag.StringVar(&o.doc, "doc", "", "rewrite this file's section with the report (docs/BENCHMARKS.md)")
	flag.StringVar(&clients, "clients", "1,8,32", "client counts of the loop")
	flag.StringVar(&kinds, "kinds", strings.Join(loopKinds, ","), "kinds of loop to run (for profiling one)")
	flag.StringVar(&aiconfig, "aiconfig", "", "AI.CONFIG settings for the EnclaveAI server, NAME=VALUE,... (e.g. THREADS_PER_QUEUE=1)")
	flag.StringVar(&serverEnv, "server-env", "", "environment of the EnclaveAI server, NAME=VALUE,... (e.g. GOMAXPROCS=1)")
	flag.StringVar(&serverArgs, "server-args", "", "more arguments of the EnclaveAI server, space-separated (e.g. \"--engine-isolation off\")")
	flag.StringVar(&sections, "sections", "machine,latency,loop,transformer,core", "what to measure")
	flag.IntVar(&o.rounds, "rounds", 3, "rounds (each measures every kind once per client count)")
	flag.DurationVar(&o.warm, "warm", 500*time.Millisecond, "unrecorded start of each loop run")
	flag.DurationVar(&o.dur, "dur", 2*time.Second, "recorded time of each loop run")
	flag.IntVar(&o.latencyN, "latency-n", 2000, "timed calls of each kind in section latency")
	flag.IntVar(&o.rbRequests, "rb-requests", 200000, "requests of each redis-benchmark run in section core")
	flag.Parse()
	redis.SetLogger(quiet{})
	for _, f := range strings.Split(clients, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			fatal(fmt.Errorf("bad -clients %q", clients))
		}
		o.clients = append(o.clients, n)
	}
	for _, k := range strings.Split(kinds, ",") {
		if k = strings.TrimSpace(k); !slices.Contains(loopKinds, k) && !slices.Contains(extraKinds, k) {
			fatal(fmt.Errorf("unknown kind %q (%s)", k, strings.Join(loopKinds, ", ")))
		}
		o.kinds = append(o.kinds, k)
	}
	for _, kv := range strings.Split(aiconfig, ",") {
		if kv = strings.TrimSpace(kv); kv != "" {
			name, value, ok := strings.Cut(kv, "=")
			if !ok {
				fatal(fmt.Errorf("bad -aiconfig %q: want NAME=VALUE", kv))
			}
			o.aiconfig = append(o.aiconfig, [2]string{name, value})
		}
	}
	o.serverArgs = strings.Fields(serverArgs)
	if serverEnv != "" {
		o.serverEnv = strings.Split(serverEnv, ",")
	}
	o.sections = map[string]bool{}
	for _, s := range strings.Split(sections, ",") {
		switch s = strings.TrimSpace(s); s {
		case "machine", "latency", "loop", "transformer", "core":
			o.sections[s] = true
		default:
			fatal(fmt.Errorf("unknown section %q (machine, latency, loop, transformer, core)", s))
		}
	}
	if o.rounds < 1 {
		fatal(errors.New("-rounds must be at least 1"))
	}
	r, err := run(&o)
	if err != nil {
		fatal(err)
	}
	text := r.markdown()
	fmt.Print(text)
	if o.doc != "" {
		if err := writeSection(o.doc, text); err != nil {
			fatal(err)
		}
		fmt.Printf("\n(rewrote the loop figures in %s)\n", o.doc)
	}
}

type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "loop:", err)
	os.Exit(1)
}

// floatBlob is n float32 values as little-endian bytes.
func floatBlob(n int) ([]float32, []byte) {
	v := make([]float32, n)
	b := make([]byte, 4*n)
	for i := range v {
		v[i] = float32(i%17) / 17 // any fixed values: the cost does not depend on them
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v[i]))
	}
	return v, b
}

func run(o *options) (*report, error) {
	rep := &report{o: o, start: time.Now(), loadBefore: loadAvg()}
	onnx, err := os.ReadFile(o.model)
	if err != nil {
		return nil, err
	}
	_, blob := floatBlob(inputLen)
	libPath, err := modelstore.FindRuntimeLibrary(o.lib)
	if err != nil {
		return nil, err
	}
	if err := modelstore.InitRuntime(libPath); err != nil {
		return nil, err
	}
	rep.ortVersion = modelstore.RuntimeVersion()
	want, err := referenceOutput(onnx, blob)
	if err != nil {
		return nil, err
	}

	ea, err := benchproc.Start("enclaveai-server", o.server, o.env("default"), o.serverArgs...)
	if err != nil {
		return nil, err
	}
	defer ea.Stop()
	off, err := benchproc.Start("enclaveai-server", o.server, o.env("off"), append(slices.Clone(o.serverArgs), "--engine-isolation", "off")...)
	if err != nil {
		return nil, err
	}
	defer off.Stop()
	nolog, err := benchproc.Start("enclaveai-server", o.server, o.env("nolog"), append(slices.Clone(o.serverArgs), "--appendonly", "no")...)
	if err != nil {
		return nil, err
	}
	defer nolog.Stop()
	rd, err := benchproc.Start("redis-server", o.redisServer, nil, "--appendonly", "no")
	if err != nil {
		return nil, err
	}
	defer rd.Stop()
	rep.redisVersion = serverVersion(rd.Addr)

	for _, srv := range []*benchproc.Proc{ea, off, nolog} {
		if err := prepare(o, srv.Addr, onnx, blob, want); err != nil {
			return nil, err
		}
	}
	ctx := context.Background()
	floor := redis.NewClient(&redis.Options{Addr: rd.Addr, Protocol: 2})
	defer floor.Close()
	small := make([]byte, 4*outputLen)
	for i := range max(slices.Max(o.clients), 8) {
		if err := floor.Set(ctx, "g:"+strconv.Itoa(i), small, 0).Err(); err != nil {
			return nil, err
		}
	}

	runs, err := newModelRuns(onnx)
	if err != nil {
		return nil, err
	}
	defer runs.Close()

	if o.sections["machine"] {
		if rep.mach, err = measureMachine(); err != nil {
			return nil, fmt.Errorf("machine: %w", err)
		}
	}
	if o.sections["latency"] {
		if rep.lat, err = measureLatency(o, ea.Addr, off.Addr, runs, blob); err != nil {
			return nil, fmt.Errorf("latency: %w", err)
		}
	}
	if o.sections["loop"] {
		goFloors, err := startGoFloors(o.kinds, max(slices.Max(o.clients), 8))
		if err != nil {
			return nil, fmt.Errorf("loop: %w", err)
		}
		defer stopAll(goFloors)
		if rep.loops, err = measureLoops(o, ea, off, nolog, rd, goFloors, runs, blob); err != nil {
			return nil, fmt.Errorf("loop: %w", err)
		}
	}
	if o.sections["transformer"] {
		if _, err := os.Stat(o.transformer); err != nil {
			rep.notes = append(rep.notes, fmt.Sprintf("transformer skipped: %v (make models)", err))
		} else if rep.tf, err = measureTransformer(o, ea); err != nil {
			return nil, fmt.Errorf("transformer: %w", err)
		}
	}
	if o.sections["core"] {
		if rep.core, err = measureCore(o, ea, nolog, rd); err != nil {
			return nil, fmt.Errorf("core: %w", err)
		}
	}
	rep.end = time.Now()
	rep.loadAfter = loadAvg()
	return rep, nil
}

// prepare applies -aiconfig to the EnclaveAI server at addr and stores the
// loop's models there, checking that they compute what the model computes
// in this process: a wrong reply timed fast would be no figure at all.
func prepare(o *options, addr string, onnx, blob, want []byte) error {
	ctx := context.Background()
	admin := redis.NewClient(&redis.Options{Addr: addr, Protocol: 2})
	defer admin.Close()
	for _, kv := range o.aiconfig {
		if err := admin.Do(ctx, "AI.CONFIG", "SET", kv[0], kv[1]).Err(); err != nil {
			return fmt.Errorf("AI.CONFIG SET %s %s: %w", kv[0], kv[1], err)
		}
	}
	if err := admin.Do(ctx, "AI.MODELSTORE", "mlp", "ONNX", "CPU", "BLOB", onnx).Err(); err != nil {
		return fmt.Errorf("AI.MODELSTORE mlp: %w", err)
	}
	if err := admin.Do(ctx, "AI.MODELSTORE", "mlp-batch32", "ONNX", "CPU", "BATCHSIZE", batchSize, "BLOB", onnx).Err(); err != nil {
		return fmt.Errorf("AI.MODELSTORE mlp-batch32: %w", err)
	}
	for _, m := range []string{"mlp", "mlp-batch32"} {
		if err := checkOutput(ctx, admin, m, blob, want); err != nil {
			return fmt.Errorf("%s: %w", m, err)
		}
	}
	// floor-ea's AI.TENSORGETs read these, as the floor's GETs read
	// Redis's strings of the same size.
	for i := range max(slices.Max(o.clients), 8) {
		if err := admin.Do(ctx, "AI.TENSORSET", "g:"+strconv.Itoa(i), "FLOAT", 1, outputLen, "BLOB", make([]byte, 4*outputLen)).Err(); err != nil {
			return err
		}
	}
	return nil
}

func serverVersion(addr string) string {
	c := redis.NewClient(&redis.Options{Addr: addr, Protocol: 2})
	defer c.Close()
	info, err := c.Info(context.Background(), "server").Result()
	if err != nil {
		return "?"
	}
	for _, l := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "redis_version:"); ok {
			return v
		}
	}
	return "?"
}

// referenceOutput runs the model once in this process.
func referenceOutput(onnx, blob []byte) ([]byte, error) {
	sess, err := modelstore.NewSession(onnx, modelstore.SessionOptions{Optimize: true, IntraOpThreads: 1})
	if err != nil {
		return nil, err
	}
	defer sess.Close()
	in, err := modelstore.NewTensorFromBlob(modelstore.Float, []int64{1, inputLen}, blob)
	if err != nil {
		return nil, err
	}
	outs, err := sess.Run(context.Background(), []*modelstore.Tensor{in})
	if err != nil {
		return nil, err
	}
	return outs[0].Data, nil
}

func checkOutput(ctx context.Context, c *redis.Client, model string, blob, want []byte) error {
	if err := c.Do(ctx, "AI.TENSORSET", "check:x", "FLOAT", 1, inputLen, "BLOB", blob).Err(); err != nil {
		return err
	}
	if err := c.Do(ctx, "AI.MODELEXECUTE", model, "INPUTS", 1, "check:x", "OUTPUTS", 1, "check:y").Err(); err != nil {
		return err
	}
	got, err := c.Do(ctx, "AI.TENSORGET", "check:y", "BLOB").Text()
	if err != nil {
		return err
	}
	return benchproc.SameFloats([]byte(got), want)
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}
