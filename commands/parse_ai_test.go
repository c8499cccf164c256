package commands

import (
	"testing"
	"time"

	"github.com/enclaveai/enclaveai/modelstore"
)

// The RedisAI commands typed before the others; their replies, and the
// errors reported at run (after the key checks, as RedisAI orders them),
// are covered by the reply tables of tensor_test.go and model tests.
func TestAIParse(t *testing.T) {
	parseTable(t,
		parseCase{line: "AI.TENSORSET t FLOAT 2 VALUES 1 2", want: &tensorSetCmd{key: "t",
			t: tensorSpec{dtype: modelstore.Float, shape: []int64{2}, dims: [modelstore.InlineRank]int64{2}, values: [][]byte{[]byte("1"), []byte("2")}, hasVal: true}}},
		parseCase{line: "AI.TENSORSET t INT8 2 BLOB ab", want: &tensorSetCmd{key: "t",
			t: tensorSpec{dtype: modelstore.Int8, shape: []int64{2}, dims: [modelstore.InlineRank]int64{2}, blob: []byte("ab"), blobAt: 5}}},
		parseCase{line: "AI.TENSORGET t META BLOB", want: &tensorGetCmd{key: "t", f: tensorGetFormat{meta: true, blob: true}}},
		parseCase{line: "AI.TENSORGET t VALUES", want: &tensorGetCmd{key: "t", f: tensorGetFormat{values: true}}},
		parseCase{line: "AI.MODELEXECUTE m INPUTS 2 a b OUTPUTS 1 y TIMEOUT 50", want: &modelExecCmd{key: "m",
			inputs: []string{"a", "b"}, outputs: []string{"y"}, timeout: 50 * time.Millisecond, nIn: 2, nOut: 1}},
		parseCase{line: "AI.MODELEXECUTE m INPUTS 1", err: "ERR wrong number of arguments for 'AI.MODELEXECUTE' command"},
		parseCase{line: "AI.DAGEXECUTE LOAD 1 a PERSIST 1 y |> AI.MODELEXECUTE m INPUTS 1 a OUTPUTS 1 y", want: &dagCmd{
			cmdName: "AI.DAGEXECUTE", load: []string{"a"}, persist: []string{"y"},
			ops: []dagOp{{kind: opModelExec, exec: &modelExecCmd{key: "m", inputs: []string{"a"}, outputs: []string{"y"}, nIn: 1, nOut: 1}}}}},
	)
}
