package commands

import (
	"math"
	"regexp"
	"testing"
	"time"
)

// A DAG's AI.TENSORSET with a bad value or a blob of the wrong length fails
// the whole command, as RedisAI makes the tensor while it parses the DAG
// (dag_parser.c, ParseTensorSetArgs; REDISAI.md 3.9): it answered an array
// with the error as the op's element and NA after it. The LOADed keys are
// still read first, and nothing is persisted.
func TestDAGTensorSetBadDataFailsTheCommand(t *testing.T) {
	h := newHarness(t)
	h.run(
		row("AI.TENSORSET x FLOAT 1 VALUES 1", "+OK"),
		row("AI.DAGEXECUTE ROUTING r |> AI.TENSORSET a FLOAT 1 VALUES zz |> AI.TENSORGET a VALUES", "-ERR invalid value"),
		row("AI.DAGEXECUTE LOAD 1 x PERSIST 1 a |> AI.TENSORSET a FLOAT 2 VALUES 1 zz", "-ERR invalid value"),
		row("AI.DAGEXECUTE LOAD 1 x PERSIST 1 a |> AI.TENSORSET a FLOAT 2 BLOB abc", "-ERR data length does not match tensor shape and type"),
		row("AI.DAGRUN |> AI.TENSORSET a FLOAT 1 VALUES zz |> AI.TENSORGET a VALUES", "-ERR invalid value"),
		row("EXISTS a", ":0"),
		// The LOADed keys are read before it.
		row("AI.DAGEXECUTE LOAD 1 nosuch |> AI.TENSORSET a FLOAT 1 VALUES zz", "-ERR tensor key is empty or in a different shard"),
		// A good one still answers OK, and its tensor is the DAG's.
		row("AI.DAGEXECUTE LOAD 1 x PERSIST 1 a |> AI.TENSORSET a FLOAT 2 VALUES 1 2 |> AI.TENSORGET a VALUES", `[+OK ["1" "2"]]`),
		row("AI.TENSORGET a VALUES", `["1" "2"]`),
	)
}

// A DAG's LOADed keys are read as one, never in the middle of a
// transaction: EXEC runs its queued commands under the write side of the
// transaction lock, and a DAG, which runs outside it (NoTxLock), read one
// key before a transaction wrote two and the other after it.
func TestDAGLoadIsNotInsideATransaction(t *testing.T) {
	h := newHarness(t)
	w := h.client("127.0.0.1:50002")
	h.run(row("AI.TENSORSET a INT8 1 VALUES 0", "+OK"), row("AI.TENSORSET b INT8 1 VALUES 0", "+OK"))
	defer w.setPairsInTransactions("INT8", 100)()
	pair := regexp.MustCompile(`^\[\[:(\d+)\] \[:(\d+)\]\]$`)
	deadline := time.Now().Add(3 * time.Second)
	for n := 0; n < 100000 && time.Now().Before(deadline); n++ {
		got := render(h.do("AI.DAGEXECUTE_RO LOAD 2 a b |> AI.TENSORGET a VALUES |> AI.TENSORGET b VALUES"))
		m := pair.FindStringSubmatch(got)
		if m == nil || m[1] != m[2] {
			t.Fatalf("run %d: the DAG read a and b apart from each other: %s", n, got)
		}
	}
}

// A TIMEOUT too long to count in nanoseconds lasts as long as a Duration
// can: its milliseconds were multiplied into a Duration that wrapped
// around, so TIMEOUT 76480200929599801 (2.4 billion years) gave 64 ns,
// and a DAG or AI.MODELEXECUTE asked to wait that long answered TIMEDOUT
// at once.
func TestParseTimeoutDoesNotWrap(t *testing.T) {
	for _, ms := range []string{"76480200929599801", "9223372036854775807", "9223372036854776"} {
		a := NewArgs([][]byte{[]byte("TIMEOUT"), []byte(ms)}, nil)
		d, err := parseTimeout(&a)
		if err != nil || d < time.Duration(math.MaxInt64) {
			t.Errorf("TIMEOUT %s: %v, %v; want the longest Duration", ms, d, err)
		}
	}
	a := NewArgs([][]byte{[]byte("TIMEOUT"), []byte("9223372036854")}, nil)
	if d, err := parseTimeout(&a); err != nil || d != 9223372036854*time.Millisecond {
		t.Errorf("TIMEOUT 9223372036854: %v, %v", d, err)
	}
}
