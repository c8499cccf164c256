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
		// The thread counts stop at config.MaxThreads, as their directives do.
		parseCase{line: "AI.CONFIG SET THREADS_PER_QUEUE 1024", want: aiConfigSetCmd{sub: "THREADS_PER_QUEUE", n: 1024}},
		parseCase{line: "AI.CONFIG SET THREADS_PER_QUEUE 1025", err: "ERR THREADS_PER_QUEUE: invalid value"},
		parseCase{line: "AI.CONFIG THREADS_PER_QUEUE 100000000", err: "ERR THREADS_PER_QUEUE: invalid value"},
		parseCase{line: "AI.CONFIG INTRA_OP_PARALLELISM 1024", want: aiConfigSetCmd{sub: "INTRA_OP_PARALLELISM", n: 1024}},
		parseCase{line: "AI.CONFIG INTRA_OP_PARALLELISM 1025", err: "ERR INTRA_OP_PARALLELISM: invalid value"},
		parseCase{line: "AI.CONFIG SET INTER_OP_PARALLELISM 1025", err: "ERR INTER_OP_PARALLELISM: invalid value"},
		// A timeout that a time.Duration cannot hold.
		parseCase{line: "AI.CONFIG MODEL_EXECUTION_TIMEOUT 9223372036854", want: aiConfigSetCmd{sub: "MODEL_EXECUTION_TIMEOUT", n: 9223372036854}},
		parseCase{line: "AI.CONFIG MODEL_EXECUTION_TIMEOUT 9223372036855", err: "ERR MODEL_EXECUTION_TIMEOUT: invalid value"},
		parseCase{line: "AI.CONFIG MODEL_CHUNK_SIZE 9223372036854775807", want: aiConfigSetCmd{sub: "MODEL_CHUNK_SIZE", n: 9223372036854775807}},
		parseCase{line: "AI.CONFIG NOPE 1", err: "ERR unsupported subcommand"},
	)
}
