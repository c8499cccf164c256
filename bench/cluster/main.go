// Command cluster measures the mlp loop (AI.TENSORSET of a [1,784] input,
// AI.MODELEXECUTE of the MLP, AI.TENSORGET of the [1,10] output) on a
// three-node cluster against one node, in the same run: clients are spread
// over three hash tags, one per node of the cluster, and go through
// go-redis's ClusterClient there and a plain client on the single node.
// Rounds alternate between the two (issue 14's figure).
//
//	go run ./bench/cluster [-server bin/enclaveai-server] [-clients 3,12,48] [-rounds 3] [-dur 3s] [-doc docs/BENCHMARKS.md]
package main

import (
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/enclaveai/enclaveai/bench/benchproc"
)

// Hash tags that land on node 0, 1 and 2 of the default three-way split
// ({b} is slot 3300, {c} 7365, {a} 15495).
var tags = []string{"{b}", "{c}", "{a}"}

func main() {
	server := flag.String("server", "bin/enclaveai-server", "EnclaveAI server binary")
	model := flag.String("model", "redis_tests/models/mlp.onnx", "the MLP: FLOAT [N,784] in, [N,10] out")
	clientList := flag.String("clients", "3,12,48", "client counts")
	rounds := flag.Int("rounds", 3, "rounds, each measuring both setups at every client count")
	dur := flag.Duration("dur", 3*time.Second, "recorded time of each run (after 500 ms unrecorded)")
	doc := flag.String("doc", "", "rewrite this file's section with the report")
	flag.Parse()
	var clients []int
	for _, s := range strings.Split(*clientList, ",") {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			fatal(fmt.Errorf("bad -clients %q", *clientList))
		}
		clients = append(clients, n)
	}
	onnx, err := os.ReadFile(*model)
	if err != nil {
		fatal(err)
	}
	input := make([]byte, 4*784)
	for i := range 784 {
		binary.LittleEndian.PutUint32(input[4*i:], math.Float32bits(float32(i%17)/17))
	}

	// The cluster: three nodes, the controller's split pushed as it does.
	var nodes []*benchproc.Proc
	for range 3 {
		p, err := benchproc.Start("enclaveai-server", *server, nil, "--cluster-enabled", "yes", "--appendonly", "no")
		if err != nil {
			fatal(err)
		}
		defer p.Stop()
		nodes = append(nodes, p)
	}
	ctx := context.Background()
	ranges := []string{"0-5460", "5461-10921", "10922-16383"}
	var topo strings.Builder
	ids := make([]string, 3)
	for i, n := range nodes {
		ids[i] = fmt.Sprintf("benchClusterNode%d%s", i, strings.Repeat("0", 23))
		fmt.Fprintf(&topo, "%s 127.0.0.1 %s master - %s\n", ids[i], n.Port(), ranges[i])
	}
	for i, n := range nodes {
		c := redis.NewClient(&redis.Options{Addr: n.Addr, Protocol: 2})
		must(c.Do(ctx, "clusterx", "setnodeid", ids[i]).Err())
		must(c.Do(ctx, "clusterx", "setnodes", topo.String(), "1").Err())
		c.Close()
	}
	single, err := benchproc.Start("enclaveai-server", *server, nil, "--appendonly", "no")
	if err != nil {
		fatal(err)
	}
	defer single.Stop()

	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{nodes[0].Addr}, Protocol: 2, PoolSize: 64})
	sc := redis.NewClient(&redis.Options{Addr: single.Addr, Protocol: 2, PoolSize: 64})
	for _, t := range tags {
		must(cc.Do(ctx, "AI.MODELSTORE", t+"m", "ONNX", "CPU", "BLOB", onnx).Err())
		must(sc.Do(ctx, "AI.MODELSTORE", t+"m", "ONNX", "CPU", "BLOB", onnx).Err())
	}

	type key struct {
		setup   string
		clients int
	}
	rates := map[key][]float64{}
	for r := range *rounds {
		for _, n := range clients {
			for _, setup := range []string{"3 nodes", "1 node"} {
				var c doer = sc
				if setup == "3 nodes" {
					c = cc
				}
				rate, err := loop(c, n, input, *dur)
				if err != nil {
					fatal(fmt.Errorf("%s, %d clients: %w", setup, n, err))
				}
				rates[key{setup, n}] = append(rates[key{setup, n}], rate)
				fmt.Fprintf(os.Stderr, "round %d %s %d clients: %.0f loops/s\n", r+1, setup, n, rate)
			}
		}
	}

	var b strings.Builder
	b.WriteString("## Cluster: 3 nodes against 1\n\n")
	fmt.Fprintf(&b, "`make bench-cluster` (bench/cluster), %s, %d CPUs, commit %s: the mlp loop "+
		"(AI.TENSORSET [1,784] → AI.MODELEXECUTE → AI.TENSORGET [1,10]), clients spread over the tags "+
		"`{b}` `{c}` `{a}` (one per node of the cluster), go-redis ClusterClient against three "+
		"`cluster-enabled` nodes on this machine, a plain client against one node; append-only log off; "+
		"median loops/s of %d rounds of %v each, the two setups taking turns.\n\n",
		time.Now().UTC().Format("2006-01-02 15:04 UTC"), runtime.NumCPU(), revision(), *rounds, *dur)
	b.WriteString("| clients | 1 node loops/s | 3 nodes loops/s | 3 nodes / 1 node |\n|---|---|---|---|\n")
	for _, n := range clients {
		one, three := median(rates[key{"1 node", n}]), median(rates[key{"3 nodes", n}])
		fmt.Fprintf(&b, "| %d | %.0f | %.0f | %.2f |\n", n, one, three, three/one)
	}
	b.WriteString("\nAll processes share this machine's cores, so three nodes cannot add CPU here: the " +
		"figure shows what sharding costs and what it keeps (each node runs its own engine worker and " +
		"run queue), not what three machines would give.\n")
	fmt.Print(b.String())
	if *doc != "" {
		must(writeSection(*doc, "Cluster: 3 nodes against 1", b.String()))
	}
}

// doer is what both clients have: a command as arguments.
type doer interface {
	Do(ctx context.Context, args ...any) *redis.Cmd
}

// loop runs n clients, client k on tag k mod 3 with its own keys, for 500
// ms unrecorded and then dur, and returns loops per second.
func loop(c doer, n int, input []byte, dur time.Duration) (float64, error) {
	ctx := context.Background()
	var count atomic.Int64
	var recording atomic.Bool
	var firstErr error
	var errOnce sync.Once
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for k := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := tags[k%len(tags)]
			in, out := t+"x"+strconv.Itoa(k), t+"y"+strconv.Itoa(k)
			for {
				select {
				case <-stop:
					return
				default:
				}
				err := c.Do(ctx, "AI.TENSORSET", in, "FLOAT", 1, 784, "BLOB", input).Err()
				if err == nil {
					err = c.Do(ctx, "AI.MODELEXECUTE", t+"m", "INPUTS", 1, in, "OUTPUTS", 1, out).Err()
				}
				if err == nil {
					var b string
					b, err = c.Do(ctx, "AI.TENSORGET", out, "BLOB").Text()
					if err == nil && len(b) != 40 {
						err = fmt.Errorf("output of %d bytes", len(b))
					}
				}
				if err != nil {
					errOnce.Do(func() { firstErr = err })
					return
				}
				if recording.Load() {
					count.Add(1)
				}
			}
		}()
	}
	time.Sleep(500 * time.Millisecond)
	recording.Store(true)
	start := time.Now()
	time.Sleep(dur)
	got := count.Load()
	secs := time.Since(start).Seconds()
	close(stop)
	wg.Wait()
	return float64(got) / secs, firstErr
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return s[len(s)/2]
}

func revision() string {
	out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}

// writeSection replaces the section of path that starts with "## heading"
// (up to the next "## ") with text, or appends text.
func writeSection(path, heading, text string) error {
	doc, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	s := string(doc)
	start := strings.Index(s, "## "+heading)
	if start < 0 {
		return os.WriteFile(path, []byte(strings.TrimRight(s, "\n")+"\n\n"+text), 0o644)
	}
	end := strings.Index(s[start+3:], "\n## ")
	if end < 0 {
		end = len(s)
	} else {
		end += start + 4
	}
	return os.WriteFile(path, []byte(s[:start]+text+"\n"+s[end:]), 0o644)
}

func must(err error) {
	if err != nil {
		fatal(err)
	}
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "bench/cluster:", err)
	os.Exit(1)
}
