package commands

import (
	"strings"
	"testing"
)

// The persistence, attestation and model-removal commands.
func TestMiscParse(t *testing.T) {
	var digest [32]byte
	digest[0], digest[31] = 0xab, 0x01
	hex := "ab" + strings.Repeat("00", 30) + "01"
	parseTable(t,
		parseCase{line: "AI.MODELDEL m", want: modelDelCmd{key: "m"}},
		parseCase{line: "AI.MODELGET m", want: &modelGetCmd{key: "m", meta: true, blob: true}},
		parseCase{line: "AI.MODELGET m META", want: &modelGetCmd{key: "m", meta: true}},
		parseCase{line: "AI.MODELGET m blob", want: &modelGetCmd{key: "m", blob: true}},
		parseCase{line: "AI.MODELGET m NOISE", want: &modelGetCmd{key: "m", meta: true, blob: true}},
		parseCase{line: "AI.MODELGET m META BLOB X", err: "ERR wrong number of arguments for 'ai.modelget' command"},
		parseCase{line: "AI.MODELFIND " + hex, want: modelFindCmd{want: digest}},
		parseCase{line: "AI.MODELFIND " + strings.ToUpper(hex), want: modelFindCmd{want: digest}},
		parseCase{line: "AI.MODELFIND abc", err: string(errBadDigest)},
		parseCase{line: "AI.ATTEST " + strings.Repeat("n", 32), want: attestCmd{nonce: []byte(strings.Repeat("n", 32))}},
		parseCase{line: "AI.ATTEST short", err: "ERR nonce must be 16 to 1024 bytes"},
		parseCase{line: "BGREWRITEAOF", want: bgrewriteaofCmd{}},
		parseCase{line: "SAVE", want: saveCmd{}},
		parseCase{line: "BGSAVE", want: bgsaveCmd{}},
		parseCase{line: "BGSAVE SCHEDULE", want: bgsaveCmd{}},
		parseCase{line: "BGSAVE NOW", err: string(errSyntax)},
		parseCase{line: "LASTSAVE", want: lastsaveCmd{}},
	)
}

func TestTxParse(t *testing.T) {
	parseTable(t,
		parseCase{line: "MULTI", want: multiCmd{}},
		parseCase{line: "EXEC", want: execCmd{}},
		parseCase{line: "DISCARD", want: discardCmd{}},
	)
}
