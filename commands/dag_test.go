package commands

import "testing"

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
