package redis_tests

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestGoRedisClusterClient drives three cluster-enabled servers, pushed a
// topology the way kvrocks-controller pushes it (lower-case clusterx
// subcommands, 40 alphanumeric ids, the version as a bulk string), with
// go-redis's ClusterClient speaking RESP3: it loads COMMAND (whose every
// entry must have ten fields) and CLUSTER SLOTS, then routes AI.* commands
// by their first key to the node that owns it.
func TestGoRedisClusterClient(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("models", "linear.onnx"))
	if err != nil {
		t.Fatalf("linear.onnx not generated (run `make models`): %v", err)
	}
	ids := []string{"goRedisClusterNodeA000000000000000000000", "goRedisClusterNodeB000000000000000000000",
		"goRedisClusterNodeC000000000000000000000"}
	ranges := []string{"0-5460", "5461-10921", "10922-16383"}
	var addrs []string
	for range ids {
		addrs = append(addrs, startModelServer(t, "--cluster-enabled", "yes", "--save", ""))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var topo strings.Builder
	for i, a := range addrs {
		host, port, _ := strings.Cut(a, ":")
		fmt.Fprintf(&topo, "%s %s %s master - %s\n", ids[i], host, port, ranges[i])
	}
	for i, a := range addrs {
		c := redis.NewClient(&redis.Options{Addr: a})
		if err := c.Do(ctx, "clusterx", "setnodeid", ids[i]).Err(); err != nil {
			t.Fatal(err)
		}
		if err := c.Do(ctx, "clusterx", "setnodes", topo.String(), "1").Err(); err != nil {
			t.Fatal(err)
		}
		c.Close()
	}

	rc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs[:1], Protocol: 3, ReadTimeout: 10 * time.Second})
	defer rc.Close()
	if err := rc.ForEachShard(ctx, func(ctx context.Context, c *redis.Client) error { return c.Ping(ctx).Err() }); err != nil {
		t.Fatal(err)
	}
	// go-redis parses the whole COMMAND reply: one entry of a wrong
	// field count fails it.
	if _, err := rc.Command(ctx).Result(); err != nil {
		t.Fatalf("COMMAND: %v", err)
	}
	// {b} is slot 3300 (node 0), {c} 7365 (node 1), {a} 15495 (node 2).
	for i, tag := range []string{"{b}", "{c}", "{a}"} {
		do := func(args ...any) any {
			t.Helper()
			v, err := rc.Do(ctx, args...).Result()
			if err != nil {
				t.Fatalf("%v: %v", args[:2], err)
			}
			return v
		}
		do("AI.MODELSTORE", tag+"m", "ONNX", "CPU", "BLOB", data)
		do("AI.TENSORSET", tag+"x", "FLOAT", 1, 4, "VALUES", 1, 2, 3, 4)
		do("AI.MODELEXECUTE", tag+"m", "INPUTS", 1, tag+"x", "OUTPUTS", 1, tag+"y")
		got := do("AI.TENSORGET", tag+"y", "VALUES")
		if want := []any{7.0, 9.0, 11.0}; !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: TENSORGET %#v, want %#v", tag, got, want)
		}
		// A DAG's first argument is ROUTING, not a key: the application
		// names the key's position, as go-redis lets it.
		dag := redis.NewCmd(ctx, "AI.DAGEXECUTE", "ROUTING", tag, "LOAD", 1, tag+"x", "PERSIST", 1, tag+"z",
			"|>", "AI.MODELEXECUTE", tag+"m", "INPUTS", 1, tag+"x", "OUTPUTS", 1, tag+"z")
		dag.SetFirstKeyPos(2)
		if err := rc.Process(ctx, dag); err != nil {
			t.Fatalf("%s: DAG: %v", tag, err)
		}
		// The keys are on node i only.
		node := redis.NewClient(&redis.Options{Addr: addrs[i]})
		keys, err := node.Keys(ctx, "*").Result()
		node.Close()
		if err != nil || len(keys) != 4 {
			t.Fatalf("node %d keys %v %v", i, keys, err)
		}
	}
	err = rc.Do(ctx, "AI.MODELEXECUTE", "{b}m", "INPUTS", 1, "{b}x", "OUTPUTS", 1, "{a}y").Err()
	if err == nil || err.Error() != "CROSSSLOT Keys in request don't hash to the same slot" {
		t.Fatalf("cross-slot MODELEXECUTE: %v", err)
	}
}
