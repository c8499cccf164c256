package commands

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/enclaveai/enclaveai/cluster"
	"github.com/enclaveai/enclaveai/config"
)

// Node ids in kvrocks-controller's shape: 40 alphanumeric characters.
var (
	nodeA = "kvrocksControllerNodeA000000000000000000"
	nodeB = "kvrocksControllerNodeB000000000000000000"
	nodeC = "kvrocksControllerNodeC000000000000000000"
)

// The controller's default split, pushed verbatim: lower-case
// subcommands, a trailing newline.
var topology = nodeA + " 127.0.0.1 7001 master - 0-5460\n" +
	nodeB + " 127.0.0.1 7002 master - 5461-10921\n" +
	nodeC + " 127.0.0.1 7003 master - 10922-16383\n"

func newClusterHarness(t *testing.T) *harness {
	t.Helper()
	return newClusterHarnessDir(t, t.TempDir())
}

// newClusterHarnessDir starts cluster mode on the state file in dir.
func newClusterHarnessDir(t *testing.T, dir string) *harness {
	t.Helper()
	opts := config.Default()
	opts.ClusterEnabled = true
	opts.Dir = dir
	h := newHarnessOpts(t, opts)
	h.s.Snapshot.SealKey = aofTestKey
	if err := h.s.StartCluster(); err != nil {
		t.Fatal(err)
	}
	return h
}

func TestClusterBeforeAndAfterPush(t *testing.T) {
	h := newClusterHarness(t)
	h.run(
		row("CLUSTER INFO", "-ERR CLUSTERDOWN The cluster is not initialized"),
		row("AI.TENSORSET a FLOAT 1", "-CLUSTERDOWN The cluster is not initialized"),
		row("CLUSTERX VERSION", ":-1"),
		row("PING", "+PONG"),
		row("clusterx setnodeid short", "-ERR Invalid node id: want 40 characters of [A-Za-z0-9]"),
		row("clusterx setnodeid "+nodeA, "+OK"),
		row("CLUSTER MYID", `"`+nodeA+`"`),
		row(`clusterx setnodes "`+strings.ReplaceAll(topology, "\n", `\n`)+`" "1"`, "+OK"),
		row("CLUSTERX VERSION", ":1"),
		// Same version again: a no-op; lower: refused; FORCE: accepted.
		row(`clusterx setnodes "`+strings.ReplaceAll(topology, "\n", `\n`)+`" 1`, "+OK"),
		row(`clusterx setnodes "`+strings.ReplaceAll(topology, "\n", `\n`)+`" 0`, "-ERR Invalid cluster version"),
		row(`clusterx setnodes "x y z" 5`, "~^-ERR invalid cluster nodes info: line 1"),
		row("CLUSTERX VERSION", ":1"),
		row("CLUSTER KEYSLOT foo", ":12182"),
		// {a} is slot 15495 (node C), {b} 3300 (A), {c} 7365 (B).
		row("AI.TENSORSET {b}x FLOAT 1 VALUES 1", "+OK"),
		row("AI.TENSORSET {a}x FLOAT 1 VALUES 1", "-MOVED 15495 127.0.0.1:7003"),
		row("AI.TENSORGET {c}x VALUES", "-MOVED 7365 127.0.0.1:7002"),
		row("AI.MODELEXECUTE {b}m INPUTS 1 {b}x OUTPUTS 1 {a}y", "-CROSSSLOT Keys in request don't hash to the same slot"),
		row("AI.DAGEXECUTE ROUTING {b} |> AI.MODELEXECUTE {a}m INPUTS 1 t OUTPUTS 1 u", "-CROSSSLOT Keys in request don't hash to the same slot"),
		row("DEL {b}x {b}y", ":1"),
		row("DEL {b}x {a}y", "-CROSSSLOT Keys in request don't hash to the same slot"),
		row("CLUSTER COUNTKEYSINSLOT 3300", ":0"),
		row("CLUSTER COUNTKEYSINSLOT 16384", "-ERR Invalid slot"),
		row("ASKING", "+OK"), row("READONLY", "+OK"), row("READWRITE", "+OK"),
		row("CLUSTER RESET HARD", "+OK"),
		row("CLUSTERX VERSION", ":-1"),
	)
	h.run(
		row("CLUSTER MYID", `~^"[0-9a-f]{40}"$`),
		row("AI.TENSORSET a FLOAT 1", "-CLUSTERDOWN The cluster is not initialized"),
	)
}

func TestClusterSlotsNodesShards(t *testing.T) {
	h := newClusterHarness(t)
	h.run(
		row("clusterx setnodeid "+nodeB, "+OK"),
		row(`clusterx setnodes "`+strings.ReplaceAll(topology, "\n", `\n`)+`" "3"`, "+OK"),
		row("CLUSTER SLOTS", `[[:0 :5460 ["127.0.0.1" :7001 "`+nodeA+`" []]] [:5461 :10921 ["127.0.0.1" :7002 "`+nodeB+`" []]] [:10922 :16383 ["127.0.0.1" :7003 "`+nodeC+`" []]]]`),
		row("CLUSTER NODES", `"`+nodeA+` 127.0.0.1:7001@17001 master - 0 0 3 connected 0-5460\n`+
			nodeB+` 127.0.0.1:7002@17002 myself,master - 0 0 3 connected 5461-10921\n`+
			nodeC+` 127.0.0.1:7003@17003 master - 0 0 3 connected 10922-16383\n"`),
		row("CLUSTER INFO", `~cluster_state:ok\\r\\ncluster_slots_assigned:16384.*cluster_current_epoch:3\\r\\ncluster_my_epoch:3\\r\\n.*migrating_slot:-1`),
		row("INFO cluster", `~cluster_enabled:1`),
		row("HELLO 3", `~"mode" "cluster"`),
	)
}

func TestCommandGetKeys(t *testing.T) {
	h := newHarness(t)
	h.run(
		row("COMMAND GETKEYS AI.MODELEXECUTE m INPUTS 2 a b OUTPUTS 1 c TIMEOUT 5", `["m" "a" "b" "c"]`),
		row("COMMAND GETKEYS AI.MODELRUN m TIMEOUT 5 INPUTS a b OUTPUTS c", `["m" "a" "b" "c"]`),
		row("COMMAND GETKEYS AI.DAGEXECUTE LOAD 2 a b PERSIST 1 c ROUTING r TIMEOUT 9 |> AI.TENSORSET t FLOAT 1 |> AI.MODELEXECUTE m INPUTS 1 a OUTPUTS 1 c |> AI.TENSORGET c",
			`["a" "b" "c" "r" "m"]`),
		row("COMMAND GETKEYS AI.DAGEXECUTE_RO ROUTING r |> AI.TENSORSET t FLOAT 1", `["r"]`),
		row("COMMAND GETKEYS AI.DAGRUN LOAD 1 a |> AI.MODELRUN m INPUTS a OUTPUTS b", `["a" "m"]`),
		row("COMMAND GETKEYS AI.TENSORSET t FLOAT 1", `["t"]`),
		row("COMMAND GETKEYS DEL a b", `["a" "b"]`),
		row("COMMAND GETKEYS OBJECT ENCODING k", `["k"]`),
		row("COMMAND GETKEYS MEMORY USAGE k", `["k"]`),
		row("COMMAND GETKEYS TOUCH a b", `["a" "b"]`),
		// As redis-server 7.0.15: command|getkeys takes at least 4 arguments.
		row("COMMAND GETKEYS PING", "-ERR wrong number of arguments for 'command|getkeys' command"),
		row("COMMAND GETKEYS PING x", "-ERR The command has no key arguments"),
		row("COMMAND GETKEYS NOSUCH x", "-ERR Invalid command specified"),
		row("COMMAND GETKEYS GET x", "-ERR Invalid command specified"),
		row("COMMAND GETKEYS TYPE a b", "-ERR Invalid number of arguments specified for command"),
		row("COMMAND GETKEYS", "-ERR wrong number of arguments for 'command|getkeys' command"),
		// Malformed lines give the keys found before the fault.
		row("COMMAND GETKEYS AI.MODELEXECUTE m INPUTS x a", `["m"]`),
		row("COMMAND GETKEYS AI.MODELEXECUTE m INPUTS 9 a", `["m" "a"]`),
		row("COMMAND GETKEYS AI.DAGEXECUTE LOAD -1 a |> AI.TENSORGET a", "-ERR The command has no key arguments"),
		row("CLUSTER INFO", "-ERR This instance has cluster support disabled"),
		row("INFO cluster", `~cluster_enabled:0`),
	)
}

// Every COMMAND entry has Redis 7's ten fields (go-redis refuses the
// whole reply otherwise), movable-key commands say movablekeys.
func TestCommandEntriesTenFields(t *testing.T) {
	for _, s := range table.Sorted() {
		w := &Writer{}
		writeCommandInfo(w, s)
		if got := render(w.Bytes()); !strings.HasPrefix(string(w.Bytes()), "*10\r\n") {
			t.Errorf("%s: %s", s.Name, got)
		}
		if (s.Keys != nil) != strings.Contains(strings.Join(s.FlagNames(), " "), "movablekeys") {
			t.Errorf("%s: movablekeys flag and Keys disagree", s.Name)
		}
	}
}

// A state file's handoffs come back at start: a slot handed to a node of
// the topology redirects there, one naming no node of it is dropped (and a
// state without a topology, as a hand-edited file could be, starts).
func TestClusterStartReadsHandoffs(t *testing.T) {
	dir := t.TempDir()
	top, err := cluster.ParseNodes(topology)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, config.Default().ClusterConfigFile)
	st := &cluster.State{ID: nodeA, Version: 1, Topology: top,
		Handed: map[int]string{3300: nodeB, 3301: strings.Repeat("z", 40)}, Taken: map[int]string{7365: nodeB}}
	if err := cluster.Save(path, aofTestKey, st); err != nil {
		t.Fatal(err)
	}
	h := newClusterHarnessDir(t, dir)
	h.run(
		row("AI.TENSORGET {b}x VALUES", "-MOVED 3300 127.0.0.1:7002"),
		row("AI.TENSORSET {c}x FLOAT 1 VALUES 1", "+OK"), // slot 7365, node B's in the topology, taken here
		row("CLUSTER NODES", "~\\[3300->-"+nodeB+"\\] \\[7365-<-"+nodeB+"\\]"),
	)
	// A push whose topology gave 3300 to B was saved, the handoff's end
	// was not (a crash between the two): the start ends it.
	moved, err := cluster.ParseNodes(strings.Replace(strings.Replace(topology, "0-5460", "0-3299 3301-5460", 1),
		"5461-10921", "3300 5461-10921", 1))
	if err != nil {
		t.Fatal(err)
	}
	if err := cluster.Save(path, aofTestKey, &cluster.State{ID: nodeA, Version: 2, Topology: moved, Handed: map[int]string{3300: nodeB}}); err != nil {
		t.Fatal(err)
	}
	h = newClusterHarnessDir(t, dir)
	h.s.Snapshot.SealKey = aofTestKey
	if err := h.s.Load(); err != nil {
		t.Fatal(err)
	}
	if nodes := string(h.do("CLUSTER NODES")); strings.Contains(nodes, "[") {
		t.Errorf("a settled handoff still open after the start:\n%s", nodes)
	}
	if st, _, _ := cluster.Load(path, aofTestKey); len(st.Handed) != 0 {
		t.Errorf("the state file still hands %v", st.Handed)
	}
	if err := cluster.Save(path, aofTestKey, &cluster.State{ID: nodeA, Version: -1, Handed: map[int]string{3300: nodeB}}); err != nil {
		t.Fatal(err)
	}
	newClusterHarnessDir(t, dir)
}

// A state file the host wrote stops the start: one of the unsealed
// layouts (its checksum right, as anyone can compute it) unless
// cluster-config-upgrade says to read it, which seals it at once; one
// sealed under another key always.
func TestClusterStartRefusesAnUnsealedStateFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, config.Default().ClusterConfigFile)
	body := "enclaveai-cluster-state 1\nid " + nodeA + "\nversion 1\n" + topology
	sum := sha256.Sum256([]byte(body))
	if err := os.WriteFile(path, []byte(body+"sha256 "+hex.EncodeToString(sum[:])+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	start := func(upgrade bool, key []byte) error {
		opts := config.Default()
		opts.ClusterEnabled, opts.ClusterConfigUpgrade, opts.Dir = true, upgrade, dir
		h := newHarnessOpts(t, opts)
		h.s.Snapshot.SealKey = key
		return h.s.StartCluster()
	}
	if err := start(false, aofTestKey); err == nil || !strings.Contains(err.Error(), "--cluster-config-upgrade yes") {
		t.Fatalf("unsealed file without cluster-config-upgrade: %v", err)
	}
	if err := start(true, aofTestKey); err != nil {
		t.Fatal(err)
	}
	st, legacy, err := cluster.Load(path, aofTestKey)
	if err != nil || legacy || st.ID != nodeA || st.Version != 1 || st.Topology.Text() != topology {
		t.Fatalf("not sealed as read: %+v legacy %v err %v", st, legacy, err)
	}
	other := bytes.Repeat([]byte{0x77}, 32)
	if err := start(true, other); !errors.Is(err, cluster.ErrBadState) || !strings.Contains(err.Error(), "MAC") {
		t.Fatalf("sealed under another key: %v", err)
	}
}
