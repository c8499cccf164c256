package modelstore

import "errors"

// Sentinel errors of the store. commands.errorText maps each to the exact
// RESP error text clients see (RedisAI's wording where one exists).
var (
	ErrWrongType      = errors.New("wrong type")
	ErrNoTensor       = errors.New("tensor key is empty")
	ErrNoModel        = errors.New("model key is empty")
	ErrNoKey          = errors.New("no such key")
	ErrDataLength     = errors.New("data length does not match tensor shape and type")
	ErrStringElements = errors.New("number of string elements does not match tensor length")
	ErrBoolValue      = errors.New("BOOL tensor elements must be 0 or 1")
	ErrInvalidValue   = errors.New("invalid value")
	//lint:ignore ST1005 C-string names the type, as RedisAI's message does
	ErrNullInString = errors.New("C-string value contains null character")
	ErrOOM          = errors.New("command not allowed when used memory > 'maxmemory'")
	// ErrRank: a tensor of more than MaxRank dimensions (a run's output:
	// a model can make any rank).
	ErrRank = errors.New("tensor rank exceeds 255")
	// ErrOutputTooBig: a run's outputs would take more than its MaxOutput.
	ErrOutputTooBig = errors.New("model outputs would exceed the memory allowed to them (maxmemory, proto-max-bulk-len)")
)

// Errors of the ONNX layer (onnx.go, onnxcheck.go). Errors that ONNX Runtime
// itself reports come as *ORTError, whose text RedisAI passes through
// verbatim (without an ERR prefix).
var (
	// ErrModelEmpty: an empty model blob. The text is what RedisAI (ONNX
	// Runtime) replies to one.
	//lint:ignore ST1005 ONNX Runtime's exact text, which clients see
	ErrModelEmpty = errors.New("No graph was found in the protobuf.")
	// ErrModelMalformed: the blob is not valid protobuf (an HTML page, a
	// truncated upload). Wrapped with where parsing failed; the sentinel's
	// text is ONNX Runtime's own message for such input.
	//lint:ignore ST1005 ONNX Runtime's exact text, which clients see
	ErrModelMalformed = errors.New("Failed to load model because protobuf parsing failed.")
	// ErrModelTooDeep: messages nested more than MaxModelDepth levels (a
	// protobuf bomb). RedisAI's ORT answers those with ErrModelMalformed's text.
	ErrModelTooDeep = errors.New("model protobuf nests messages too deeply")
	// ErrModelExternalData: a tensor stored outside the model (by file name).
	// RedisAI's patched ONNX Runtime's words (REDISAI.md §3.3).
	//lint:ignore ST1005 RedisAI's exact text, which clients see
	ErrModelExternalData = errors.New("Initializer tensors with external data is not allowed.")
	// ErrModelTensorSize: a tensor's raw_data length disagrees with its
	// dims and type; wrapped with the tensor's name.
	ErrModelTensorSize = errors.New("model has a tensor whose raw_data size does not match its dims and type")

	// ErrRuntimeNotFound: no ONNX Runtime shared library was found.
	ErrRuntimeNotFound = errors.New("ONNX Runtime library not found")
	// ErrRuntimeNotInitialized: NewSession before InitRuntime succeeded.
	ErrRuntimeNotInitialized = errors.New("ONNX Runtime is not initialized")
	// ErrSessionClosed: Run on a closed Session.
	ErrSessionClosed = errors.New("model session is closed")
	// ErrInputCount: Run with a number of inputs other than the model's;
	// wrapped as "... expected N inputs but got M".
	ErrInputCount = errors.New("wrong number of model inputs")
	// ErrUnsupportedDType: a tensor type the runtime binding or the store
	// cannot carry (a FLOAT16 model output, say); wrapped with the detail.
	ErrUnsupportedDType = errors.New("unsupported tensor type")
	// ErrUnsupportedShape: a tensor shape the runtime binding cannot carry
	// (a rank-0 STRING input); wrapped with the detail.
	ErrUnsupportedShape = errors.New("unsupported tensor shape")
)
