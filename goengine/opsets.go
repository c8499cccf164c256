package goengine

import (
	"fmt"
	"slices"
	"strings"

	gonnxproto "github.com/advancedclimatesystems/gonnx/onnx"
)

// The engine's operators are opset 13's (gonnx's, and ours in ops.go),
// but for ReduceMax, ReduceMin and ReduceMean, which are opset 18's (their
// axes an input), and Pad and Split, which take what 18 added too (Pad's
// input axes, Split's num_outputs). A model names, for each node, the operator's latest
// version at or below the opset it imports, which is what ONNX Runtime
// runs. From MinOpset to MaxOpset, each operator the engine has either is
// the same at every opset, or has versions there (changes) whose
// differences are types (checked against each operator's own list, as at
// opset 13), or that adaptNodes makes good: it refuses a node that uses
// what a version after the engine's added (by name), and rewrites one of
// a model older than the engine's version into its terms (Softmax's 2-D
// coercion, Squeeze's, Unsqueeze's and the Reduce operators' axes as an
// attribute). PyTorch exports at opset 17 by default since 2.0, its dynamo
// exporter (torch.onnx.export(dynamo=True)) and onnx's version converter
// at 18, and many published models are of opset 11 or 12; the enclave
// build refused them all ("runs opset 13 only").
//
// The versions are the ONNX operator schemas' (onnx 1.12, up to opset 17,
// and opset 18's as gen_models.py lists them for an onnx that predates
// it); TestChangesMatchTheSchemas checks the table against them
// (redis_tests/models/onnx_versions.json, written by gen_models.py).
const (
	// MinOpset is the oldest default-domain opset the engine runs:
	// before 11 more operators differ (Slice's starts and ends as
	// attributes, the axes that could not be negative).
	MinOpset = 11
	// MaxOpset is the newest: at 19 Pad gains its wrap mode,
	// AveragePool dilations, and Cast, Constant, Equal, Identity, Reshape
	// and Shape new types.
	MaxOpset = 18
)

// change is a version of an operator after MinOpset up to MaxOpset: at is
// the version, and apply (nil: the version changed types only) adapts a
// node to the engine's operator. For a version after 13 it runs on every
// node of the operator, reached telling whether the model's opset has the
// version: it refuses what the version added (unknown attributes before
// it, which ONNX Runtime refuses too, where gonnx's Reshape and Shape
// would ignore them), or, where the engine's operator is that version's
// (the Reduce operators' 18), rewrites an older node into its terms. For
// a version up to 13 it runs on the nodes of a model whose opset is older
// than at, and rewrites or refuses them.
type change struct {
	at    int64
	apply func(e *edit, n *gonnxproto.NodeProto, reached bool) error
}

// changes holds every operator the engine has that has a version after
// MinOpset up to MaxOpset; one missing here is the same at all of them.
var changes = map[string][]change{
	// 13: BFLOAT16 and the like; 14: UINT8, INT8, UINT16, INT16.
	"Add": {{13, nil}, {14, nil}},
	"Sub": {{13, nil}, {14, nil}},
	"Mul": {{13, nil}, {14, nil}},
	"Div": {{13, nil}, {14, nil}},
	// 13: BFLOAT16; 14: the integer types.
	"Relu": {{13, nil}, {14, nil}},
	// 13: BFLOAT16; 14 and 16: optional and sequence values, which no
	// model here has.
	"Identity": {{13, nil}, {14, nil}, {16, nil}},
	// 12: an exponent of another type than the base's; 13, 15: BFLOAT16.
	"Pow": {{12, nil}, {13, nil}, {15, nil}},
	// 16: BFLOAT16.
	"PRelu": {{16, nil}},
	"Where": {{16, nil}},
	// New at 12; 16: BFLOAT16.
	"GreaterOrEqual": {{12, absentBefore}, {16, nil}},
	"LessOrEqual":    {{12, absentBefore}, {16, nil}},
	// 12: INT8 and UINT8.
	"MaxPool": {{12, nil}},
	// 12: value_float, value_ints and the like; 13: BFLOAT16.
	"Constant": {{12, nil}, {13, nil}},
	// 13: BFLOAT16 (and, for Cast, its casts); the operators are the same.
	"Abs": {{13, nil}}, "Cast": {{13, nil}}, "Concat": {{13, nil}}, "Equal": {{13, nil}},
	"Erf": {{13, nil}}, "Exp": {{13, nil}}, "Log": {{13, nil}},
	"Flatten": {{13, nil}}, "Gather": {{13, nil}}, "Gemm": {{13, nil}}, "Greater": {{13, nil}},
	"Less": {{13, nil}}, "MatMul": {{13, nil}}, "Neg": {{13, nil}},
	"Sigmoid": {{13, nil}}, "Slice": {{13, nil}}, "Sqrt": {{13, nil}}, "Tanh": {{13, nil}},
	"Transpose": {{13, nil}}, "Expand": {{13, nil}}, "Tile": {{13, nil}},
	"Floor": {{13, nil}}, "Ceil": {{13, nil}}, "Reciprocal": {{13, nil}}, "Sign": {{13, nil}},
	// 13: Softmax and LogSoftmax over one axis; before, over all the
	// dimensions from axis on (by default 1), as a 2-D matrix.
	"Softmax":    {{13, coercedSoftmax}},
	"LogSoftmax": {{13, coercedSoftmax}},
	// 12: select_last_index; 13: BFLOAT16.
	"ArgMax": {{12, lastIndexBefore12}, {13, nil}},
	"ArgMin": {{12, lastIndexBefore12}, {13, nil}},
	// New at 14 (PyTorch exports Hardswish before it as x times a
	// HardSigmoid).
	"HardSwish": {{14, absentBefore}},
	// 12: more types (Clip, Min and Max: the integers; ReduceMax and
	// ReduceMin: INT8 and UINT8); 13: BFLOAT16.
	"Clip": {{12, nil}, {13, nil}}, "Min": {{12, nil}, {13, nil}}, "Max": {{12, nil}, {13, nil}},
	// 18: the axes an input, and noop_with_empty_axes (ReduceSum's at 13).
	"ReduceMax":  {{12, nil}, {13, nil}, {18, axesToInput(18)}},
	"ReduceMin":  {{12, nil}, {13, nil}, {18, axesToInput(18)}},
	"ReduceMean": {{13, nil}, {18, axesToInput(18)}},
	// 13: BFLOAT16; 18: the optional input axes, the axes that pads pad.
	"Pad": {{13, nil}, {18, padAxes}},
	// 16: BFLOAT16 (and, in ONNX Runtime, DOUBLE).
	"LeakyRelu": {{16, nil}},
	// 14: BFLOAT16 and FLOAT16.
	"CumSum": {{14, nil}},
	// 13: the axes are an input; before, an attribute.
	"Squeeze": {{13, axesToInput(13)}},
	// 13: the sizes are an input; before, an attribute. 18: num_outputs,
	// equal parts but the last, which may be smaller.
	"Split":     {{13, splitToInput}, {18, numOutputs}},
	"Unsqueeze": {{13, axesToInput(13)}},
	"ReduceSum": {{13, axesToInput(13)}},
	// 13: BFLOAT16; 14: allowzero, where a 0 in the shape means a
	// dimension of 0 rather than the input's own.
	"Reshape": {{13, nil}, {14, func(e *edit, n *gonnxproto.NodeProto, _ bool) error {
		if attrInt(n, "allowzero", 0) != 0 {
			return e.cannot(n, "allowzero 1 (opset 14)")
		}
		return nil
	}}},
	// 13: BFLOAT16; 15: start and end, a slice of the shape.
	"Shape": {{13, nil}, {15, func(e *edit, n *gonnxproto.NodeProto, _ bool) error {
		for _, a := range n.GetAttribute() {
			if a.GetName() == "start" || a.GetName() == "end" {
				return e.cannot(n, "attribute "+a.GetName()+" (opset 15)")
			}
		}
		return nil
	}}},
	// 12: ratio and training_mode as inputs; before, ratio an
	// attribute. 13: BFLOAT16.
	"Dropout": {{12, dropoutRatio}, {13, nil}},
	// 14: training_mode, and the running statistics as outputs when it
	// is 1; 15: scale and B, mean and var of other types than X's.
	"BatchNormalization": {{14, batchNormTraining}, {15, nil}},
	// 14: layout, batch first when 1.
	"RNN":  {{14, layoutZero}},
	"GRU":  {{14, layoutZero}},
	"LSTM": {{14, layoutZero}},
	// New in the default domain at 17; ONNX Runtime has it there from
	// version 1 too, as a contrib operator of its own, so it runs at any
	// opset.
	"LayerNormalization": {{17, nil}},
}

// layoutZero refuses a layout of 1 and drops one of 0 (opset 13's
// meaning, which the recurrent operators' Init refuses by name) where the
// model's opset has the attribute.
func layoutZero(e *edit, n *gonnxproto.NodeProto, reached bool) error {
	if attrInt(n, "layout", 0) != 0 {
		return e.cannot(n, "layout 1 (opset 14)")
	}
	if reached {
		n.Attribute = dropAttr(n.GetAttribute(), "layout")
	}
	return nil
}

// absentBefore refuses an operator in a model older than its first
// version, as ONNX Runtime does.
func absentBefore(_ *edit, n *gonnxproto.NodeProto, reached bool) error {
	if reached { // a version after 13, and the model's opset has it
		return nil
	}
	return refuse("node %q (%s): no such operator in the model's opset", n.GetName(), n.GetOpType())
}

// coercedSoftmax is Softmax (or LogSoftmax) before opset 13: the input as
// a 2-D matrix, the dimensions before axis its rows, softmax along each
// row, then the input's shape again; written as Shape, Flatten, opset
// 13's Softmax (LogSoftmax) over the last axis, and Reshape. (Of a 1-D
// input at the default axis 1, which ONNX Runtime refuses at its run, it
// makes ones, or zeros.)
func coercedSoftmax(e *edit, n *gonnxproto.NodeProto, _ bool) error {
	if len(n.GetInput()) != 1 || len(n.GetOutput()) != 1 {
		return nil // the operator refuses it
	}
	x, y := n.GetInput()[0], n.GetOutput()[0]
	shape, flat, soft := e.fresh(y+"/shape"), e.fresh(y+"/flat"), e.fresh(y+"/softmax")
	axis := &gonnxproto.AttributeProto{Name: "axis", Type: gonnxproto.AttributeProto_INT, I: attrInt(n, "axis", 1)}
	last := &gonnxproto.AttributeProto{Name: "axis", Type: gonnxproto.AttributeProto_INT, I: -1}
	e.emit(
		&gonnxproto.NodeProto{Name: n.GetName() + "/shape", OpType: "Shape", Input: []string{x}, Output: []string{shape}},
		&gonnxproto.NodeProto{Name: n.GetName() + "/flatten", OpType: "Flatten", Input: []string{x}, Output: []string{flat}, Attribute: []*gonnxproto.AttributeProto{axis}},
		&gonnxproto.NodeProto{Name: n.GetName(), OpType: n.GetOpType(), Input: []string{flat}, Output: []string{soft}, Attribute: []*gonnxproto.AttributeProto{last}},
		&gonnxproto.NodeProto{Name: n.GetName() + "/reshape", OpType: "Reshape", Input: []string{soft, shape}, Output: []string{y}},
	)
	return nil
}

// lastIndexBefore12 refuses ArgMax's and ArgMin's select_last_index in a
// model older than opset 12, which added it.
func lastIndexBefore12(e *edit, n *gonnxproto.NodeProto, _ bool) error {
	for _, a := range n.GetAttribute() {
		if a.GetName() == "select_last_index" {
			return e.cannot(n, "attribute select_last_index before opset 12")
		}
	}
	return nil
}

// axesToInput(at) moves the axes attribute of Squeeze, Unsqueeze or a
// Reduce operator in a model older than opset at (13 for Squeeze,
// Unsqueeze and ReduceSum, 18 for ReduceMax, ReduceMin and ReduceMean)
// into an initializer given as their second input (version at's). A
// Squeeze without axes (or with none listed) removes every dimension of 1,
// a Reduce operator without them reduces every axis, in both forms; an
// Unsqueeze of no axes is its input. noop_with_empty_axes, which came with
// the input, is refused before it, and an axes attribute from it on, as
// ONNX Runtime refuses them.
func axesToInput(at int64) func(e *edit, n *gonnxproto.NodeProto, reached bool) error {
	return func(e *edit, n *gonnxproto.NodeProto, reached bool) error {
		if reached { // a version after 13, and the model's opset has it
			if slices.ContainsFunc(n.GetAttribute(), func(a *gonnxproto.AttributeProto) bool { return a.GetName() == "axes" }) {
				return refuse("node %q (%s): attribute axes, which opset %d made an input", n.GetName(), n.GetOpType(), at)
			}
			return nil
		}
		var axes []int64
		found := false
		for _, a := range n.GetAttribute() {
			if a.GetName() == "axes" {
				axes, found = a.GetInts(), true
			}
		}
		switch {
		case len(n.GetInput()) != 1 || len(n.GetOutput()) != 1:
			return e.absent(n, fmt.Sprintf("other inputs than the data before opset %d", at))
		case strings.HasPrefix(n.GetOpType(), "Reduce") && slices.ContainsFunc(n.GetAttribute(), func(a *gonnxproto.AttributeProto) bool {
			return a.GetName() == "noop_with_empty_axes"
		}):
			return e.absent(n, fmt.Sprintf("noop_with_empty_axes before opset %d", at))
		case !found && n.GetOpType() == "Unsqueeze":
			return e.cannot(n, "no axes")
		case len(axes) == 0 && n.GetOpType() == "Unsqueeze":
			// No axis to insert: the input as it is, as ONNX Runtime has it.
			n.Attribute = dropAttr(n.GetAttribute(), "axes")
			e.emit(&gonnxproto.NodeProto{Name: n.GetName(), OpType: "Identity", Input: n.GetInput(), Output: n.GetOutput()})
			return nil
		case len(axes) == 0:
			// Squeeze every dimension of 1, reduce every axis.
			n.Attribute = dropAttr(n.GetAttribute(), "axes")
			return nil
		}
		name := e.fresh(n.GetOutput()[0] + "/axes")
		e.g.Initializer = append(e.g.Initializer, &gonnxproto.TensorProto{Name: name, Dims: []int64{int64(len(axes))},
			DataType: int32(gonnxproto.TensorProto_INT64), Int64Data: slices.Clone(axes)})
		n.Input = append(n.Input, name)
		n.Attribute = dropAttr(n.GetAttribute(), "axes")
		return nil
	}
}

// padAxes refuses Pad's input axes (its fourth) in a model older than
// opset 18, which added it, as ONNX Runtime refuses a fourth input there.
func padAxes(e *edit, n *gonnxproto.NodeProto, reached bool) error {
	if !reached && len(n.GetInput()) > 3 {
		return e.absent(n, "input axes (opset 18)")
	}
	return nil
}

// numOutputs refuses Split's num_outputs in a model older than opset 18,
// which added it.
func numOutputs(e *edit, n *gonnxproto.NodeProto, reached bool) error {
	if !reached && slices.ContainsFunc(n.GetAttribute(), func(a *gonnxproto.AttributeProto) bool { return a.GetName() == "num_outputs" }) {
		return e.absent(n, "attribute num_outputs (opset 18)")
	}
	return nil
}

// splitToInput moves Split's split attribute (before opset 13) into an
// initializer given as its second input (opset 13's).
func splitToInput(e *edit, n *gonnxproto.NodeProto, _ bool) error {
	if len(n.GetInput()) != 1 {
		return e.cannot(n, "other inputs than the data before opset 13")
	}
	for _, a := range n.GetAttribute() {
		if a.GetName() != "split" {
			continue
		}
		name := e.fresh(n.GetName() + "/split")
		e.g.Initializer = append(e.g.Initializer, &gonnxproto.TensorProto{Name: name, Dims: []int64{int64(len(a.GetInts()))},
			DataType: int32(gonnxproto.TensorProto_INT64), Int64Data: slices.Clone(a.GetInts())})
		n.Input = append(n.Input, name)
		n.Attribute = dropAttr(n.GetAttribute(), "split")
		break
	}
	return nil
}

// edit is a graph being adapted to the engine's operators.
type edit struct {
	g     *gonnxproto.GraphProto
	names map[string]bool         // every value name of the graph
	repl  []*gonnxproto.NodeProto // what stands for the node at hand (nil: itself)
}

// fresh is a value name not yet in the graph, base if it is free.
func (e *edit) fresh(base string) string {
	name := base
	for i := 1; e.names[name]; i++ {
		name = fmt.Sprintf("%s.%d", base, i)
	}
	e.names[name] = true
	return name
}

// emit makes nodes stand for the node at hand.
func (e *edit) emit(nodes ...*gonnxproto.NodeProto) { e.repl = append(e.repl, nodes...) }

// cannot is the error for node n using what this engine does not run.
func (e *edit) cannot(n *gonnxproto.NodeProto, what string) error {
	return refuse("node %q (%s) uses %s, which this engine does not run (inference-engine onnxruntime does)", n.GetName(), n.GetOpType(), what)
}

// absent is the error for node n using what its operator's version at
// the model's opset does not have, which ONNX Runtime refuses too.
func (e *edit) absent(n *gonnxproto.NodeProto, what string) error {
	return refuse("node %q (%s) uses %s, which its version at the model's opset does not have", n.GetName(), n.GetOpType(), what)
}

// adaptNodes applies the changes of each node's operator for a model of
// the default domain's opset (change).
func adaptNodes(g *gonnxproto.GraphProto, opset int64) error {
	e := &edit{g: g, names: map[string]bool{}}
	for _, v := range g.GetInput() {
		e.names[v.GetName()] = true
	}
	for _, t := range g.GetInitializer() {
		e.names[t.GetName()] = true
	}
	for _, n := range g.GetNode() {
		for _, o := range n.GetOutput() {
			e.names[o] = true
		}
	}
	nodes := make([]*gonnxproto.NodeProto, 0, len(g.GetNode()))
	for _, n := range g.GetNode() {
		e.repl = nil
		for _, c := range changes[n.GetOpType()] {
			if c.apply == nil || c.at <= 13 && opset >= c.at {
				continue
			}
			if err := c.apply(e, n, opset >= c.at); err != nil {
				return err
			}
		}
		if e.repl == nil {
			nodes = append(nodes, n)
		} else {
			nodes = append(nodes, e.repl...)
		}
	}
	g.Node = nodes
	return nil
}

// attrInt is n's integer attribute name, or def when n has none.
func attrInt(n *gonnxproto.NodeProto, name string, def int64) int64 {
	for _, a := range n.GetAttribute() {
		if a.GetName() == name {
			return a.GetI()
		}
	}
	return def
}

// dropAttr is attrs without the one named name.
func dropAttr(attrs []*gonnxproto.AttributeProto, name string) []*gonnxproto.AttributeProto {
	out := attrs[:0:0]
	for _, a := range attrs {
		if a.GetName() != name {
			out = append(out, a)
		}
	}
	return out
}

// defaultOpset is the version of the default domain's opset that mp
// imports, or an error when the engine does not run it.
func defaultOpset(mp *gonnxproto.ModelProto) (int64, error) {
	var v int64
	found := false
	for _, o := range mp.GetOpsetImport() {
		if o.GetDomain() != "" && o.GetDomain() != "ai.onnx" {
			continue
		}
		if found && o.GetVersion() != v {
			return 0, refuse("the model imports ONNX opsets %d and %d", v, o.GetVersion())
		}
		v, found = o.GetVersion(), true
	}
	if !found {
		return 0, refuse("the model imports no ONNX opset")
	}
	if v < MinOpset || v > MaxOpset {
		return 0, refuse("the model imports ONNX opset %d; this engine runs opsets %d to %d", v, MinOpset, MaxOpset)
	}
	return v, nil
}

// forGonnx is mp as gonnx's NewModel takes it: importing opset 13, the
// one it has (the engine's getOperator then serves every node).
func forGonnx(mp *gonnxproto.ModelProto) *gonnxproto.ModelProto {
	return &gonnxproto.ModelProto{IrVersion: mp.GetIrVersion(), Graph: mp.Graph,
		OpsetImport: []*gonnxproto.OperatorSetIdProto{{Version: 13}}}
}
