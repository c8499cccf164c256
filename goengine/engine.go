// Package goengine runs ONNX models in pure Go, behind the model layer's
// engine seam (modelstore.Engine): no cgo, no shared library, no files, no
// processes, no threads of its own. It is what runs inference inside an EGo
// enclave, where ONNX Runtime cannot be loaded (docs/ENCLAVE.md).
//
// The operators are github.com/advancedclimatesystems/gonnx's (opset 13, on
// gorgonia tensors) plus those our models and common published ones need
// that it lacks (ops.go: MaxPool, AveragePool, Sqrt, Identity, Neg, Pow,
// LogSoftmax; unary.go: Erf, Exp, Log, Floor, Ceil, Round, Reciprocal,
// Sign, Softplus, Elu, HardSigmoid, HardSwish, LeakyRelu, Clip, Min, Max;
// norm.go: Dropout, GlobalAveragePool, BatchNormalization, at inference,
// InstanceNormalization; reduce.go: ReduceSum, ReduceMax, ReduceMin,
// ReduceMean, ArgMax, ArgMin; expand.go: Expand,
// Tile, Split, Range, Slice; pad.go: Pad; convtranspose.go:
// ConvTranspose; cumsum.go: CumSum), each for the types ONNX Runtime's
// CPU provider has it for (but Range's INT16). A model is checked at
// Compile: one with an operator neither has, an opset before 11 or after
// 18 (opsets.go), a node using what its operator's version differs in
// from the engine's (older nodes are rewritten where they can be), or an
// operator given an input of a type it does not take (where the type is
// known before a run), is refused with an error that names it, so
// AI.MODELSTORE fails and nothing fails later.
//
// Costs, measured in docs/BENCHMARKS.md: runs are slower than ONNX
// Runtime's (no SIMD kernels, one core), and gonnx holds the weights as Go
// slices decoded from the model, a second copy beside the stored bytes.
// gonnx's operators may reshape shared initializers in place (Conv's bias,
// the recurrent operators' initial state; each gets headers of its own,
// ownHeaders), and the runs of one session take turns; different models
// run in parallel.
package goengine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/advancedclimatesystems/gonnx"
	gonnxproto "github.com/advancedclimatesystems/gonnx/onnx"
	"github.com/advancedclimatesystems/gonnx/ops"
	"github.com/advancedclimatesystems/gonnx/ops/opset13"
	"gorgonia.org/tensor"

	"github.com/enclaveai/enclaveai/modelstore"
)

// Engine is the pure-Go engine. The zero value is ready to use.
type Engine struct {
	// MaxTensorBytes bounds what the runs under way make together, and so
	// any one tensor an operator makes (bound.go); nil or 0 means
	// DefaultMaxTensorBytes. The server passes maxmemory's headroom.
	MaxTensorBytes func() int64
}

// Name implements modelstore.Engine.
func (Engine) Name() string { return "go" }

// getOperator resolves an operator type, ours first, then gonnx's, guarded.
func getOperator(opType string) (ops.Operator, error) {
	var op ops.Operator
	var err error
	switch f, ok := extraOps[opType]; {
	case ok:
		op, err = f()
	case mlOps[opType]:
		return nil, fmt.Errorf("%s is an ai.onnx.ml operator", opType)
	default:
		op, err = opset13.GetOperator(opType)
	}
	if err != nil {
		return nil, err
	}
	return &guarded{Operator: op, opType: opType}, nil
}

// mlOps are operators of the ai.onnx.ml domain that gonnx serves under the
// default domain, where ONNX has no such operator. They are refused: in a
// node of the ai.onnx.ml domain checkModel refuses every operator anyway,
// and gonnx's LinearRegressor dereferences a nil tensor and divides by zero
// on a node without attributes (FuzzGoEngineOps), both fatal in an enclave.
var mlOps = map[string]bool{"LinearRegressor": true, "Scaler": true}

// guarded checks an operator's inputs before it runs: required inputs are
// there, and none is empty (but a list the operator takes empty as left
// out, listInput, which it is then given as nil). gorgonia indexes
// tensors by their shapes, in goroutines of its own for some operators
// (Softmax), where a panic cannot be recovered and ends the process: an
// empty tensor (a zero dimension) reaching Softmax did that
// (FuzzGoEngineOps). The engine refuses empty tensors as any operator's
// input, those of the graph, its initializers and what an operator made.
type guarded struct {
	ops.Operator
	opType   string
	node     *gonnxproto.NodeProto // Init's: the attributes bound.go reads
	maxBytes int64                 // a bound on the tensor the operator makes (bound.go); 0: none (Compile's checks)
	budget   *runBudget            // the run's bound on all it makes (bound.go); nil: none
	deadline time.Time             // the run's (work.go); zero: none
}

// Init implements ops.Operator.
func (g *guarded) Init(n *gonnxproto.NodeProto) error {
	g.node = n
	return g.Operator.Init(n)
}

// ValidateInputs implements ops.Operator. A required input left out (an
// empty name in the node) arrives as nil, which operators dereference, some
// already here (PRelu): inside an enclave a nil dereference aborts, so it
// is refused first.
func (g *guarded) ValidateInputs(inputs []tensor.Tensor) ([]tensor.Tensor, error) {
	for i, t := range inputs {
		if t == nil && i < g.GetMinInputs() {
			return nil, fmt.Errorf("%s: input %d is required and missing", g.String(), i)
		}
		if t != nil {
			if err := wrongType(g, g.opType, g.node, i, t.Dtype()); err != nil {
				return nil, err
			}
		}
	}
	return g.Operator.ValidateInputs(inputs)
}

// wrongType is the error for input i of node n, of operator op, being of
// type dt that op does not take (its GetInputTypeConstraints), or nil.
// Compile checks the types the model declares or that follow from them
// (modelstore.ElemTypes); a run checks the others, with the same error,
// before gorgonia sees them.
func wrongType(op ops.Operator, opType string, n *gonnxproto.NodeProto, i int, dt tensor.Dtype) error {
	allowed := op.GetInputTypeConstraints()
	if i >= len(allowed) || slices.Contains(allowed[i], dt) {
		return nil
	}
	var names []string
	for _, t := range allowed[i] {
		if name := typeName(t); name != t.Name() {
			names = append(names, name)
		}
	}
	return fmt.Errorf("node %q (%s): input %d (%s) is %s, which this engine's %s does not take (%s)",
		n.GetName(), opType, i, n.GetInput()[i], typeName(dt), opType, strings.Join(names, ", "))
}

// Apply implements ops.Operator.
func (g *guarded) Apply(inputs []tensor.Tensor) ([]tensor.Tensor, error) {
	for i, t := range inputs {
		if t == nil {
			continue
		}
		if why := badShape(t); why != "" {
			return nil, fmt.Errorf("%s: input %d %s", g.String(), i, why)
		}
		if slices.Contains(t.Shape(), 0) {
			if !emptyList(g.Operator, i, t) {
				return nil, fmt.Errorf("%s: input %d has shape %v: this engine does not run empty tensors", g.String(), i, t.Shape())
			}
			// gorgonia's Data of an empty tensor indexes its first
			// element: the operator, and the checks below, see the
			// list left out, which ONNX makes the same.
			inputs = slices.Clone(inputs)
			inputs[i] = nil
		}
	}
	if r, ok := outputRank(g.opType, inputs); ok && r > maxRank {
		return nil, fmt.Errorf("%s would make a tensor of rank %d, past the engine's bound of %d dimensions", g.opType, r, maxRank)
	}
	if g.maxBytes > 0 {
		if err := checkOutput(g.opType, g.Operator, g.node, inputs, left(g.maxBytes)); err != nil {
			return nil, err
		}
	}
	if !g.deadline.IsZero() {
		if err := checkWork(g.opType, g.Operator, inputs, time.Until(g.deadline), workRate()); err != nil {
			return nil, err
		}
	}
	outs, err := g.Operator.Apply(ownHeaders(inputs))
	if err != nil {
		return nil, err
	}
	// A node may leave out its operator's trailing optional outputs (a
	// GRU's Y_h), where gonnx's operators make them all and gonnx then
	// fails the run ("could not set output tensor").
	if n := len(g.node.GetOutput()); g.node != nil && len(outs) > n {
		outs = outs[:n]
	}
	for i, t := range outs {
		if t == nil {
			continue
		}
		if why := badShape(t); why != "" {
			return nil, fmt.Errorf("%s: output %d %s", g.String(), i, why)
		}
	}
	if g.budget != nil {
		if err := g.budget.add(g.opType, outs); err != nil {
			return nil, err
		}
	}
	return outs, err
}

// listInput is an operator whose input i is a list that ONNX lets be
// empty, which the guard gives it as nil, as if left out: a Reduce
// operator's axes (every axis, or none with noop_with_empty_axes),
// Squeeze's and Unsqueeze's axes, Split's sizes.
type listInput interface{ emptyIsLeftOut(i int) bool }

// emptyList reports whether t, input i of op, is an empty list that op
// takes as left out: a 1-D tensor of no elements.
func emptyList(op ops.Operator, i int, t tensor.Tensor) bool {
	l, ok := op.(listInput)
	return ok && l.emptyIsLeftOut(i) && len(t.Shape()) == 1 && t.Shape()[0] == 0
}

// ownHeaders gives an operator tensor headers of its own, the data
// shared. gonnx's operators reshape some inputs in place (Conv's bias, to
// broadcast it; RNN's, GRU's and LSTM's initial_h and LSTM's initial_c,
// from [1, batch, hidden] to [batch, hidden]), and an initializer is
// shared by all runs of a model, a tensor by all the nodes that read it:
// the second run of a recurrent operator whose initial state was an
// initializer failed (review).
func ownHeaders(in []tensor.Tensor) []tensor.Tensor {
	out := make([]tensor.Tensor, len(in))
	for i, t := range in {
		out[i] = t
		if d, ok := t.(*tensor.Dense); ok && d != nil {
			out[i] = d.ShallowClone()
		}
	}
	return out
}

// Supported reports whether the engine has an operator of this type.
func Supported(opType string) bool {
	_, err := getOperator(opType)
	return err == nil
}

// Compile implements modelstore.Engine. SessionOptions tune ONNX Runtime
// only and are ignored.
func (e Engine) Compile(src modelstore.ModelSource, _ modelstore.SessionOptions) (_ modelstore.EngineSession, err error) {
	defer contain(&err, "compiling the model", nil)
	workRate() // measured once, here rather than inside a run's time (work.go)
	inputs, outputs, err := modelstore.ReadGraphIO(src.Data)
	if err != nil {
		return nil, err
	}
	// The sanitizer's rules refuse attributes no engine should trust, and
	// it guards integer division, which would panic in Go on a zero
	// divisor: x / 0 is x, as in ONNX Runtime's runs (Where, Equal, Cast).
	data := src.Data
	if safe, err := modelstore.SanitizeModel(data); err != nil {
		return nil, err
	} else if safe != nil {
		data = safe
	}
	for _, io := range append(slices.Clip(inputs), outputs...) {
		if io.DType == modelstore.DTypeInvalid || io.DType == modelstore.String {
			return nil, refuse("%s is %s, which this engine does not run", io.Name, io.ElemType)
		}
	}
	// A large model is decoded without its large weights, which
	// decodeWeights then reads from data: the protobuf decoder would copy
	// them first (three copies at the peak instead of two).
	parse, err := modelstore.WithoutLargeWeights(data)
	if err != nil {
		return nil, err
	}
	if parse == nil {
		parse = data
	}
	mp, err := gonnx.ModelProtoFromBytes(parse)
	if err != nil {
		return nil, refuse("cannot parse the model: %v", err)
	}
	types, err := modelstore.ElemTypes(data)
	if err != nil {
		return nil, err
	}
	if err := checkModel(mp, types); err != nil {
		return nil, err
	}
	if err := decodeWeights(mp.Graph, data); err != nil {
		return nil, refuse("reading the model's initializers: %v", err)
	}
	m, err := gonnx.NewModel(forGonnx(mp))
	if err != nil {
		return nil, refuse("%v", err)
	}
	m.GetOperator = getOperator
	// The float weights now live in gonnx's tensors only (decodeWeights).
	return &session{model: m, inputs: inputs, outputs: outputs, maxBytes: e.MaxTensorBytes}, nil
}

// refuse is an error of Compile or Run, as clients see it after "ERR ".
func refuse(format string, args ...any) error {
	return &modelstore.EngineError{Msg: "pure-Go engine: " + fmt.Sprintf(format, args...)}
}

// checkModel refuses what the engine cannot run: an opset outside
// MinOpset to MaxOpset, a node that uses what its operator's version at
// the model's opset has and opset 13's has not (adaptNodes, which also
// rewrites the nodes of older opsets into opset 13's terms),
// operators of other domains, operators it lacks (all of them named),
// subgraphs and functions, and an operator given an input of a type it
// does not take, where types (modelstore.ElemTypes) knows the type: an
// INT32 Gemm was taken and failed every run with gorgonia's "getFloatDense
// only handles floats" (ONNX Runtime refuses it when it is stored).
func checkModel(mp *gonnxproto.ModelProto, types map[string]modelstore.DType) error {
	if mp.Graph == nil {
		return refuse("the model has no graph")
	}
	opset, err := defaultOpset(mp)
	if err != nil {
		return err
	}
	if len(mp.GetFunctions()) > 0 {
		return refuse("the model defines functions, which this engine does not run")
	}
	var missing []string
	for _, n := range mp.Graph.GetNode() {
		name := n.GetOpType()
		if d := n.GetDomain(); d != "" && d != "ai.onnx" {
			name = d + "." + name
		} else if Supported(name) {
			continue
		}
		if !slices.Contains(missing, name) {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return refuse("unsupported operator %s (inference-engine onnxruntime runs it)", strings.Join(missing, ", "))
	}
	if err := checkAttributeTypes(mp.Graph); err != nil {
		return err
	}
	if err := adaptNodes(mp.Graph, opset); err != nil {
		return err
	}
	if err := refuseTraining(mp.Graph); err != nil {
		return err
	}
	// Attributes: each operator's Init refuses what it does not implement.
	// gonnx's Constant and ConstantOfShape read a "value" attribute's
	// tensor, and dereference a missing one (fatal in an enclave): one
	// declared of another type is refused above, one declared TENSOR
	// without one by the sanitizer (Compile).
	//
	// The sanitizer's guard of an integer division comes before it: an
	// INT8 Div is refused on the Div, not on the guard's Cast.
	nodes := slices.Clone(mp.Graph.GetNode())
	slices.SortStableFunc(nodes, func(a, b *gonnxproto.NodeProto) int {
		return guardNode(a) - guardNode(b)
	})
	for _, n := range nodes {
		op, err := getOperator(n.GetOpType())
		if err == nil {
			err = op.Init(n)
		}
		if err != nil {
			return refuse("node %q (%s): %v", n.GetName(), n.GetOpType(), err)
		}
		for i, in := range n.GetInput() {
			if dt, ok := types[in]; ok && in != "" {
				if err := wrongType(op, n.GetOpType(), n, i, dtypes[dt]); err != nil {
					return refuse("%v", err)
				}
			}
		}
	}
	return nil
}

// guardNode is 1 for a node the sanitizer added (modelstore.GuardPrefix).
func guardNode(n *gonnxproto.NodeProto) int {
	if strings.HasPrefix(n.GetName(), modelstore.GuardPrefix) {
		return 1
	}
	return 0
}

// contain turns a panic of gonnx or gorgonia into *err: both index slices
// by shapes that a model or an input may get wrong (a Gather whose indices
// are empty panics with an index out of range), and in the enclave build
// the engine runs in the server's own process. onPanic, when set, runs
// first (Run quarantines its session). A panic that is a signal inside EGo
// (a nil dereference) aborts the enclave before any deferred call runs:
// FuzzGoEngineOps looks for those, which need a check before the engine
// runs, not a recover.
func contain(err *error, what string, onPanic func(r any)) {
	r := recover()
	if r == nil {
		return
	}
	if onPanic != nil {
		onPanic(r)
	}
	*err = refuse("%s failed inside the engine: %v", what, r)
}

// terminated is Run's error when its context ended it (the model's
// MODEL_EXECUTION_TIMEOUT), worded like ONNX Runtime's for clients that
// look for "terminate".
func terminated(err error) error {
	return refuse("the run was terminated: %v (MODEL_EXECUTION_TIMEOUT)", err)
}

// session is a compiled model. gonnx evaluates the graph node by node;
// Run resolves operators through a getter that first checks the run's
// context, so a TIMEOUT stops a run at the next node.
type session struct {
	mu      sync.Mutex // runs take turns; guards model and broken
	model   *gonnx.Model
	broken  error // set by a run that panicked: its operators may have left shared tensors half-written
	inputs  []modelstore.IOInfo
	outputs []modelstore.IOInfo
	// maxBytes bounds a tensor an operator makes (Engine.MaxTensorBytes).
	maxBytes func() int64
}

func (s *session) Inputs() []modelstore.IOInfo  { return s.inputs }
func (s *session) Outputs() []modelstore.IOInfo { return s.outputs }

// Weights implements modelstore.EngineSession: gonnx holds its own copy.
func (s *session) Weights() (modelstore.WeightsMode, int64) { return modelstore.WeightsCopied, 0 }

// Quarantined implements modelstore.Quarantiner: the error runs get after
// one panicked inside the engine, until the model is stored again.
func (s *session) Quarantined() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.broken
}

// Close implements modelstore.EngineSession: it waits for a run in flight.
func (s *session) Close() error {
	s.mu.Lock()
	s.model = nil
	s.mu.Unlock()
	return nil
}

// Run implements modelstore.EngineSession.
func (s *session) Run(ctx context.Context, inputs []*modelstore.Tensor) (_ []*modelstore.Tensor, err error) {
	if err := ctx.Err(); err != nil {
		return nil, terminated(err)
	}
	if len(inputs) != len(s.inputs) {
		return nil, fmt.Errorf("%w: the model takes %d, got %d", modelstore.ErrInputCount, len(s.inputs), len(inputs))
	}
	feed := make(gonnx.Tensors, len(inputs))
	for i, t := range inputs {
		in := s.inputs[i]
		if t == nil {
			return nil, errors.New("missing tensor")
		}
		if in.DType != modelstore.DTypeInvalid && t.DType != in.DType {
			return nil, refuse("input %d (%s) is %s, the model wants %s", i, in.Name, t.DType, in.DType)
		}
		g, err := toGonnx(t)
		if err != nil {
			return nil, fmt.Errorf("input %d (%s): %w", i, in.Name, err)
		}
		feed[in.Name] = g
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.model == nil {
		return nil, modelstore.ErrSessionClosed
	}
	if s.broken != nil {
		return nil, s.broken
	}
	defer contain(&err, "the run", func(r any) {
		s.broken = &modelstore.EngineError{Msg: fmt.Sprintf("model execution failed: the model is quarantined: "+
			"a run failed inside the pure-Go engine (%v); store it again", r)}
	})
	m := *s.model // this run's getter sees its context
	bound := int64(DefaultMaxTensorBytes)
	if s.maxBytes != nil {
		if b := s.maxBytes(); b > 0 {
			bound = b
		}
	}
	budget := &runBudget{max: bound}
	defer budget.done()
	deadline, _ := ctx.Deadline()
	m.GetOperator = func(opType string) (ops.Operator, error) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		op, err := getOperator(opType)
		if g, ok := op.(*guarded); ok {
			g.maxBytes, g.budget, g.deadline = bound, budget, deadline
		}
		return op, err
	}
	res, err := m.Run(feed)
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, terminated(ctxErr)
		}
		return nil, refuse("%v", err)
	}
	outs := make([]*modelstore.Tensor, len(s.outputs))
	for i, o := range s.outputs {
		g, ok := res[o.Name]
		if !ok || g == nil {
			continue
		}
		t, err := fromGonnx(g)
		if err != nil {
			return nil, fmt.Errorf("output %d (%s): %w", i, o.Name, err)
		}
		outs[i] = t
	}
	return outs, nil
}
