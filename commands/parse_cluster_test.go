package commands

import (
	"strings"
	"testing"

	"github.com/enclaveai/enclaveai/cluster"
)

func TestClusterParse(t *testing.T) {
	top, err := cluster.ParseNodes(topology)
	if err != nil {
		t.Fatal(err)
	}
	parseTable(t,
		parseCase{line: "CLUSTER INFO", want: clusterCmd{sub: "INFO"}},
		parseCase{line: "cluster nodes", want: clusterCmd{sub: "NODES"}},
		parseCase{line: "CLUSTER SLOTS", want: clusterCmd{sub: "SLOTS"}},
		parseCase{line: "CLUSTER SHARDS", want: clusterCmd{sub: "SHARDS"}},
		parseCase{line: "CLUSTER MYID", want: clusterCmd{sub: "MYID"}},
		parseCase{line: "CLUSTER KEYSLOT {b}x", want: clusterCmd{sub: "KEYSLOT", slot: 3300}},
		parseCase{line: "CLUSTER COUNTKEYSINSLOT 7", want: clusterCmd{sub: "COUNTKEYSINSLOT", slot: 7}},
		parseCase{line: "CLUSTER GETKEYSINSLOT 7 5", want: clusterCmd{sub: "GETKEYSINSLOT", slot: 7, n: 5}},
		parseCase{line: "CLUSTER GETKEYSINSLOT 16384 5", err: string(errInvalidSlot)},
		parseCase{line: "CLUSTER GETKEYSINSLOT 7 -1", err: "ERR Invalid slot or number of keys"},
		parseCase{line: "CLUSTER COUNTKEYSINSLOT x", err: string(errNotInteger)},
		parseCase{line: "CLUSTER INFO x", err: "ERR wrong number of arguments for 'cluster|info' command"},
		parseCase{line: "CLUSTER RESET HARD", want: clusterCmd{sub: "RESET", hard: true}},
		parseCase{line: "CLUSTER RESET", want: clusterCmd{sub: "RESET"}},
		parseCase{line: "CLUSTER RESET MEDIUM", err: string(errSyntax)},
		parseCase{line: "CLUSTER FAILOVER", err: "ERR unknown subcommand 'FAILOVER'. Try CLUSTER HELP."},
		parseCase{line: "ASKING", want: clusterFlagCmd{asking: true}},
		parseCase{line: "READONLY", want: clusterFlagCmd{}},
		parseCase{line: "CLUSTERX VERSION", want: clusterxVersionCmd{}},
		parseCase{line: "clusterx setnodeid " + nodeA, want: setNodeIDCmd{id: nodeA}},
		parseCase{line: "clusterx setnodeid short", err: string(errInvalidNodeID)},
		parseCase{line: `clusterx setnodes "` + strings.ReplaceAll(topology, "\n", `\n`) + `" 3 FORCE`, want: setNodesCmd{top: top, version: 3, force: true}},
		parseCase{line: `clusterx setnodes "x" -1`, err: string(errInvalidVersion)},
		parseCase{line: "clusterx migrate 3300 " + nodeB, want: migrateCmd{slot: 3300, target: nodeB}},
		parseCase{line: "clusterx migrate 3300 short", err: string(errInvalidNodeID)},
		parseCase{line: "clusterx import 3300 1", want: importCmd{slot: 3300, state: migSuccess}},
		parseCase{line: "clusterx import 3300 9", err: "ERR Invalid import state"},
		parseCase{line: "clusterx restore 5 payload", want: restoreCmd{slot: 5, payload: []byte("payload")}},
		parseCase{line: "clusterx restore 99999 payload", err: string(errInvalidSlot)},
		parseCase{line: "clusterx migrate 1", err: "ERR wrong number of arguments for 'clusterx|migrate' command"},
		parseCase{line: "READWRITE", want: clusterFlagCmd{}},
		parseCase{line: "CLUSTER RESET HARD NOW", err: "ERR unknown subcommand or wrong number of arguments for 'reset'. Try CLUSTER HELP."},
		parseCase{line: "CLUSTER KEYSLOT", err: "ERR wrong number of arguments for 'cluster|keyslot' command"},
		parseCase{line: "CLUSTER GETKEYSINSLOT 7", err: "ERR wrong number of arguments for 'cluster|getkeysinslot' command"},
		parseCase{line: "CLUSTER GETKEYSINSLOT 7 x", err: "ERR Invalid slot or number of keys"},
		parseCase{line: "CLUSTERX BOGUS", err: "ERR unknown subcommand 'BOGUS'. Try CLUSTERX SETNODEID, SETNODES, VERSION."},
		parseCase{line: "CLUSTERX VERSION 1", err: "ERR wrong number of arguments for 'clusterx|version' command"},
		parseCase{line: `clusterx setnodes "x" 1 NOW`, err: string(errSyntax)},
		parseCase{line: `clusterx setnodes "x y z" 5`, err: "ERR invalid cluster nodes info: line 1: want <id> <ip> <port> master|slave <master-id>|- [slots]"},
	)
}
