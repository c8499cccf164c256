package commands

import "testing"

func TestModelAdminParse(t *testing.T) {
	parseTable(t,
		parseCase{line: "AI.INFO m", want: aiInfoCmd{key: "m"}},
		parseCase{line: "AI.INFO m RESETSTAT", want: aiInfoCmd{key: "m", reset: true}},
		parseCase{line: "AI.INFO m RESETSTAT x", err: "ERR wrong number of arguments for 'ai.info' command"},
		parseCase{line: "AI._MODELSCAN", want: modelScanCmd{}},
		parseCase{line: "AI.MODELINFO m", want: modelInfoCmd{key: "m"}},
		parseCase{line: "AI.CONFIG GET model_chunk_size", want: aiConfigGetCmd{name: "MODEL_CHUNK_SIZE"}},
		parseCase{line: "AI.CONFIG GET", err: "ERR wrong number of arguments for 'ai.config' command"},
		parseCase{line: "AI.CONFIG BACKENDSPATH /x", want: aiConfigPathCmd{p: "/x"}},
		parseCase{line: "AI.CONFIG BACKENDSPATH", err: "ERR BACKENDSPATH: missing path argument"},
		parseCase{line: "AI.CONFIG LOADBACKEND ONNX /x.so", want: aiConfigLoadCmd{}},
		parseCase{line: "AI.CONFIG LOADBACKEND TORCH /x.so", err: "ERR error loading backend"},
		parseCase{line: "AI.CONFIG MODEL_CHUNK_SIZE 1024", want: aiConfigSetCmd{sub: "MODEL_CHUNK_SIZE", n: 1024}},
		parseCase{line: "AI.CONFIG SET THREADS_PER_QUEUE 2", want: aiConfigSetCmd{sub: "THREADS_PER_QUEUE", n: 2}},
		parseCase{line: "AI.CONFIG MODEL_CHUNK_SIZE 0", err: "ERR MODEL_CHUNK_SIZE: invalid chunk size"},
		parseCase{line: "AI.CONFIG MODEL_EXECUTION_TIMEOUT 999", err: "ERR MODEL_EXECUTION_TIMEOUT: invalid value"},
		parseCase{line: "AI.CONFIG MODEL_CHUNK_SIZE", err: "ERR MODEL_CHUNK_SIZE: missing chunk size"},
		parseCase{line: "AI.CONFIG NOPE 1", err: "ERR unsupported subcommand"},
	)
}
