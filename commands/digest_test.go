package commands

import (
	"strings"
	"testing"
)

func TestModelFindParse(t *testing.T) {
	h := newHarness(t)
	zero := strings.Repeat("0", 64)
	h.run(
		row("AI.MODELFIND "+zero, "[]"),
		row("AI.MODELFIND "+strings.ToUpper(strings.Repeat("ab", 32)), "[]"),
		row("AI.MODELFIND abc", "-ERR a model digest is a SHA-256 in hex (64 digits)"),
		row("AI.MODELFIND "+strings.Repeat("g", 64), "-ERR a model digest is a SHA-256 in hex (64 digits)"),
		row("AI.MODELFIND", "-ERR wrong number of arguments for 'ai.modelfind' command"),
		row("AI.MODELEXECUTE m INPUTS 1 x OUTPUTS 1 y EXPECT", "-ERR model key is empty"),
		// In a DAG too, the model is checked before what follows its key
		// (test_trust has these errors with a model).
		row("AI.DAGEXECUTE ROUTING m |> AI.MODELEXECUTE m INPUTS 1 x OUTPUTS 1 y EXPECT abc", "-ERR model key is empty"),
		row("AI.DAGEXECUTE ROUTING m |> AI.MODELEXECUTE m INPUTS 1 x OUTPUTS 1 y EXPECT "+zero+" X", "-ERR model key is empty"),
	)
}
