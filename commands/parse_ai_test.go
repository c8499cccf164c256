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
		// More keys than the scratch holds: the outputs get their own list.
		parseCase{line: "AI.MODELEXECUTE m INPUTS 6 a b c d e f OUTPUTS 3 x y z", want: &modelExecCmd{key: "m",
			inputs: []string{"a", "b", "c", "d", "e", "f"}, outputs: []string{"x", "y", "z"}, nIn: 6, nOut: 3}},
		parseCase{line: "AI.MODELEXECUTE m INPUTS 1", err: "ERR wrong number of arguments for 'AI.MODELEXECUTE' command"},
		parseCase{line: "AI.DAGEXECUTE LOAD 1 a PERSIST 1 y |> AI.MODELEXECUTE m INPUTS 1 a OUTPUTS 1 y", want: &dagCmd{
			cmdName: "AI.DAGEXECUTE", load: []string{"a"}, persist: []string{"y"},
			ops: []dagOp{{kind: opModelExec, exec: &modelExecCmd{key: "m", inputs: []string{"a"}, outputs: []string{"y"}, nIn: 1, nOut: 1}}}}},
		// The deprecated AI.MODELRUN, alone and in a DAG (one parse of its
		// body): a syntax error waits in syntaxErr for the model's checks.
		parseCase{line: "AI.MODELRUN m TIMEOUT 5 INPUTS a b OUTPUTS y", want: &modelExecCmd{key: "m",
			inputs: []string{"a", "b"}, outputs: []string{"y"}, timeout: 5 * time.Millisecond}},
		parseCase{line: "AI.MODELRUN m INPUTS a b c", want: &modelExecCmd{key: "m", inputs: []string{"a", "b", "c"}}},
		parseCase{line: "AI.MODELRUN m TIMEOUT 0 INPUTS a OUTPUTS y", want: &modelExecCmd{key: "m", syntaxErr: errTimeoutValue}},
		parseCase{line: "AI.MODELRUN m INPUT a b OUTPUTS y", want: &modelExecCmd{key: "m", syntaxErr: Reply("ERR INPUTS not specified")}},
		parseCase{line: "AI.DAGRUN LOAD 1 a |> AI.MODELRUN m INPUTS a OUTPUTS y", want: &dagCmd{cmdName: "AI.DAGRUN", load: []string{"a"},
			ops: []dagOp{{kind: opModelExec, exec: &modelExecCmd{key: "m", inputs: []string{"a"}, outputs: []string{"y"}}}}}},
		parseCase{line: "AI.DAGRUN LOAD 1 a |> AI.MODELRUN m TIMEOUT 5 INPUTS a OUTPUTS y", want: &dagCmd{cmdName: "AI.DAGRUN", load: []string{"a"},
			ops: []dagOp{{kind: opModelExec, exec: &modelExecCmd{key: "m", syntaxErr: Reply("ERR TIMEOUT not allowed within a DAG command")}}}}},
		parseCase{line: "AI.DAGRUN LOAD 1 a |> AI.MODELRUN m TIMEOUT x INPUTS a OUTPUTS y", want: &dagCmd{cmdName: "AI.DAGRUN", load: []string{"a"},
			ops: []dagOp{{kind: opModelExec, exec: &modelExecCmd{key: "m", syntaxErr: errTimeoutValue}}}}},
		parseCase{line: "AI.DAGRUN LOAD 1 a |> AI.MODELRUN m OUTPUTS y INPUTS a", want: &dagCmd{cmdName: "AI.DAGRUN", load: []string{"a"},
			ops: []dagOp{{kind: opModelExec, exec: &modelExecCmd{key: "m", syntaxErr: Reply("ERR INPUTS not specified")}}}}},
	)
}

// TestModelExecuteParseAllocs: AI.MODELEXECUTE run at once parses into the
// connection's scratch (issue 9: argument parsing allocates nothing per
// command in steady state), its key lists in the scratch's room while they
// fit, each list capped so that one cannot grow into the other.
func TestModelExecuteParseAllocs(t *testing.T) {
	argv := [][]byte{[]byte("AI.MODELEXECUTE"), []byte("m"), []byte("INPUTS"), []byte("2"), []byte("a"), []byte("b"),
		[]byte("OUTPUTS"), []byte("1"), []byte("y"), []byte("TIMEOUT"), []byte("50")}
	var sc scratch
	got := testing.AllocsPerRun(1000, func() {
		a := NewArgs(argv, nil)
		a.scratch = &sc
		if _, err := parseModelExecute(a); err != nil {
			t.Fatal(err)
		}
	})
	if got > 0 {
		t.Errorf("%.1f allocations per AI.MODELEXECUTE parsed into the scratch, want 0", got)
	}
	c := &sc.modelExec
	if len(c.inputs) != 2 || cap(c.inputs) != 2 || len(c.outputs) != 1 || cap(c.outputs) != 1 {
		t.Errorf("key lists %q (cap %d) and %q (cap %d), want 2 and 1 capped", c.inputs, cap(c.inputs), c.outputs, cap(c.outputs))
	}
	_ = append(c.inputs, "z")
	if c.outputs[0] != "y" {
		t.Errorf("an append to the inputs overwrote the outputs: %q", c.outputs)
	}
}
