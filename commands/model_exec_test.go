package commands

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"
)

// A run's inputs are read as one, never in the middle of a transaction:
// AI.MODELEXECUTE runs outside the transaction lock (NoTxLock), and read
// one input before a transaction wrote two and the other after it. The
// model adds its inputs, which the transaction keeps equal: their sum is
// even.
func TestModelExecuteInputsAreNotInsideATransaction(t *testing.T) {
	if loadTestRuntime(t) == nil {
		t.Skip("no ONNX Runtime")
	}
	model, err := os.ReadFile(filepath.Join("..", "modelstore", "testdata", "add_int.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t)
	h.s.Dispatch(h.c, [][]byte{[]byte("AI.MODELSTORE"), []byte("add"), []byte("ONNX"), []byte("CPU"), []byte("BLOB"), model}, nil)
	h.s.CommitClient(h.c)
	h.c.W.Reset()
	w := h.client("127.0.0.1:50002")
	h.run(
		row("AI.TENSORSET a INT32 1 VALUES 0", "+OK"),
		row("AI.TENSORSET b INT32 1 VALUES 0", "+OK"),
		row("AI.MODELEXECUTE add INPUTS 2 a b OUTPUTS 1 c", "+OK"),
		row("AI.TENSORGET c VALUES", "[:0]"),
	)
	defer w.setPairsInTransactions("INT32", 1000)()
	sum := regexp.MustCompile(`^\[:(\d+)\]$`)
	deadline := time.Now().Add(3 * time.Second)
	for n := 0; n < 100000 && time.Now().Before(deadline); n++ {
		if got := render(h.do("AI.MODELEXECUTE add INPUTS 2 a b OUTPUTS 1 c")); got != "+OK" {
			t.Fatalf("run %d: %s", n, got)
		}
		got := render(h.do("AI.TENSORGET c VALUES"))
		m := sum.FindStringSubmatch(got)
		if m == nil {
			t.Fatalf("run %d: %s", n, got)
		}
		if s, _ := strconv.Atoi(m[1]); s%2 != 0 {
			t.Fatalf("run %d: the run read a and b apart from each other: a+b = %d", n, s)
		}
	}
}
