//go:build cgo && !noort

package modelstore

// The ONNX Runtime layer: loading the shared library, compiling a model into
// a Session and running it on Tensors. It wraps github.com/yalue/onnxruntime_go
// (which dlopens the library and calls its C API through cgo) and hides its
// quirks from the command handlers:
//
//   - Inputs and outputs are matched by position, as RedisAI does; a model's
//     inputs are its graph inputs that are not initializers, in graph order.
//     They are read from the model's protobuf (readGraphIO) instead of from a
//     second, throw-away ORT session, which would double the load time and
//     memory of every AI.MODELSTORE; TestIOInfoMatchesRuntime checks that
//     both views agree.
//   - Numeric inputs are handed to ORT without a copy (see newInputValue).
//   - Outputs are allocated by ORT; the binding copies each into Go memory,
//     which becomes the output Tensor's Data without a second copy.
//   - Errors that come from ORT are returned as *ORTError carrying ORT's
//     own message, without the binding's prefixes.
//   - A Session may be Run from many goroutines at once and closed while
//     runs are in flight (it is freed when the last one ends).

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	ort "github.com/yalue/onnxruntime_go"
)

// The runtime is process-wide state of the binding.
var runtimeState struct {
	mu      sync.Mutex
	libPath string // non-empty once initialized
	ready   atomic.Bool
}

// InitRuntime loads the ONNX Runtime library at libPath (FindRuntimeLibrary("")
// when empty) and creates the process's ORT environment. It may be called
// any number of times from any goroutine: once it has succeeded, further
// calls return nil, unless they name a different library, which is an error.
// A failed attempt is not remembered, so a later call may retry (with a
// corrected path, say).
func InitRuntime(libPath string) error {
	runtimeState.mu.Lock()
	defer runtimeState.mu.Unlock()
	if runtimeState.libPath != "" {
		if libPath == "" || sameFile(libPath, runtimeState.libPath) {
			return nil
		}
		return fmt.Errorf("ONNX Runtime is already initialized from %s; cannot load %s", runtimeState.libPath, libPath)
	}
	if libPath == "" {
		p, err := FindRuntimeLibrary("")
		if err != nil {
			return err
		}
		libPath = p
	}
	ort.SetSharedLibraryPath(libPath)
	// ORT would also print every failed load or run to stderr (in colour);
	// each of those is returned to the caller, who decides what to log.
	if err := ort.InitializeEnvironment(ort.WithLogLevelFatal()); err != nil {
		return fmt.Errorf("initializing ONNX Runtime from %s: %w", libPath, err)
	}
	runtimeState.libPath = libPath
	runtimeState.ready.Store(true)
	return nil
}

func sameFile(a, b string) bool {
	sa, err1 := os.Stat(a)
	sb, err2 := os.Stat(b)
	return err1 == nil && err2 == nil && os.SameFile(sa, sb)
}

// HasRuntime reports whether this build can load ONNX Runtime.
const HasRuntime = true

// RuntimeVersion is the loaded ONNX Runtime's version ("1.24.1"), or ""
// before InitRuntime has succeeded.
func RuntimeVersion() string {
	if !runtimeState.ready.Load() {
		return ""
	}
	return ort.GetVersion()
}

// newORTError digs ORT's message out of an error of the binding, which
// wraps it as "Error running network: <msg>" and the like.
func newORTError(err error) *ORTError {
	for {
		inner := errors.Unwrap(err)
		if inner == nil {
			break
		}
		err = inner
	}
	return &ORTError{Msg: stripSourceLocation(cleanMessage(err.Error()))}
}

// stripSourceLocation drops the C++ source location ORT puts before the
// messages of its exceptions ("/onnxruntime_src/onnxruntime/core/graph/
// graph.cc:1494 void onnxruntime::Graph::InitializeStateFromModelFileGraphProto()
// This is an invalid model. ..."): ORT's build paths and function
// signatures mean nothing to a client. Anything it does not recognise is
// left as is.
func stripSourceLocation(msg string) string {
	// "<file>.<ext>:<line> "
	sp := strings.IndexByte(msg, ' ')
	if sp < 0 {
		return msg
	}
	loc := msg[:sp]
	colon := strings.LastIndexByte(loc, ':')
	if colon < 0 || colon == len(loc)-1 || strings.Trim(loc[colon+1:], "0123456789") != "" {
		return msg
	}
	switch filepath.Ext(loc[:colon]) {
	case ".cc", ".cpp", ".h", ".hpp", ".cu":
	default:
		return msg
	}
	// Then __PRETTY_FUNCTION__: up to its balanced argument list, optional
	// qualifiers, and an optional "[with T = ...]".
	rest := msg[sp+1:]
	open := strings.IndexByte(rest, '(')
	if open < 0 {
		return msg
	}
	end := matchBracket(rest, open, '(', ')')
	if end < 0 {
		return msg
	}
	rest = rest[end+1:]
	rest = strings.TrimPrefix(rest, " const")
	rest = strings.TrimPrefix(rest, " noexcept")
	if strings.HasPrefix(rest, " [") {
		end := matchBracket(rest, 1, '[', ']')
		if end < 0 {
			return msg
		}
		rest = rest[end+1:]
	}
	if rest = strings.TrimLeft(rest, " "); rest == "" {
		return msg
	}
	return rest
}

// matchBracket returns the index of the bracket closing s[open], or -1.
func matchBracket(s string, open int, o, c byte) int {
	depth := 0
	for i := open; i < len(s); i++ {
		switch s[i] {
		case o:
			depth++
		case c:
			depth--
			if depth == 0 {
				return i
			}
		}
	}
	return -1
}

// cleanMessage trims s and folds each run of white space that contains a
// line break into one space (RESP error lines cannot contain line breaks).
func cleanMessage(s string) string {
	s = strings.TrimSpace(s)
	if !strings.ContainsAny(s, "\r\n") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		if c := s[i]; c == ' ' || c == '\t' || c == '\r' || c == '\n' {
			j, lineBreak := i, false
			for ; j < len(s) && (s[j] == ' ' || s[j] == '\t' || s[j] == '\r' || s[j] == '\n'); j++ {
				lineBreak = lineBreak || s[j] == '\r' || s[j] == '\n'
			}
			if lineBreak {
				b.WriteByte(' ')
			} else {
				b.WriteString(s[i:j])
			}
			i = j
			continue
		}
		b.WriteByte(s[i])
		i++
	}
	return b.String()
}

// Session is a compiled model. Its methods are safe for concurrent use:
// ONNX Runtime sessions allow concurrent Run calls, and the binding's
// DynamicAdvancedSession.RunWithOptions only reads the session's fixed name
// tables and builds its per-call arrays locally, so Run needs no lock
// around the inference itself.
type Session struct {
	inputs, outputs []IOInfo
	// requested[k] is the index in outputs of the k-th output asked of ORT:
	// every tensor output. Non-tensor outputs (sequences, maps) are never
	// asked for, so ORT does not build them and Run leaves their slots nil.
	requested []int

	mu     sync.Mutex
	active int  // Runs in flight
	closed bool // Close was called; sess is freed when active drops to 0
	sess   *ort.DynamicAdvancedSession
	pool   []*runOpts // run options for reuse (runopts.go)
	// shared holds the initializers ORT reads in the model's own bytes
	// (extinit.go); nil when ORT copied them.
	shared *sharedWeights
	// padErrs maps each Pad guard's check node to its refusal (ortError).
	padErrs map[string]error
}

// NewSession checks (CheckModelBlob) and compiles an ONNX model. ORT's
// own load errors come back as *ORTError ("No graph was found in the
// protobuf.", "Fatal error: NoSuchOperator is not a registered function/op").
// The model bytes are not retained.
func NewSession(model []byte, opts SessionOptions) (*Session, error) {
	return newSession(model, opts, nil, nil)
}

// newSession is NewSession, with the weights of share (if not nil) read
// in place in model, which is buf's bytes when buf is not nil.
func newSession(model []byte, opts SessionOptions, share *sharePlan, buf *ModelBuffer) (*Session, error) {
	if !runtimeState.ready.Load() {
		return nil, ErrRuntimeNotInitialized
	}
	if err := CheckModelBlob(model); err != nil {
		return nil, err
	}
	if opts.IntraOpThreads < 0 || opts.InterOpThreads < 0 {
		return nil, fmt.Errorf("thread counts must not be negative (intra-op %d, inter-op %d)", opts.IntraOpThreads, opts.InterOpThreads)
	}
	inputs, outputs, err := readGraphIO(model)
	if err != nil {
		return nil, err
	}
	s := &Session{inputs: inputs, outputs: outputs}
	inNames := make([]string, len(inputs))
	for i, in := range inputs {
		inNames[i] = in.Name
	}
	var outNames []string
	for i, out := range outputs {
		if out.IsTensor() {
			s.requested = append(s.requested, i)
			outNames = append(outNames, out.Name)
		}
	}

	o, err := ort.NewSessionOptions()
	if err != nil {
		return nil, fmt.Errorf("creating ONNX Runtime session options: %w", err)
	}
	defer o.Destroy()
	level := ort.GraphOptimizationLevel(ort.GraphOptimizationLevelDisableAll)
	if opts.Optimize {
		level = ort.GraphOptimizationLevelEnableAll
	}
	if err := o.SetGraphOptimizationLevel(level); err != nil {
		return nil, newORTError(err)
	}
	if err := setThreadPolicy(o, opts); err != nil {
		return nil, err
	}
	if opts.InterOpThreads > 1 {
		if err := o.SetExecutionMode(ort.ExecutionModeParallel); err != nil {
			return nil, newORTError(err)
		}
		if err := o.SetInterOpNumThreads(opts.InterOpThreads); err != nil {
			return nil, newORTError(err)
		}
	}
	graph := model
	if share != nil {
		if s.shared, err = share.attach(o, model, buf); err != nil {
			return nil, err
		}
		graph = share.graph
	}
	// The sanitizer refuses models that crash ONNX Runtime and guards
	// integer division and Pad (sanitize.go); it reads the graph ORT will
	// load.
	safe, padErrs, err := sanitizeChecked(graph, true)
	if err != nil {
		if s.shared != nil {
			s.shared.release()
		}
		return nil, err
	}
	if safe != nil {
		graph = safe
	}
	s.padErrs = padErrs
	// The binding only fails here when ORT does: it was initialized and
	// the model is not empty (both checked above).
	s.sess, err = ort.NewDynamicAdvancedSessionWithONNXData(graph, inNames, outNames, o)
	if err != nil {
		if s.shared != nil {
			s.shared.release()
		}
		return nil, s.ortError(err)
	}
	return s, nil
}

// ortError is newORTError, or the refusal a Pad guard's failed check
// stands for (padguard.go): ONNX Runtime names the check's node, at a run
// or, where it folds the check, when the session is created.
func (s *Session) ortError(err error) error {
	e := newORTError(err)
	for name, refusal := range s.padErrs {
		if strings.Contains(e.Msg, name) {
			return refusal
		}
	}
	return e
}

// setThreadPolicy sizes the session's intra-op threads and keeps ORT's
// pool threads from spinning.
//
// The server runs models on a run queue whose workers (THREADS_PER_QUEUE,
// one per CPU by default) each call Run on their own thread. By default
// (IntraOpThreads 0) a session on a machine of fewer than manyCPUs CPUs
// has no pool at all: the calling worker does all of a run's work, so
// concurrent requests use the cores side by side and no thread is ever
// left spinning. ORT's own default, a pool of one thread per core that
// spins for a while after each parallel section, keeps a core busy between
// runs: on a 2-core machine that is the core the connections' goroutines
// need (issue 9 measured 54% of the server's CPU there). From manyCPUs on,
// the default is two threads (intraOpDefault). An explicit IntraOpThreads
// (AI.CONFIG INTRA_OP_PARALLELISM) gives a session that many threads; no
// pool spins (the inter-op pool, INTER_OP_PARALLELISM, neither).
func setThreadPolicy(o *ort.SessionOptions, opts SessionOptions) error {
	n := opts.IntraOpThreads
	if n == 0 {
		n = intraOpDefault(runtime.NumCPU())
	}
	if err := o.SetIntraOpNumThreads(n); err != nil {
		return newORTError(err)
	}
	for _, key := range []string{"session.intra_op.allow_spinning", "session.inter_op.allow_spinning"} {
		if err := o.AddSessionConfigEntry(key, "0"); err != nil {
			return newORTError(err)
		}
	}
	return nil
}

// manyCPUs is the machine size from which a run gets two threads by
// default (intraOpDefault).
const manyCPUs = 8

// intraOpDefault is a run's threads when INTRA_OP_PARALLELISM is 0, on a
// machine of cpus CPUs: one below manyCPUs, two from it. A second thread
// runs a batch-1 mlp (784x512x512x10) much faster on a 16-core Xeon (its
// weights, 2.7 MB, split over two cores' L2 caches, is our reading), and
// the cores the run queue leaves idle pay for it: MODELEXECUTE's p50 at one
// client 194.9 and 203.8 µs with one thread, 122.3 and 120.7 with two;
// the mlp loop 3,438 and 3,464 loops/s at one client against 4,897 and
// 4,919, 20,221 and 19,890 against 22,019 and 21,907 at 8, and the same at
// 32 (docs/BENCHMARKS.md, "Inference loop", 16 cores). On the 2-vCPU
// machine the second thread takes the CPU the network needs and wakes
// it for each run: MODELEXECUTE's p50 was 232.7 and 207.7 µs with two
// threads against 178.1 and 191.8 with one.
func intraOpDefault(cpus int) int {
	if cpus >= manyCPUs {
		return 2
	}
	return 1
}

// Inputs describes the model's inputs, in the order Run takes them.
// The slice must not be modified.
func (s *Session) Inputs() []IOInfo { return s.inputs }

// Outputs describes the model's outputs, in the order Run returns them.
// The slice must not be modified.
func (s *Session) Outputs() []IOInfo { return s.outputs }

// Close releases the session. It does not wait for Runs in flight: the
// session is freed when the last of them returns, and later Runs fail with
// ErrSessionClosed. Close never fails and may be called more than once.
func (s *Session) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.closed = true
		s.freeLocked()
	}
	return nil
}

func (s *Session) acquire() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.active++
	return true
}

func (s *Session) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.active--
	s.freeLocked()
}

func (s *Session) freeLocked() {
	if s.closed && s.active == 0 && s.sess != nil {
		for _, r := range s.pool {
			r.ro.Destroy()
		}
		s.pool = nil
		s.sess.Destroy()
		s.sess = nil
		if s.shared != nil {
			s.shared.release() // only now: ORT read the weights until Destroy
		}
	}
}

// Run feeds inputs to the model by position and returns its outputs in
// model order: a new Tensor per tensor output, nil for an output that is
// not a tensor (a sequence or map, which RedisAI skips too).
//
// A model input of the wrong type or shape is refused by ORT ("Unexpected
// input data type. Actual: (tensor(int32)) , expected: (tensor(float))",
// "Got invalid dimensions for input: ..."), returned as *ORTError. If ctx
// is done before the run starts, Run returns ctx.Err() without running;
// if it becomes done during the run, Run sets ORT's terminate flag (within
// watchTick, watch.go) and returns ORT's error "Exiting due to terminate
// flag being set to true." (callers that want to know why can check
// ctx.Err()). A run that
// completes anyway returns its results.
func (s *Session) Run(ctx context.Context, inputs []*Tensor) ([]*Tensor, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if len(inputs) != len(s.inputs) {
		return nil, fmt.Errorf("%w: expected %d inputs but got %d", ErrInputCount, len(s.inputs), len(inputs))
	}
	if len(s.inputs) == 0 {
		// The binding cannot call ORT without inputs; RedisAI cannot run
		// such a model either (INPUTS needs a positive count).
		return nil, fmt.Errorf("%w: the model has no inputs", ErrInputCount)
	}
	if !s.acquire() {
		return nil, ErrSessionClosed
	}
	defer s.release()

	// Inputs point at pinned Go memory until their ORT values are gone:
	// the Unpin is deferred first so that it runs last.
	var pins runtime.Pinner
	defer pins.Unpin()
	in := make([]ort.Value, len(inputs))
	defer destroyValues(in)
	for i, t := range inputs {
		v, err := newInputValue(t, &pins)
		if err != nil {
			return nil, fmt.Errorf("input %d (%s): %w", i, s.inputs[i].Name, err)
		}
		in[i] = v
	}

	for _, i := range s.requested {
		// The binding cannot even copy out tensors of other types (it
		// sizes float16 data by element count).
		if info := s.outputs[i]; info.DType == DTypeInvalid {
			return nil, fmt.Errorf("%w: output %d (%s) is a %s, which cannot be stored", ErrUnsupportedDType, i, info.Name, info.ElemType)
		}
	}
	results := make([]*Tensor, len(s.outputs))
	if len(s.requested) == 0 {
		return results, nil // nothing ORT could return as a tensor
	}
	out := make([]ort.Value, len(s.requested))
	defer destroyValues(out)
	for k, i := range s.requested {
		// The binding cannot turn an ORT-allocated rank-0 numeric tensor
		// into a Go value, so outputs declared as scalars are preallocated.
		// ORT writes into the Scalar's Go buffer, which the binding keeps
		// private, so it cannot be pinned like the inputs; it is one
		// element in a heap object that out keeps alive, and Go's
		// collector does not move heap objects.
		info := s.outputs[i]
		if info.Shape != nil && len(info.Shape) == 0 && info.DType != String {
			if kind := elemKinds[dtypeToONNX(info.DType)]; kind != nil {
				v, err := kind.newScalar(nil)
				if err != nil {
					return nil, fmt.Errorf("output %s: %w", info.Name, err)
				}
				out[k] = v
			}
		}
	}

	var ro *ort.RunOptions
	if Watchable(ctx) {
		r, err := s.takeRunOpts()
		if err != nil {
			return nil, err
		}
		Watch(&r.w, ctx, r)
		// Deferred after release, so it runs before: the options go back
		// to the pool while the session is still held.
		defer func() { s.putRunOpts(r, Unwatch(&r.w)) }()
		ro = r.ro
	}
	err := s.sess.RunWithOptions(in, out, ro)
	if err != nil {
		if strings.HasPrefix(err.Error(), "Error running network: ") {
			return nil, s.ortError(err)
		}
		// Converting ORT's outputs failed (an ORT-allocated rank-0 output
		// the model did not declare as one, say).
		return nil, fmt.Errorf("%w: reading the model's outputs: %v", ErrUnsupportedShape, err)
	}
	for k, i := range s.requested {
		t, err := tensorFromValue(out[k])
		if err != nil {
			return nil, fmt.Errorf("output %d (%s): %w", i, s.outputs[i].Name, err)
		}
		results[i] = t
	}
	return results, nil
}

// destroyValues destroys and clears the values. A slot may hold a typed
// nil: when converting an output fails, the binding stores its nil
// *Tensor[T] result in the slot.
func destroyValues(vs []ort.Value) {
	for i, v := range vs {
		if v != nil && !reflect.ValueOf(v).IsNil() {
			v.Destroy()
		}
		vs[i] = nil
	}
}

// newInputValue wraps t as an ORT value.
//
// Numeric data is not copied: ORT reads t.Data in place (a Tensor is
// immutable, and ORT never writes to inputs). ORT keeps that pointer in C
// memory for the value's lifetime, which the cgo rules allow only for
// pinned memory, so the caller's Pinner pins it until the value is
// destroyed. Data that is not aligned to its element size (a slice of a
// larger buffer) is copied into a fresh, aligned allocation first.
//
// The binding refuses rank-0 and zero-element tensors in NewCustomDataTensor,
// so those (small by definition) take a copying path. STRING elements are
// always copied: ORT stores strings as std::string.
func newInputValue(t *Tensor, pins *runtime.Pinner) (ort.Value, error) {
	if t == nil {
		return nil, errors.New("missing tensor")
	}
	n := ShapeLen(t.Shape)
	if n < 0 {
		return nil, ErrDataLength
	}
	shape := ort.NewShape(t.Shape...)
	if t.DType == String {
		if len(t.Shape) == 0 {
			return nil, fmt.Errorf("%w: ONNX Runtime binding cannot pass a rank-0 STRING tensor", ErrUnsupportedShape)
		}
		elems := t.Strings()
		if int64(len(elems)) != n || (n > 0 && t.Data[len(t.Data)-1] != 0) {
			return nil, ErrStringElements
		}
		strs := make([]string, len(elems))
		for i, e := range elems {
			strs[i] = string(e)
		}
		st, err := ort.NewStringTensor(shape)
		if err != nil {
			return nil, newORTError(err)
		}
		if err := st.SetContents(strs); err != nil {
			st.Destroy()
			return nil, newORTError(err)
		}
		return st, nil
	}
	kind := elemKinds[dtypeToONNX(t.DType)]
	if kind == nil {
		return nil, fmt.Errorf("%w: %s", ErrUnsupportedDType, t.DType)
	}
	if int64(len(t.Data)) != n*int64(kind.size) {
		return nil, ErrDataLength
	}
	switch {
	case len(t.Shape) == 0:
		return kind.newScalar(t.Data)
	case n == 0:
		return kind.newEmpty(shape)
	}
	data := t.Data
	if uintptr(unsafe.Pointer(&data[0]))%uintptr(kind.size) != 0 {
		data = append([]byte(nil), data...) // Go aligns fresh allocations to their element size
	}
	pins.Pin(&data[0])
	v, err := ort.NewCustomDataTensor(shape, data, ort.TensorElementDataType(kind.onnx))
	if err != nil {
		return nil, newORTError(err)
	}
	return v, nil
}

// tensorFromValue converts an ORT output value into a new Tensor.
func tensorFromValue(v ort.Value) (*Tensor, error) {
	if st, ok := v.(*ort.StringTensor); ok {
		return stringTensorFromValue(st)
	}
	if kind := elemKinds[uint64(v.DataType())]; kind != nil {
		if t, ok := kind.toTensor(v); ok {
			return t, nil
		}
	}
	return nil, fmt.Errorf("%w: the model returned a tensor of type %s, which cannot be stored",
		ErrUnsupportedDType, onnxTypeName(uint64(v.DataType())))
}

func stringTensorFromValue(st *ort.StringTensor) (*Tensor, error) {
	shape := []int64(st.GetShape())
	var elems []string
	if len(shape) == 0 {
		// GetContents sizes its result by the shape's FlattenedSize, which
		// the binding defines as 0 for rank 0.
		e, err := st.GetElement(0)
		if err != nil {
			return nil, newORTError(err)
		}
		elems = []string{e}
	} else {
		var err error
		if elems, err = st.GetContents(); err != nil {
			return nil, newORTError(err)
		}
	}
	size := 0
	for _, e := range elems {
		if strings.IndexByte(e, 0) >= 0 {
			return nil, fmt.Errorf("%w (in a STRING output)", ErrNullInString)
		}
		size += len(e) + 1
	}
	data := make([]byte, 0, size)
	for _, e := range elems {
		data = append(data, e...)
		data = append(data, 0)
	}
	return &Tensor{DType: String, Shape: shape, Data: data}, nil
}

// elemKind holds what the numeric element types need, per ONNX type.
type elemKind struct {
	onnx  uint64
	dtype DType
	size  int
	// newScalar makes a rank-0 value from one element's bytes (nil: zero).
	newScalar func(b []byte) (ort.Value, error)
	// newEmpty makes a zero-element value of the given shape.
	newEmpty func(shape ort.Shape) (ort.Value, error)
	// toTensor converts an output value of this type.
	toTensor func(v ort.Value) (*Tensor, bool)
}

var elemKinds = map[uint64]*elemKind{
	onnxFloat:  kindOf[float32](Float),
	onnxDouble: kindOf[float64](Double),
	onnxInt8:   kindOf[int8](Int8),
	onnxInt16:  kindOf[int16](Int16),
	onnxInt32:  kindOf[int32](Int32),
	onnxInt64:  kindOf[int64](Int64),
	onnxUint8:  kindOf[uint8](Uint8),
	onnxUint16: kindOf[uint16](Uint16),
	onnxBool:   kindOf[bool](Bool),
	onnxUint32: kindOf[uint32](Uint32),
	onnxUint64: kindOf[uint64](Uint64),
}

func kindOf[T ort.TensorData](dt DType) *elemKind {
	var zero T
	return &elemKind{
		onnx:  dtypeToONNX(dt),
		dtype: dt,
		size:  int(unsafe.Sizeof(zero)),
		newScalar: func(b []byte) (ort.Value, error) {
			var v T
			if b != nil {
				copy(unsafe.Slice((*byte)(unsafe.Pointer(&v)), unsafe.Sizeof(v)), b)
			}
			return orNil(ort.NewScalar(v))
		},
		newEmpty: func(shape ort.Shape) (ort.Value, error) {
			return orNil(ort.NewTensor[T](shape, nil))
		},
		toTensor: func(v ort.Value) (*Tensor, bool) {
			switch x := v.(type) {
			case *ort.Tensor[T]:
				// The binding copied ORT's buffer into this Go slice; it
				// outlives the ORT value, so it becomes Data as is.
				return &Tensor{DType: dt, Shape: []int64(x.GetShape()), Data: sliceBytes(x.GetData())}, true
			case *ort.Scalar[T]:
				e := x.GetData()
				data := append([]byte(nil), unsafe.Slice((*byte)(unsafe.Pointer(&e)), unsafe.Sizeof(e))...)
				return &Tensor{DType: dt, Shape: []int64{}, Data: data}, true
			}
			return nil, false
		},
	}
}

// orNil turns a typed nil value with an error into a nil ort.Value.
func orNil[V ort.Value](v V, err error) (ort.Value, error) {
	if err != nil {
		return nil, newORTError(err)
	}
	return v, nil
}

// sliceBytes views a slice of fixed-size elements as its bytes (the host
// is little-endian, as the Tensor layout requires).
func sliceBytes[T ort.TensorData](s []T) []byte {
	if len(s) == 0 {
		return []byte{}
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), len(s)*int(unsafe.Sizeof(s[0])))
}
