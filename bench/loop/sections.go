//go:build cgo && !noort

package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/enclaveai/enclaveai/bench/benchproc"

	"github.com/redis/go-redis/v9"
	ort "github.com/yalue/onnxruntime_go"
	"golang.org/x/sys/unix"

	"github.com/enclaveai/enclaveai/modelstore"
	"github.com/enclaveai/enclaveai/server"
)

// rawORT returns a call that runs the model through onnxruntime_go with
// its input tensor allocated once, as a program that owns its buffers
// would; threads 0 keeps ORT's default intra-op pool (one thread per
// core, spinning between runs), the fastest back-to-back setting. The
// model must have one FLOAT input; its first dimension, if -1, is taken as
// batch, the others as 1. ORT allocates the outputs.
func rawORT(onnx []byte, threads, batch int, spin bool) (call func() error, closeFn func(), err error) {
	info, err := modelstore.NewSession(onnx, modelstore.SessionOptions{})
	if err != nil {
		return nil, nil, err
	}
	ins, outs := info.Inputs(), info.Outputs()
	info.Close()
	if len(ins) != 1 || ins[0].DType != modelstore.Float {
		return nil, nil, fmt.Errorf("want one FLOAT input, the model has %d", len(ins))
	}
	shape := make([]int64, len(ins[0].Shape))
	for i, d := range ins[0].Shape {
		shape[i] = max(d, 1)
		if i == 0 && d < 0 {
			shape[i] = int64(batch)
		}
	}
	data := make([]float32, modelstore.ShapeLen(shape))
	for i := range data {
		data[i] = float32(i%17) / 17
	}
	in, err := ort.NewTensor(ort.NewShape(shape...), data)
	if err != nil {
		return nil, nil, err
	}
	opts, err := ort.NewSessionOptions()
	if err != nil {
		in.Destroy()
		return nil, nil, err
	}
	defer opts.Destroy()
	// AI.MODELSTORE's default (OPTIMIZE 1) is ORT's full optimization.
	if err := opts.SetGraphOptimizationLevel(ort.GraphOptimizationLevelEnableAll); err != nil {
		in.Destroy()
		return nil, nil, err
	}
	if threads > 0 {
		if err := opts.SetIntraOpNumThreads(threads); err != nil {
			in.Destroy()
			return nil, nil, err
		}
	}
	if !spin {
		if err := opts.AddSessionConfigEntry("session.intra_op.allow_spinning", "0"); err != nil {
			in.Destroy()
			return nil, nil, err
		}
	}
	outNames := make([]string, len(outs))
	for i, o := range outs {
		outNames[i] = o.Name
	}
	sess, err := ort.NewDynamicAdvancedSessionWithONNXData(onnx, []string{ins[0].Name}, outNames, opts)
	if err != nil {
		in.Destroy()
		return nil, nil, err
	}
	inVals := []ort.Value{in}
	call = func() error {
		outVals := make([]ort.Value, len(outNames))
		err := sess.Run(inVals, outVals)
		for _, v := range outVals {
			if v != nil {
				v.Destroy()
			}
		}
		return err
	}
	return call, func() { sess.Destroy(); in.Destroy() }, nil
}

// latency is section latency's figures.
type latency struct {
	kinds []string
	by    map[string]sample
}

// modelRuns are the model run in this process, the kinds the bounds
// read: "ort" (ORT's default options), "ort-1thr" (one intra-op thread)
// and "ort-1thr-b32" (the same, a full batch of 32 rows: what a batched row
// costs at best), "ort-b32" (ORT's default options, a full batch); and
// "ort-2thr-nospin", a pool of two threads that do not spin (the most a
// server's run may use here under issue 9's thread policy, which forbids
// ORT threads that spin against the network's). The bounds take whichever
// is the cheapest in CPU: a pool's run can be, where the model's weights
// outgrow one core's cache and fit in two (the MLP's 2.6 MB against 2 MB
// a core on one machine of ours ran in 25 µs on two spinning threads,
// 80-110 µs on one), though there its spinning cost more than it saved.
type modelRuns struct {
	calls map[string]func() error
	close []func()
}

// modelRunKinds are modelRuns' kinds, in the order they are timed, with
// their intra-op threads (0: ORT's default), batch and whether the pool
// may spin (ORT's default).
var modelRunKinds = []struct {
	kind           string
	threads, batch int
	spin           bool
}{{"ort", 0, 1, true}, {"ort-1thr", 1, 1, true}, {"ort-1thr-b32", 1, batchSize, true}, {"ort-b32", 0, batchSize, true}, {"ort-2thr-nospin", 2, 1, false}}

func newModelRuns(onnx []byte) (*modelRuns, error) {
	m := &modelRuns{calls: map[string]func() error{}}
	for _, k := range modelRunKinds {
		call, closeFn, err := rawORT(onnx, k.threads, k.batch, k.spin)
		if err != nil {
			m.Close()
			return nil, err
		}
		m.calls[k.kind], m.close = call, append(m.close, closeFn)
	}
	return m, nil
}

func (m *modelRuns) Close() {
	for _, f := range m.close {
		f()
	}
}

// time runs kind n times after warm untimed runs, one at a time, after
// pause (untimed, if not nil), and records the CPU time a call (without
// pause). For the one-thread kinds that is the calling thread's, which is
// the run's: ORT runs them on the calling thread, to which the goroutine
// is locked meanwhile (only meanwhile: a goroutine locked to its thread
// waits for the network slower, on a thread that must be woken for it).
// For the kinds with a pool it is the process's, taken once the pool's
// threads, which spin for a while after a run, have stopped: their
// spinning is part of what such a run costs. Nothing else of this
// process runs meanwhile.
func (m *modelRuns) time(kind string, n, warm int, pause func()) (sample, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	f := m.calls[kind]
	for range warm {
		if err := f(); err != nil {
			return sample{}, fmt.Errorf("%s: %w", kind, err)
		}
	}
	time.Sleep(20 * time.Millisecond)
	thread0, proc0 := threadCPU(), processCPU()
	s, err := timeCalls(n, pause, f)
	if err != nil {
		return sample{}, fmt.Errorf("%s: %w", kind, err)
	}
	oneThread := kind == "ort-1thr" || kind == "ort-1thr-b32"
	if oneThread && pause == nil {
		s.cpuPerOp = (threadCPU() - thread0) / time.Duration(n)
	}
	time.Sleep(20 * time.Millisecond)
	if !oneThread && pause == nil {
		s.cpuPerOp = (processCPU() - proc0) / time.Duration(n)
	}
	return s, nil
}

// measureLatency times MODELEXECUTE and PING over one connection (and
// MODELEXECUTE over one to the wall-off server at offAddr) and the model
// in this process, in alternating blocks.
func measureLatency(o *options, addr, offAddr string, runs *modelRuns, blob []byte) (*latency, error) {
	ctx := context.Background()
	cl := redis.NewClient(&redis.Options{Addr: addr, Protocol: 2, PoolSize: 1})
	defer cl.Close()
	conn := cl.Conn()
	defer conn.Close()
	offCl := redis.NewClient(&redis.Options{Addr: offAddr, Protocol: 2, PoolSize: 1})
	defer offCl.Close()
	offConn := offCl.Conn()
	defer offConn.Close()
	for _, c := range []*redis.Conn{conn, offConn} {
		if err := c.Do(ctx, "AI.TENSORSET", "lat:x", "FLOAT", 1, inputLen, "BLOB", blob).Err(); err != nil {
			return nil, err
		}
	}
	calls := map[string]func() error{
		"MODELEXECUTE": func() error {
			return conn.Do(ctx, "AI.MODELEXECUTE", "mlp", "INPUTS", 1, "lat:x", "OUTPUTS", 1, "lat:y").Err()
		},
		"MODELEXECUTE-off": func() error {
			return offConn.Do(ctx, "AI.MODELEXECUTE", "mlp", "INPUTS", 1, "lat:x", "OUTPUTS", 1, "lat:y").Err()
		},
		"PING": func() error { return conn.Ping(ctx).Err() },
	}
	l := &latency{kinds: []string{"ort", "ort-1thr", "ort-1thr-b32", "ort-b32", "ort-1thr-idle", "ort-2thr-nospin", "MODELEXECUTE", "MODELEXECUTE-off", "PING"}, by: map[string]sample{}}
	const blocks, warm = 4, 50
	per := max(o.latencyN/blocks, 1)
	parts := map[string][]sample{}
	for range blocks {
		for _, k := range l.kinds {
			var s sample
			var err error
			switch k {
			case "ort-1thr-idle":
				// ort-1thr after the thread has slept 100 µs (untimed),
				// as a server's thread has between one client's commands:
				// its core idles (or runs something else) meanwhile and
				// the run starts cold.
				s, err = runs.time("ort-1thr", per, warm, func() { time.Sleep(100 * time.Microsecond) })
			case "ort", "ort-1thr", "ort-1thr-b32", "ort-b32", "ort-2thr-nospin":
				s, err = runs.time(k, per, warm, nil)
			default:
				f := calls[k]
				for range warm {
					if err := f(); err != nil {
						return nil, fmt.Errorf("%s: %w", k, err)
					}
				}
				s, err = timeCalls(per, nil, f)
			}
			if err != nil {
				return nil, fmt.Errorf("%s: %w", k, err)
			}
			parts[k] = append(parts[k], s)
		}
	}
	for k, ss := range parts {
		m := merge(ss)
		m.cpuPerOp = medianCPU(ss)
		l.by[k] = m
	}
	return l, nil
}

// threadCPU is the CPU time the calling thread has used so far.
func threadCPU() time.Duration { return clockCPU(unix.CLOCK_THREAD_CPUTIME_ID) }

// processCPU is the CPU time this process's threads have used so far.
func processCPU() time.Duration { return clockCPU(unix.CLOCK_PROCESS_CPUTIME_ID) }

func clockCPU(clock int32) time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(clock, &ts); err != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}

// loopKinds are the loop's kinds, in the order of odd rounds; "-off" runs
// on the server without the engine wall, "-nolog" on the one without the
// append-only log; "floor-ea" is the loop without its run, on the server
// without the log (AI.TENSORSET of the input, PING, AI.TENSORGET of a
// [1,10] tensor: the floor's sizes), the network front end's share of a
// loop against Redis's; "floor-go" and "floor-go-loop" are the floor's
// loop on the Go floors (gofloor.go): what the loop's round trips cost a
// Go server that does nothing else, with a goroutine per connection and
// with one epoll loop.
var loopKinds = []string{"floor", "floor-ea", "floor-go", "floor-go-loop", "mlp", "mlp-batch32", "mlp-off", "mlp-off-batch32", "mlp-nolog", "mlp-nolog-batch32"}

// extraKinds run only when -kinds names them: "mlp-receipt" is the mlp
// loop with RECEIPT on each AI.MODELEXECUTE (a signed receipt instead of
// OK), for the cost of receipts beside "mlp".
var extraKinds = []string{"mlp-receipt"}

// loops is section loop's figures: per client count and kind, one sample
// per round; and the model run in this process (modelRuns' kinds) just
// before each round's loops at each client count, for the bounds.
type loops struct {
	by, runs map[string][]sample // key: kind + "/" + clients
}

func loopKey(kind string, clients int) string { return kind + "/" + strconv.Itoa(clients) }

func measureLoops(o *options, ea, off, nolog, rd *benchproc.Proc, goFloors map[string]*benchproc.Proc, runs *modelRuns, blob []byte) (*loops, error) {
	big := make([]byte, 4*inputLen)
	copy(big, blob)
	keys := func(prefix string, n int) []string {
		ks := make([]string, n)
		for i := range ks {
			ks[i] = prefix + strconv.Itoa(i)
		}
		return ks
	}
	n := slices.Max(o.clients)
	xs, ys, gs := keys("x:", n), keys("y:", n), keys("g:", n)
	floor := func(ctx context.Context, c *redis.Conn, id int) error {
		if err := c.Set(ctx, xs[id], big, 0).Err(); err != nil {
			return err
		}
		if err := c.Ping(ctx).Err(); err != nil {
			return err
		}
		v, err := c.Get(ctx, gs[id]).Result()
		if err == nil && len(v) != 4*outputLen {
			err = fmt.Errorf("GET: %d bytes", len(v))
		}
		return err
	}
	loop := func(model string, receipt bool) body {
		return func(ctx context.Context, c *redis.Conn, id int) error {
			if err := c.Do(ctx, "AI.TENSORSET", xs[id], "FLOAT", 1, inputLen, "BLOB", blob).Err(); err != nil {
				return err
			}
			args := []any{"AI.MODELEXECUTE", model, "INPUTS", 1, xs[id], "OUTPUTS", 1, ys[id]}
			if receipt {
				args = append(args, "RECEIPT", xs[id])
			}
			s, err := c.Do(ctx, args...).Text()
			if receipt && err == nil && strings.Count(s, ".") == 2 {
				s = "OK"
			}
			if err != nil || s != "OK" {
				return fmt.Errorf("AI.MODELEXECUTE: %q %v", s, err)
			}
			v, err := c.Do(ctx, "AI.TENSORGET", ys[id], "BLOB").Text()
			if err == nil && len(v) != 4*outputLen {
				err = fmt.Errorf("AI.TENSORGET: %d bytes", len(v))
			}
			return err
		}
	}
	frontEnd := func(ctx context.Context, c *redis.Conn, id int) error {
		if err := c.Do(ctx, "AI.TENSORSET", xs[id], "FLOAT", 1, inputLen, "BLOB", blob).Err(); err != nil {
			return err
		}
		if err := c.Ping(ctx).Err(); err != nil {
			return err
		}
		v, err := c.Do(ctx, "AI.TENSORGET", gs[id], "BLOB").Text()
		if err == nil && len(v) != 4*outputLen {
			err = fmt.Errorf("AI.TENSORGET: %d bytes", len(v))
		}
		return err
	}
	bodies := map[string]struct {
		srv *benchproc.Proc
		f   body
	}{
		"floor":             {rd, floor},
		"floor-go":          {goFloors["floor-go"], floor},
		"floor-go-loop":     {goFloors["floor-go-loop"], floor},
		"floor-ea":          {nolog, frontEnd},
		"mlp":               {ea, loop("mlp", false)},
		"mlp-batch32":       {ea, loop("mlp-batch32", false)},
		"mlp-receipt":       {ea, loop("mlp", true)},
		"mlp-off":           {off, loop("mlp", false)},
		"mlp-off-batch32":   {off, loop("mlp-batch32", false)},
		"mlp-nolog":         {nolog, loop("mlp", false)},
		"mlp-nolog-batch32": {nolog, loop("mlp-batch32", false)},
	}
	res := &loops{by: map[string][]sample{}, runs: map[string][]sample{}}
	for r := range o.rounds {
		fmt.Printf("-- loop round %d/%d (load average %s)\n", r+1, o.rounds, loadAvg())
		for _, c := range o.clients {
			order := slices.Clone(o.kinds)
			if r%2 == 1 {
				slices.Reverse(order)
			}
			for _, k := range modelRunKinds {
				n := 200
				if k.batch > 1 {
					n = 20 // a batch of 32 takes about ten runs' time
				}
				s, err := runs.time(k.kind, n, 10, nil)
				if err != nil {
					return nil, err
				}
				res.runs[loopKey(k.kind, c)] = append(res.runs[loopKey(k.kind, c)], s)
			}
			for _, k := range order {
				b := bodies[k]
				s, err := runLoop(b.srv.Addr, b.srv, c, o.warm, o.dur, b.f)
				if err != nil {
					return nil, fmt.Errorf("%s at %d clients: %w", k, c, err)
				}
				fmt.Printf("   %-15s %3d clients %9.0f loops/s  p50 %7.1f us  p99 %7.1f us  CPU us/loop: server %6.1f, clients %6.1f\n",
					k, c, s.rate(), us(s.pct(0.5)), us(s.pct(0.99)), us(s.cpuPerOp), us(s.clientPerOp))
				res.by[loopKey(k, c)] = append(res.by[loopKey(k, c)], s)
			}
		}
	}
	return res, nil
}

// transformer is section transformer's figures.
type transformer struct {
	shape []int64
	kinds []string
	by    map[string][]sample
}

func measureTransformer(o *options, ea *benchproc.Proc) (*transformer, error) {
	addr := ea.Addr
	onnx, err := os.ReadFile(o.transformer)
	if err != nil {
		return nil, err
	}
	info, err := modelstore.NewSession(onnx, modelstore.SessionOptions{})
	if err != nil {
		return nil, err
	}
	in := info.Inputs()[0]
	info.Close()
	shape := make([]int64, len(in.Shape))
	args := []any{}
	for i, d := range in.Shape {
		shape[i] = max(d, 1)
		args = append(args, shape[i])
	}
	_, blob := floatBlob(int(modelstore.ShapeLen(shape)))
	ort1, close1, err := rawORT(onnx, 1, 1, true)
	if err != nil {
		return nil, err
	}
	defer close1()
	ort2, close2, err := rawORT(onnx, 2, 1, true)
	if err != nil {
		return nil, err
	}
	defer close2()
	ctx := context.Background()
	admin := redis.NewClient(&redis.Options{Addr: addr, Protocol: 2})
	defer admin.Close()
	if err := admin.Do(ctx, "AI.MODELSTORE", "tf", "ONNX", "CPU", "BLOB", onnx).Err(); err != nil {
		return nil, fmt.Errorf("AI.MODELSTORE tf: %w", err)
	}
	loop := func(ctx context.Context, c *redis.Conn, id int) error {
		x, y := "tx:"+strconv.Itoa(id), "ty:"+strconv.Itoa(id)
		set := append([]any{"AI.TENSORSET", x, "FLOAT"}, args...)
		if err := c.Do(ctx, append(set, "BLOB", blob)...).Err(); err != nil {
			return err
		}
		if s, err := c.Do(ctx, "AI.MODELEXECUTE", "tf", "INPUTS", 1, x, "OUTPUTS", 1, y).Text(); err != nil || s != "OK" {
			return fmt.Errorf("AI.MODELEXECUTE: %q %v", s, err)
		}
		return c.Do(ctx, "AI.TENSORGET", y, "BLOB").Err()
	}
	t := &transformer{shape: shape, kinds: []string{"ort-1thr", "ort-2thr", "server-1", "server-8"}, by: map[string][]sample{}}
	rounds := min(o.rounds, 2)
	for r := range rounds {
		fmt.Printf("-- transformer round %d/%d (load average %s)\n", r+1, rounds, loadAvg())
		order := slices.Clone(t.kinds)
		if r%2 == 1 {
			slices.Reverse(order)
		}
		for _, k := range order {
			var s sample
			switch k {
			case "ort-1thr":
				s, err = timeFor(o.warm, o.dur, ort1)
			case "ort-2thr":
				s, err = timeFor(o.warm, o.dur, ort2)
			case "server-1":
				s, err = runLoop(addr, ea, 1, o.warm, o.dur, loop)
			case "server-8":
				s, err = runLoop(addr, ea, 8, o.warm, o.dur, loop)
			}
			if err != nil {
				return nil, fmt.Errorf("%s: %w", k, err)
			}
			fmt.Printf("   %-12s %9.1f runs/s  p50 %8.1f us  p99 %8.1f us\n", k, s.rate(), us(s.pct(0.5)), us(s.pct(0.99)))
			t.by[k] = append(t.by[k], s)
			time.Sleep(20 * time.Millisecond) // in-process pool threads stop spinning
		}
	}
	return t, nil
}

// core is section core's figures: ops/s per server and operation, one per
// round.
type core struct {
	clients, pipeline, requests int
	by                          map[string][]float64 // "redis SET", "enclaveai-log GET", ...
	// CPU µs a request, by the same keys: the server's (engine workers
	// included), and redis-benchmark's own, the client that drives both.
	serverCPU, clientCPU map[string][]float64
}

// coreServers are the servers of section core: Redis and EnclaveAI each
// without a log, with its append-only log at appendfsync everysec
// (EnclaveAI's default), and without a log over TLS (the way an attested
// client talks to EnclaveAI), so that each pair compares like with like.
var coreServers = []string{"redis", "enclaveai", "redis-aof", "enclaveai-log", "redis-tls", "enclaveai-tls"}

// writeCert writes server.SelfSignedCert's certificate and key into dir
// as PEM files, for Redis's TLS port (EnclaveAI makes its own).
func writeCert(dir string) (certFile, keyFile string, err error) {
	c, err := server.SelfSignedCert()
	if err != nil {
		return "", "", err
	}
	key, err := x509.MarshalPKCS8PrivateKey(c.PrivateKey)
	if err != nil {
		return "", "", err
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Certificate[0]}), 0o600); err != nil {
		return "", "", err
	}
	return certFile, keyFile, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: key}), 0o600)
}

// startTLS starts the TLS servers of section core, Redis (with a
// certificate of its own in dir) and EnclaveAI, and returns them with
// their TLS ports.
func startTLS(o *options, dir string) (rd, ea *benchproc.Proc, rdPort, eaPort string, err error) {
	cert, key, err := writeCert(dir)
	if err != nil {
		return nil, nil, "", "", err
	}
	ports := [2]string{}
	for i := range ports {
		p, err := benchproc.FreePort()
		if err != nil {
			return nil, nil, "", "", err
		}
		ports[i] = strconv.Itoa(p)
	}
	rd, err = benchproc.Start("redis-server", o.redisServer, nil, "--appendonly", "no", "--tls-port", ports[0],
		"--tls-cert-file", cert, "--tls-key-file", key, "--tls-auth-clients", "no")
	if err != nil {
		return nil, nil, "", "", err
	}
	ea, err = benchproc.Start("enclaveai-server", o.server, o.env("tls"), append(slices.Clone(o.serverArgs), "--appendonly", "no", "--tls-port", ports[1])...)
	if err != nil {
		rd.Stop()
		return nil, nil, "", "", err
	}
	return rd, ea, ports[0], ports[1], nil
}

// measureCore runs redis-benchmark of SET/GET against TENSORSET/TENSORGET.
// ea is the EnclaveAI server with its default log, nolog the one without;
// rd Redis without AOF. It starts Redis with AOF.
func measureCore(o *options, ea, nolog, rd *benchproc.Proc) (*core, error) {
	aof, err := benchproc.Start("redis-server", o.redisServer, nil, "--appendonly", "yes", "--appendfsync", "everysec")
	if err != nil {
		return nil, err
	}
	defer aof.Stop()
	dir, err := os.MkdirTemp("", "enclaveai-bench-tls-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	rdTLS, eaTLS, rdTLSPort, eaTLSPort, err := startTLS(o, dir)
	if err != nil {
		return nil, err
	}
	defer rdTLS.Stop()
	defer eaTLS.Stop()
	procs := map[string]*benchproc.Proc{"redis": rd, "enclaveai": nolog, "redis-aof": aof, "enclaveai-log": ea, "redis-tls": rdTLS, "enclaveai-tls": eaTLS}
	tlsPorts := map[string]string{"redis-tls": rdTLSPort, "enclaveai-tls": eaTLSPort}
	value := strings.Repeat("x", 4*inputLen)
	c := &core{clients: 50, pipeline: 16, requests: o.rbRequests, by: map[string][]float64{},
		serverCPU: map[string][]float64{}, clientCPU: map[string][]float64{}}
	set := [][]string{{"SET", "t", value}, {"GET", "t"}}
	tensor := [][]string{{"AI.TENSORSET", "t", "FLOAT", strconv.Itoa(inputLen), "BLOB", value}, {"AI.TENSORGET", "t", "BLOB"}}
	cmds := map[string][][]string{"redis": set, "redis-aof": set, "redis-tls": set, "enclaveai": tensor, "enclaveai-log": tensor, "enclaveai-tls": tensor}
	perReq := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(c.requests) }
	for r := range o.rounds {
		fmt.Printf("-- core round %d/%d (load average %s)\n", r+1, o.rounds, loadAvg())
		order := slices.Clone(coreServers)
		if r%2 == 1 {
			slices.Reverse(order)
		}
		for _, srv := range order {
			for i, op := range []string{"SET", "GET"} {
				port, tls := procs[srv].Port(), tlsPorts[srv] != ""
				if tls {
					port = tlsPorts[srv]
				}
				before := cpu(procs[srv])
				rps, client, err := redisBenchmark(port, tls, c.requests, c.clients, c.pipeline, cmds[srv][i]...)
				if err != nil {
					return nil, err
				}
				server := perReq(cpu(procs[srv]) - before)
				fmt.Printf("   %-13s %s %10.0f ops/s  CPU us/op: server %5.2f, redis-benchmark %5.2f\n", srv, op, rps, server, perReq(client))
				key := srv + " " + op
				c.by[key] = append(c.by[key], rps)
				c.serverCPU[key] = append(c.serverCPU[key], server)
				c.clientCPU[key] = append(c.clientCPU[key], perReq(client))
			}
		}
	}
	// redis-benchmark counts error replies as answers: check the replies
	// (over TLS to a TLS pair, whose plain port has none of its keys).
	ctx := context.Background()
	for srv, p := range procs {
		opts := &redis.Options{Addr: p.Addr, Protocol: 2}
		if port := tlsPorts[srv]; port != "" {
			opts.Addr = net.JoinHostPort("127.0.0.1", port)
			opts.TLSConfig = &tls.Config{InsecureSkipVerify: true} // the servers' own certificates
		}
		cl := redis.NewClient(opts)
		args := make([]any, len(cmds[srv][1]))
		for i, a := range cmds[srv][1] {
			args[i] = a
		}
		v, err := cl.Do(ctx, args...).Text()
		cl.Close()
		if err != nil || v != value {
			return nil, fmt.Errorf("%s: the benchmarked GET did not return the value set (%d bytes, %v)", srv, len(v), err)
		}
	}
	return c, nil
}
