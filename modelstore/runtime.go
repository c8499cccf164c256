package modelstore

// What the model layer knows of ONNX Runtime in every build, with or
// without it compiled in (build tag noort, or CGO_ENABLED=0): where the
// library is, the session options, the description of a model's inputs and
// outputs and ORT's errors. The binding itself is onnx.go and extinit_cgo.go;
// noort.go stands in for them where ORT is absent.

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// ONNX Runtime version the build fetches (Makefile ORT_VERSION) and whose
// C API (version 24) the binding is compiled against.
const (
	RuntimeVersionWanted = "1.24.1"
	// RuntimeLibraryEnv names the environment variable that points at the
	// library; the Makefile exports it.
	RuntimeLibraryEnv = "ENCLAVEAI_ONNXRUNTIME_LIB"
	runtimeLibName    = "libonnxruntime.so.1"
)

// FindRuntimeLibrary returns the path of the ONNX Runtime shared library:
// explicit when it is not empty; else $ENCLAVEAI_ONNXRUNTIME_LIB when set;
// else the first existing one of libonnxruntime.so.1 beside the running
// executable (where `make build` copies it), .cache/onnxruntime/1.24.1/
// under the working directory, and the same under the executable's parent
// directory's parent (bin/enclaveai-server run from elsewhere). An explicit
// path or the variable is used alone: if that file is missing, it is an
// error rather than a silent fallback. The error lists every path tried.
func FindRuntimeLibrary(explicit string) (string, error) {
	if explicit != "" {
		return checkLibrary(explicit, "the configured path")
	}
	if p := os.Getenv(RuntimeLibraryEnv); p != "" {
		return checkLibrary(p, "$"+RuntimeLibraryEnv)
	}
	cache := filepath.Join(".cache", "onnxruntime", RuntimeVersionWanted, runtimeLibName)
	var candidates []string
	exeDir := ""
	if exe, err := os.Executable(); err == nil {
		if real, err := filepath.EvalSymlinks(exe); err == nil {
			exe = real
		}
		exeDir = filepath.Dir(exe)
		candidates = append(candidates, filepath.Join(exeDir, runtimeLibName))
	}
	if wd, err := os.Getwd(); err == nil {
		candidates = append(candidates, filepath.Join(wd, cache))
	}
	if exeDir != "" {
		candidates = append(candidates, filepath.Join(filepath.Dir(exeDir), cache))
	}
	for _, c := range candidates {
		if isRegularFile(c) {
			return c, nil
		}
	}
	return "", fmt.Errorf("%w (set %s or run `make ort`); tried: %s",
		ErrRuntimeNotFound, RuntimeLibraryEnv, strings.Join(candidates, ", "))
}

func checkLibrary(path, source string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		abs = path
	}
	if !isRegularFile(abs) {
		return "", fmt.Errorf("%w: %s (from %s) is not a file", ErrRuntimeNotFound, abs, source)
	}
	return abs, nil
}

func isRegularFile(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular()
}

// SessionOptions tune how a model is compiled. The zero value is valid:
// no graph optimization, ORT's default thread counts.
type SessionOptions struct {
	// Optimize enables all of ORT's graph optimizations (its default);
	// false disables them, which loads faster and keeps the graph as written.
	Optimize bool
	// IntraOpThreads is the number of threads that share the work within
	// an operator, the caller's included; 0 means intraOpDefault's
	// (setThreadPolicy).
	IntraOpThreads int
	// InterOpThreads > 1 runs independent operators in parallel (ORT's
	// parallel execution mode) on that many threads; 0 or 1 runs them one
	// after the other.
	InterOpThreads int
}

// IOInfo describes a model input or output.
type IOInfo struct {
	Name string
	// DType is the element type, or DTypeInvalid for a type a Tensor cannot
	// hold (float16, say) and for non-tensor values (sequences, maps).
	DType DType
	// ElemType is ONNX Runtime's name of the type: "tensor(float)",
	// "tensor(string)", "seq(tensor(float))", "map(int64,tensor(float))".
	ElemType string
	// Shape of a tensor: -1 for a symbolic or unknown dimension; nil when
	// the model does not declare the rank; empty for a scalar.
	Shape []int64
}

// IsTensor reports whether the value is a dense tensor (of any type).
func (i IOInfo) IsTensor() bool { return strings.HasPrefix(i.ElemType, "tensor(") }

// ORTError is an error reported by ONNX Runtime itself, with its message
// as ORT wrote it (surrounding space trimmed, line breaks folded into
// spaces so it fits a RESP error line, and the C++ source location ORT puts
// before some messages dropped), e.g. "Got invalid dimensions for
// input: x for the following indices index: 1 Got: 5 Expected: 4 Please
// fix either the inputs/outputs or the model.". RedisAI replies with such
// messages verbatim, without an ERR prefix.
type ORTError struct{ Msg string }

// Error returns Msg, ONNX Runtime's message.
func (e *ORTError) Error() string { return e.Msg }
