package commands

import (
	"runtime"
	"sync/atomic"

	"github.com/enclaveai/enclaveai/config"
)

// AI.MODELSTORE <key> <backend> <device> [TAG tag] [BATCHSIZE n [MINBATCHSIZE m [MINBATCHTIMEOUT ms]]]
//
//	[OPTIMIZE 0|1] [NOPERSIST] BLOB <chunk> [<chunk> ...] | FILE <path>
//
// AI.MODELSET (deprecated), AI.MODELGET, AI.MODELDEL, AI.MODELEXECUTE,
// AI.MODELRUN (deprecated), AI.INFO, AI._MODELSCAN, AI.MODELINFO, AI.CONFIG.
// Their parse and run steps are split by job: model_store.go (storing,
// and the loadmodel directive), model_get.go (reading and deleting),
// model_exec.go (running), model_admin.go (statistics, listing, AI.CONFIG).
func init() {
	ai := func(s *Spec) *Spec { s.Group = "models"; return s }
	register(
		ai(&Spec{Name: "ai.modelstore", Arity: -6, Flags: Write | DenyOOM | Big | NoTxLock, FirstKey: 1, LastKey: 1, Step: 1,
			Summary: "Stores an ONNX model sent in one or many BLOB chunks (or read from FILE in model-dir, or held by a resumable AI.UPLOAD); key * stores under a new UUID.",
			Syntax:  "key ONNX CPU [TAG tag] [BATCHSIZE n [MINBATCHSIZE m [MINBATCHTIMEOUT ms]]] [OPTIMIZE 0|1] [NOPERSIST] BLOB chunk [chunk ...] | FILE path | UPLOAD id",
			Parse:   parseModelStore(false), Payload: modelPayloadArg}),
		ai(&Spec{Name: "ai.upload", Arity: -3, Flags: Big | Blocking | NoTxLock,
			Summary: "A resumable model upload, held between commands and connections: BEGIN announces its size and returns its id; APPEND adds chunks at the offset the upload holds; STATUS gives [size, bytes held, idle seconds, receiving 0|1]; ABORT drops it. AI.MODELSTORE key ONNX CPU ... UPLOAD id stores it.",
			Syntax:  "BEGIN size | APPEND id offset BLOB chunk [chunk ...] | STATUS id | ABORT id",
			Parse:   parseUpload, Payload: uploadPayloadArg}),
		ai(&Spec{Name: "ai.modelset", Arity: -4, Flags: Write | DenyOOM | Big | NoTxLock, FirstKey: 1, LastKey: 1, Step: 1,
			Summary: "Deprecated form of AI.MODELSTORE.",
			Syntax:  "key ONNX CPU [TAG tag] [BATCHSIZE n [MINBATCHSIZE m [MINBATCHTIMEOUT ms]]] [INPUTS name ... OUTPUTS name ...] BLOB chunk [chunk ...]",
			Parse:   parseModelStore(true), Payload: modelPayloadArg}),
		ai(&Spec{Name: "ai.modelget", Arity: -2, Flags: Readonly | NoTxLock, FirstKey: 1, LastKey: 1, Step: 1,
			Summary: "Returns a model's metadata and/or its bytes (in MODEL_CHUNK_SIZE chunks).", Syntax: "key [META] [BLOB]", Parse: parseModelGet}),
		ai(&Spec{Name: "ai.modeldel", Arity: 2, Flags: Write, FirstKey: 1, LastKey: 1, Step: 1,
			Summary: "Deletes a model.", Syntax: "key", Parse: parseModelDel}),
		ai(&Spec{Name: "ai.modelexecute", Arity: -2, Flags: Write | DenyOOM | Blocking | NoTxLock, FirstKey: 1, LastKey: -1, Step: 1,
			Summary: "Runs a model on input tensors and stores the output tensors.",
			Syntax:  "key INPUTS n input [input ...] OUTPUTS m output [output ...] [TIMEOUT ms] [EXPECT sha256-hex] [RECEIPT nonce]", Parse: parseModelExecute,
			Keys: modelExecuteKeys}),
		ai(&Spec{Name: "ai.modelrun", Arity: -2, Flags: Write | DenyOOM | Blocking | NoTxLock, FirstKey: 1, LastKey: -1, Step: 1,
			Summary: "Deprecated form of AI.MODELEXECUTE.",
			Syntax:  "key [TIMEOUT ms] INPUTS input [input ...] OUTPUTS output [output ...]", Parse: parseModelRun,
			Keys: modelRunKeys}),
		ai(&Spec{Name: "ai.info", Arity: -2, Flags: Readonly, FirstKey: 1, LastKey: 1, Step: 1,
			Summary: "Returns a model's run statistics, or resets them.", Syntax: "key [RESETSTAT]", Parse: parseAIInfo}),
		ai(&Spec{Name: "ai._modelscan", Arity: 1, Flags: Readonly,
			Summary: "Lists every model key with its tag.", Parse: parseModelScan}),
		ai(&Spec{Name: "ai.modelinfo", Arity: 2, Flags: Readonly, FirstKey: 1, LastKey: 1, Step: 1,
			Summary: "Returns a model's digest, size, inputs and outputs, batching and storage details, owner, engine.", Syntax: "key", Parse: parseModelInfo}),
		ai(&Spec{Name: "ai.config", Arity: -2, Flags: Write,
			Summary: "Reads or changes RedisAI settings (MODEL_CHUNK_SIZE, MODEL_EXECUTION_TIMEOUT, ...).",
			Syntax:  "GET name | SET name value | name value | LOADBACKEND backend path | BACKENDSPATH path", Parse: parseAIConfig,
			AdminSubs: aiConfigAdminSubs()}),
	)
}

// AISettings are RedisAI's settings (AI.CONFIG). Atomics: read by every run.
type AISettings struct {
	ModelChunkSize        atomic.Int64
	ModelExecutionTimeout atomic.Int64 // ms
	IntraOpParallelism    atomic.Int64
	InterOpParallelism    atomic.Int64
	ThreadsPerQueue       atomic.Int64
	BackendsPath          atomic.Pointer[string]
}

// newAISettings starts from the configuration's threads-per-queue,
// intra-op-parallelism and inter-op-parallelism.
func newAISettings(opts *config.Options) *AISettings {
	s := &AISettings{}
	s.ModelChunkSize.Store(511 << 20)
	s.ModelExecutionTimeout.Store(5000)
	// By default one worker per CPU, each running its model on one thread
	// (modelstore.SessionOptions): RedisAI's default is 1 worker whose
	// runs spread over every core through ORT's spinning pool.
	workers := opts.ThreadsPerQueue.Load()
	if workers == 0 {
		workers = int64(runtime.GOMAXPROCS(0))
	}
	s.ThreadsPerQueue.Store(workers)
	s.IntraOpParallelism.Store(opts.IntraOpParallelism.Load())
	s.InterOpParallelism.Store(opts.InterOpParallelism.Load())
	p := "/usr/lib/enclaveai/backends"
	s.BackendsPath.Store(&p)
	return s
}

var (
	errUnsupportedBackend = Reply("ERR unsupported backend")
	errLoadBackend        = Reply("ERR Could not load backend")
	errInvalidDevice      = Reply("ERR Invalid DEVICE")
	errNoCUDA             = Reply("ERR GPU requested but ONNX couldn't find CUDA")
	errMissingBlob        = Reply("ERR Insufficient arguments, missing model BLOB")
	errExpectedBlob       = Reply("ERR Invalid argument, expected BLOB")
	errInputsNotForONNX   = Reply("ERR INPUTS argument should not be specified for this backend")
	errModelTooBig        = Reply("ERR model exceeds max-model-size")
	errNoRunInfo          = Reply("ERR cannot find run info for key")
	errInputsMismatch     = Reply("Number of keys given as INPUTS here does not match model definition")
	errOutputsMismatch    = Reply("Number of keys given as OUTPUTS here does not match model definition")
	errModelFile          = Reply("ERR FILE path must name a regular file inside model-dir")
	errNoModelDir         = Reply("ERR FILE needs the model-dir directive")
)
