package goengine

import (
	"fmt"
	"math"
	"reflect"
	"slices"

	gonnxproto "github.com/advancedclimatesystems/gonnx/onnx"
	"github.com/advancedclimatesystems/gonnx/ops"
	"github.com/advancedclimatesystems/gonnx/ops/opset13"
	"gorgonia.org/tensor"
)

// copyTypes are the element types Expand and Tile copy: every type ONNX
// Runtime's CPU provider has them for but FLOAT16 and (Tile) STRING,
// which the engine does not hold.
var copyTypes = []tensor.Dtype{tensor.Float32, tensor.Float64, tensor.Int8, tensor.Int16, tensor.Int32,
	tensor.Int64, tensor.Uint8, tensor.Uint16, tensor.Uint32, tensor.Uint64, tensor.Bool}

// expand is Expand (opset 8 and 13, the same but for BFLOAT16): the input
// broadcast with the shape its second input gives (numpy's rules, either
// side may be 1), a copy. HuggingFace's exports expand attention masks
// with it. Its output is bounded before it runs (bound.go: outputElems
// and outputRank); a dimension of 0 or below is refused, as the engine
// makes no empty tensors.
type expand struct{}

func (*expand) Init(n *gonnxproto.NodeProto) error {
	if len(n.GetAttribute()) > 0 {
		return ops.ErrUnsupportedAttribute(n.GetAttribute()[0].GetName(), &expand{})
	}
	return nil
}
func (o *expand) ValidateInputs(in []tensor.Tensor) ([]tensor.Tensor, error) {
	return ops.ValidateInputs(o, in)
}
func (*expand) GetMinInputs() int { return 2 }
func (*expand) GetMaxInputs() int { return 2 }
func (*expand) GetInputTypeConstraints() [][]tensor.Dtype {
	return [][]tensor.Dtype{copyTypes, {tensor.Int64}}
}
func (*expand) String() string { return "expand operator" }

func (o *expand) Apply(in []tensor.Tensor) ([]tensor.Tensor, error) {
	target, err := dims(o, in[1])
	if err != nil {
		return nil, err
	}
	var xs []int
	if !in[0].IsScalar() {
		xs = in[0].Shape()
	}
	// The input twice, as Where's X and Y, under a condition that always
	// holds: whereInto copies any type along broadcast strides.
	out, strides, err := broadcastShapes([][]int{nil, xs, xs, target})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", o, err)
	}
	x := flat(in[0])
	n := tensor.Shape(out).TotalSize() // bounded before Apply (outputElems)
	backing := reflect.MakeSlice(reflect.ValueOf(x).Type(), n, n).Interface()
	if err := whereInto(backing, []bool{true}, x, x, out, strides[:3]); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return []tensor.Tensor{tensor.New(tensor.FromScalar(reflect.ValueOf(backing).Index(0).Interface()))}, nil
	}
	return []tensor.Tensor{tensor.New(tensor.WithShape(out...), tensor.WithBacking(backing))}, nil
}

// dims reads a 1-D INT64 tensor of dimensions (Expand's shape, Tile's
// repeats), each at least 1 and at most maxRank of them.
func dims(op ops.Operator, t tensor.Tensor) ([]int, error) {
	v, ok := flat(t).([]int64)
	if !ok {
		return nil, ops.ErrInvalidInputType(1, t.Dtype().Name(), op)
	}
	if len(t.Shape()) > 1 || len(v) > maxRank {
		return nil, ops.ErrInvalidInput(fmt.Sprintf("input 1 of shape %v: a list of at most %d dimensions", t.Shape(), maxRank), op)
	}
	out := make([]int, len(v))
	for i, d := range v {
		if d < 1 || d > 1<<40 {
			return nil, ops.ErrInvalidInput(fmt.Sprintf("dimension %d of input 1 is %d: this engine makes no empty tensors", i, d), op)
		}
		out[i] = int(d)
	}
	return out, nil
}

// tile is Tile (opset 6 and 13, the same but for BFLOAT16): the input
// repeated repeats[d] times along each dimension d. Its output is bounded
// before it runs (bound.go: outputElems).
type tile struct{}

func (*tile) Init(n *gonnxproto.NodeProto) error {
	if len(n.GetAttribute()) > 0 {
		return ops.ErrUnsupportedAttribute(n.GetAttribute()[0].GetName(), &tile{})
	}
	return nil
}
func (o *tile) ValidateInputs(in []tensor.Tensor) ([]tensor.Tensor, error) {
	return ops.ValidateInputs(o, in)
}
func (*tile) GetMinInputs() int { return 2 }
func (*tile) GetMaxInputs() int { return 2 }
func (*tile) GetInputTypeConstraints() [][]tensor.Dtype {
	return [][]tensor.Dtype{copyTypes, {tensor.Int64}}
}
func (*tile) String() string { return "tile operator" }

func (o *tile) Apply(in []tensor.Tensor) ([]tensor.Tensor, error) {
	reps, err := dims(o, in[1])
	if err != nil {
		return nil, err
	}
	if in[0].IsScalar() || len(reps) != len(in[0].Shape()) {
		return nil, ops.ErrInvalidInput(fmt.Sprintf("%d repeats for an input of rank %d", len(reps), len(in[0].Shape())), o)
	}
	xs := in[0].Shape()
	out := make([]int, len(xs))
	for d := range xs {
		out[d] = xs[d] * reps[d] // bounded before Apply (outputElems)
	}
	x := flat(in[0])
	n := tensor.Shape(out).TotalSize()
	backing := reflect.MakeSlice(reflect.ValueOf(x).Type(), n, n).Interface()
	if err := tileInto(backing, x, xs, out); err != nil {
		return nil, fmt.Errorf("%s: %w", o, err)
	}
	return []tensor.Tensor{tensor.New(tensor.WithShape(out...), tensor.WithBacking(backing))}, nil
}

// tileInto fills out (of shape, a slice of x's type) with x (of xs)
// repeated.
func tileInto(out, x any, xs, shape []int) error {
	switch o := out.(type) {
	case []float32:
		tileOf(o, x.([]float32), xs, shape)
	case []float64:
		tileOf(o, x.([]float64), xs, shape)
	case []int8:
		tileOf(o, x.([]int8), xs, shape)
	case []int16:
		tileOf(o, x.([]int16), xs, shape)
	case []int32:
		tileOf(o, x.([]int32), xs, shape)
	case []int64:
		tileOf(o, x.([]int64), xs, shape)
	case []uint8:
		tileOf(o, x.([]uint8), xs, shape)
	case []uint16:
		tileOf(o, x.([]uint16), xs, shape)
	case []uint32:
		tileOf(o, x.([]uint32), xs, shape)
	case []uint64:
		tileOf(o, x.([]uint64), xs, shape)
	case []bool:
		tileOf(o, x.([]bool), xs, shape)
	default:
		return fmt.Errorf("input of type %T", out)
	}
	return nil
}

// tileOf walks the output odometer style; the input's index along each
// dimension is the output's modulo the input's size there.
func tileOf[T any](out, x []T, xs, shape []int) {
	rank := len(shape)
	stride := make([]int, rank) // x's
	s := 1
	for d := rank - 1; d >= 0; d-- {
		stride[d] = s
		s *= xs[d]
	}
	idx, xi := make([]int, rank), make([]int, rank)
	a := 0
	for k := range out {
		out[k] = x[a]
		for d := rank - 1; d >= 0; d-- {
			idx[d]++
			xi[d]++
			a += stride[d]
			if xi[d] == xs[d] {
				xi[d] = 0
				a -= stride[d] * xs[d]
			}
			if idx[d] < shape[d] {
				break
			}
			idx[d] = 0
			// Back to the row's start: idx[d] wrapped a whole number of
			// times xs[d], so xi[d] is 0 again already.
		}
	}
}

// flatten is gonnx's Flatten with its axis checked against the input's
// rank first ([-r, r]): gonnx slices the shape with it, and an axis below
// -r panicked there, which quarantined a model that was merely wrong (the
// rewritten Softmax of opsets 11 and 12 flattens at the model's axis;
// review).
type flatten struct {
	ops.Operator
	axis int
}

func newFlatten() (ops.Operator, error) {
	op, err := opset13.GetOperator("Flatten")
	if err != nil {
		return nil, err
	}
	return &flatten{Operator: op}, nil
}

func (o *flatten) Init(n *gonnxproto.NodeProto) error {
	o.axis = int(attrInt(n, "axis", 1))
	return o.Operator.Init(n)
}

func (o *flatten) Apply(in []tensor.Tensor) ([]tensor.Tensor, error) {
	if r := len(in[0].Shape()); o.axis < -r || o.axis > r {
		return nil, ops.ErrAxisOutOfRange(-r, r, o.axis)
	}
	return o.Operator.Apply(in)
}

// squeeze is gonnx's Squeeze (or Unsqueeze) taking no attributes, as at
// opset 13 (gonnx ignored an axes attribute there, which ONNX Runtime
// refuses; the rewrite of opsets 11 and 12 makes it an input), with
// Squeeze's axes checked first: in range, of dimensions of 1, each once.
// gonnx passed over an axis out of range and squeezed nothing (review).
type squeeze struct {
	ops.Operator
	unsqueeze bool
}

func newSqueeze(unsqueeze bool) func() (ops.Operator, error) {
	return func() (ops.Operator, error) {
		name := "Squeeze"
		if unsqueeze {
			name = "Unsqueeze"
		}
		op, err := opset13.GetOperator(name)
		if err != nil {
			return nil, err
		}
		return &squeeze{Operator: op, unsqueeze: unsqueeze}, nil
	}
}

func (o *squeeze) Init(n *gonnxproto.NodeProto) error {
	if len(n.GetAttribute()) > 0 {
		return ops.ErrUnsupportedAttribute(n.GetAttribute()[0].GetName(), o.Operator)
	}
	return o.Operator.Init(n)
}

// emptyIsLeftOut implements listInput: Squeeze's empty axes are as if
// left out (every dimension of 1), and Unsqueeze's, which it requires,
// insert none (its input as it is, as Identity), as in ONNX Runtime.
func (*squeeze) emptyIsLeftOut(i int) bool { return i == 1 }

func (o *squeeze) Apply(in []tensor.Tensor) ([]tensor.Tensor, error) {
	if o.unsqueeze && len(in) > 1 && in[1] == nil { // empty axes, which the guard gives as nil (it refuses them left out)
		return []tensor.Tensor{in[0]}, nil
	}
	if o.unsqueeze || len(in) < 2 || in[1] == nil {
		return o.Operator.Apply(in)
	}
	axes, ok := flat(in[1]).([]int64)
	if !ok {
		return nil, ops.ErrInvalidInputType(1, in[1].Dtype().Name(), o.Operator)
	}
	shape := in[0].Shape()
	r := len(shape)
	if in[0].IsScalar() {
		r = 0
	}
	seen := make([]bool, r)
	for _, a := range axes {
		if a < int64(-r) || a >= int64(r) {
			return nil, ops.ErrAxisOutOfRange(-r, r-1, int(a))
		}
		d := (int(a) + r) % r
		if seen[d] || shape[d] != 1 {
			return nil, ops.ErrInvalidInput(fmt.Sprintf("axis %d of shape %v: each axis once, of a dimension of 1", a, shape), o.Operator)
		}
		seen[d] = true
	}
	return o.Operator.Apply(in)
}

// split is Split (opset 13: the sizes an optional INT64 input; before,
// an attribute, which the rewrite of opsets 11 and 12 makes the input,
// splitToInput; 18: num_outputs): the input cut along axis into as many
// outputs as the node has, of the sizes given, or equal ones (the
// dimension must divide evenly, as ONNX Runtime has it), or with
// num_outputs as ONNX Runtime cuts it: each ceil(dimension / outputs),
// the last the remainder, if any, of the dimension by that (and refused
// where they do not add up to it, as ONNX Runtime refuses them). ONNX
// defines num_outputs as the node's outputs, and not with the sizes:
// other uses are refused when the model is stored (ONNX Runtime refuses
// them where it knows the dimension then). Every type but FLOAT16 and
// STRING; no output outgrows the input. A size of 0 is refused, as the
// engine makes no empty tensors.
type split struct {
	axis       int
	outputs    int
	numOutputs bool // num_outputs (opset 18), as many as outputs
}

func (o *split) Init(n *gonnxproto.NodeProto) error {
	o.axis, o.outputs, o.numOutputs = 0, len(n.GetOutput()), false
	for _, a := range n.GetAttribute() {
		switch a.GetName() {
		case "axis":
			o.axis = int(a.GetI())
		case "num_outputs":
			if a.GetI() != int64(o.outputs) {
				return fmt.Errorf("%s: num_outputs %d for a node of %d outputs", o, a.GetI(), o.outputs)
			}
			if len(n.GetInput()) > 1 && n.GetInput()[1] != "" {
				return fmt.Errorf("%s: both the input split and num_outputs", o)
			}
			o.numOutputs = true
		default:
			return ops.ErrUnsupportedAttribute(a.GetName(), o)
		}
	}
	if o.outputs < 1 || o.outputs > maxVariadic {
		return fmt.Errorf("%s: %d outputs, where this engine takes 1 to %d", o, o.outputs, maxVariadic)
	}
	return nil
}
func (o *split) ValidateInputs(in []tensor.Tensor) ([]tensor.Tensor, error) {
	return ops.ValidateInputs(o, in)
}
func (*split) GetMinInputs() int { return 1 }
func (*split) GetMaxInputs() int { return 2 }
func (*split) GetInputTypeConstraints() [][]tensor.Dtype {
	return [][]tensor.Dtype{copyTypes, {tensor.Int64}}
}
func (*split) String() string { return "split operator" }

// emptyIsLeftOut implements listInput: empty sizes are as if left out
// (equal parts), as in ONNX Runtime.
func (*split) emptyIsLeftOut(i int) bool { return i == 1 }

// sizes is the sizes of the outputs along a dimension of dim elements,
// unchecked: the input split's, or num_outputs's as ONNX Runtime 1.24
// computes them (the quotient in float, as ONNX Runtime's); false for
// equal parts.
func (o *split) sizes(in []tensor.Tensor, dim int) ([]int64, bool) {
	if o.numOutputs {
		size := int(math.Ceil(float64(float32(dim) / float32(o.outputs))))
		v := make([]int64, o.outputs)
		for i := range v {
			v[i] = int64(size)
		}
		if r := dim % size; r != 0 {
			v[len(v)-1] = int64(r)
		}
		return v, true
	}
	if len(in) > 1 && in[1] != nil {
		v, _ := flat(in[1]).([]int64) // INT64, checked (GetInputTypeConstraints)
		return v, true
	}
	return nil, false
}

func (o *split) Apply(in []tensor.Tensor) ([]tensor.Tensor, error) {
	x := dense(in[0])
	if x.IsScalar() {
		return nil, ops.ErrInvalidInput("a scalar", o)
	}
	shape := x.Shape()
	axis, outer, inner, err := aroundAxis(shape, false, o.axis)
	if err != nil {
		return nil, err
	}
	if o.numOutputs && o.outputs > shape[axis] {
		return nil, ops.ErrInvalidInput(fmt.Sprintf("num_outputs %d of a dimension of %d", o.outputs, shape[axis]), o)
	}
	sizes := make([]int, o.outputs)
	if v, ok := o.sizes(in, shape[axis]); ok {
		if len(v) != o.outputs {
			return nil, ops.ErrInvalidInput(fmt.Sprintf("%d sizes for %d outputs", len(v), o.outputs), o)
		}
		total := int64(0)
		for i, s := range v {
			if s < 1 || s > int64(shape[axis]) {
				return nil, ops.ErrInvalidInput(fmt.Sprintf("size %d: this engine makes no empty tensors", s), o)
			}
			sizes[i], total = int(s), total+s
		}
		if total != int64(shape[axis]) {
			return nil, ops.ErrInvalidInput(fmt.Sprintf("sizes summing to %d of a dimension of %d", total, shape[axis]), o)
		}
	} else {
		if shape[axis]%o.outputs != 0 || shape[axis] < o.outputs {
			return nil, ops.ErrInvalidInput(fmt.Sprintf("a dimension of %d in %d equal parts", shape[axis], o.outputs), o)
		}
		for i := range sizes {
			sizes[i] = shape[axis] / o.outputs
		}
	}
	src := reflect.ValueOf(x.Data())
	outs := make([]tensor.Tensor, o.outputs)
	start := 0
	for i, size := range sizes {
		dst := reflect.MakeSlice(src.Type(), outer*size*inner, outer*size*inner)
		for r := range outer {
			from := (r*shape[axis] + start) * inner
			reflect.Copy(dst.Slice(r*size*inner, (r+1)*size*inner), src.Slice(from, from+size*inner))
		}
		s := slices.Clone(shape)
		s[axis] = size
		outs[i] = tensor.New(tensor.WithShape(s...), tensor.WithBacking(dst.Interface()))
		start += size
	}
	return outs, nil
}

// rangeTypes are Range's types here: ONNX Runtime's CPU provider also
// has INT16, which the memory bound does not read (bound.go: numbers).
var rangeTypes = []tensor.Dtype{tensor.Float32, tensor.Float64, tensor.Int32, tensor.Int64}

// rangeOp is Range (opset 11): start, then each element the one before
// plus delta, as many as ceil((limit - start) / delta), the difference
// taken in the inputs' type and the rest in float64, as ONNX Runtime
// makes them (PyTorch exports arange so). Its output is bounded before
// it runs (bound.go: outputElems); a Range of no elements is refused, as
// the engine makes no empty tensors, and so is a delta of 0.
type rangeOp struct{}

func (*rangeOp) Init(n *gonnxproto.NodeProto) error {
	if len(n.GetAttribute()) > 0 {
		return ops.ErrUnsupportedAttribute(n.GetAttribute()[0].GetName(), &rangeOp{})
	}
	return nil
}
func (o *rangeOp) ValidateInputs(in []tensor.Tensor) ([]tensor.Tensor, error) {
	return ops.ValidateInputs(o, in)
}
func (*rangeOp) GetMinInputs() int { return 3 }
func (*rangeOp) GetMaxInputs() int { return 3 }
func (*rangeOp) GetInputTypeConstraints() [][]tensor.Dtype {
	return [][]tensor.Dtype{rangeTypes, rangeTypes, rangeTypes}
}
func (*rangeOp) String() string { return "range operator" }

func (o *rangeOp) Apply(in []tensor.Tensor) ([]tensor.Tensor, error) {
	for i, t := range in {
		if t.Dtype() != in[0].Dtype() {
			return nil, ops.ErrInvalidInput(fmt.Sprintf("input %d is %v and input 0 %v", i, t.Dtype(), in[0].Dtype()), o)
		}
		if t.Shape().TotalSize() != 1 {
			return nil, ops.ErrInvalidInput(fmt.Sprintf("input %d of shape %v, not a scalar", i, t.Shape()), o)
		}
	}
	var backing any
	var err error
	switch s := flat(in[0]).(type) {
	case []float32:
		backing, err = rangeOf(s[0], flat(in[1]).([]float32)[0], flat(in[2]).([]float32)[0])
	case []float64:
		backing, err = rangeOf(s[0], flat(in[1]).([]float64)[0], flat(in[2]).([]float64)[0])
	case []int32:
		backing, err = rangeOf(s[0], flat(in[1]).([]int32)[0], flat(in[2]).([]int32)[0])
	case []int64:
		backing, err = rangeOf(s[0], flat(in[1]).([]int64)[0], flat(in[2]).([]int64)[0])
	default:
		return nil, ops.ErrInvalidInputType(0, in[0].Dtype().Name(), o)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", o, err)
	}
	n := reflect.ValueOf(backing).Len()
	return []tensor.Tensor{tensor.New(tensor.WithShape(n), tensor.WithBacking(backing))}, nil
}

// rangeOf is Range's elements (rangeOp).
func rangeOf[T float32 | float64 | int32 | int64](start, limit, delta T) ([]T, error) {
	if delta == 0 {
		return nil, fmt.Errorf("a delta of 0")
	}
	n := math.Ceil(float64(limit-start) / float64(delta))
	switch {
	case !(n >= 1):
		return nil, fmt.Errorf("%v elements: this engine makes no empty tensors", n)
	case n > 1<<40: // the memory bound has refused it already
		return nil, fmt.Errorf("%v elements", n)
	}
	out := make([]T, int(n))
	v := start
	for i := range out {
		out[i] = v
		v += delta
	}
	return out, nil
}

// slice is Slice at opsets 11 to 17 (13 added BFLOAT16): starts and
// ends, and optionally axes (every axis from 0 by default) and steps (1),
// of INT32 or INT64, as ONNX defines them: a negative start or end counts
// from the end of its axis, and each is then held to the axis, to [0,
// dim] for a positive step and to [0, dim - 1] and [-1, dim - 1] for a
// negative one, which walks the axis backwards. gonnx's (gorgonia's
// slicing) failed every negative step ("Invalid slice index"), and
// PyTorch exports the pads of ReflectionPad2d, ReplicationPad2d and
// ZeroPad2d as a Slice of step -1 to an end of -2^63+1 before its Pad. A
// step of 0, an axis twice or out of range, and a slice of no elements
// (the engine makes no empty tensors) are refused.
type slice struct{}

func (o *slice) Init(n *gonnxproto.NodeProto) error { return noAttributes(n, o) }
func (o *slice) ValidateInputs(in []tensor.Tensor) ([]tensor.Tensor, error) {
	return ops.ValidateInputs(o, in)
}
func (*slice) GetMinInputs() int { return 3 }
func (*slice) GetMaxInputs() int { return 5 }
func (*slice) GetInputTypeConstraints() [][]tensor.Dtype {
	index := []tensor.Dtype{tensor.Int32, tensor.Int64}
	return [][]tensor.Dtype{ops.AllTypes, index, index, index, index}
}
func (*slice) String() string { return "slice operator" }

func (o *slice) Apply(in []tensor.Tensor) ([]tensor.Tensor, error) {
	x := dense(in[0])
	if x.IsScalar() {
		return nil, ops.ErrInvalidInput("a scalar input: there is no axis to slice", o)
	}
	shape := x.Shape().Clone()
	r := len(shape)
	lists := make([][]int64, 4) // starts, ends, axes, steps
	for i := range lists {
		if 1+i >= len(in) || in[1+i] == nil {
			continue
		}
		if len(in[1+i].Shape()) > 1 {
			return nil, ops.ErrInvalidInput(fmt.Sprintf("input %d of shape %v: a list", 1+i, in[1+i].Shape()), o)
		}
		switch v := flat(in[1+i]).(type) {
		case []int64:
			lists[i] = v
		case []int32:
			lists[i] = make([]int64, len(v))
			for k, e := range v {
				lists[i][k] = int64(e)
			}
		default:
			return nil, ops.ErrInvalidInputType(1+i, in[1+i].Dtype().Name(), o)
		}
	}
	starts, ends, axes, steps := lists[0], lists[1], lists[2], lists[3]
	n := len(starts)
	if axes == nil {
		axes = make([]int64, min(n, r))
		for i := range axes {
			axes[i] = int64(i)
		}
	}
	if steps == nil {
		steps = slices.Repeat([]int64{1}, n)
	}
	if len(ends) != n || len(axes) != n || len(steps) != n {
		return nil, ops.ErrInvalidInput(fmt.Sprintf("%d starts, %d ends, %d axes and %d steps for an input of rank %d", n, len(ends), len(axes), len(steps), r), o)
	}
	// Each axis's first index, step and count; axes not listed are kept
	// whole.
	first, step, outShape := make([]int, r), make([]int, r), shape.Clone()
	for i := range step {
		step[i] = 1
	}
	seen := make([]bool, r)
	for i, a := range axes {
		if a < int64(-r) || a >= int64(r) {
			return nil, ops.ErrAxisOutOfRange(-r, r, int(max(min(a, math.MaxInt32), math.MinInt32)))
		}
		a = (a + int64(r)) % int64(r)
		if seen[a] {
			return nil, ops.ErrInvalidInput(fmt.Sprintf("axis %d sliced twice", a), o)
		}
		seen[a] = true
		d := int64(shape[a])
		begin, end, s := starts[i], ends[i], steps[i]
		if s == 0 {
			return nil, ops.ErrInvalidInput("a step of 0", o)
		}
		s = max(min(s, d), -d) // the same slice, and no overflow below
		if begin < 0 {
			begin += d
		}
		if end < 0 {
			end += d
		}
		var count int64
		if s > 0 {
			begin, end = min(max(begin, 0), d), min(max(end, 0), d)
			count = (end - begin + s - 1) / s
		} else {
			begin, end = min(max(begin, 0), d-1), min(max(end, -1), d-1)
			count = (begin - end - s - 1) / -s
		}
		if count <= 0 {
			return nil, ops.ErrInvalidInput(fmt.Sprintf("axis %d sliced from %d to %d by %d: no elements, and this engine makes no empty tensors", a, starts[i], ends[i], s), o)
		}
		first[a], step[a], outShape[a] = int(begin), int(s), int(count)
	}
	var backing any
	switch v := flat(x).(type) {
	case []float32:
		backing = sliceAs(v, shape, outShape, first, step)
	case []float64:
		backing = sliceAs(v, shape, outShape, first, step)
	case []int8:
		backing = sliceAs(v, shape, outShape, first, step)
	case []int16:
		backing = sliceAs(v, shape, outShape, first, step)
	case []int32:
		backing = sliceAs(v, shape, outShape, first, step)
	case []int64:
		backing = sliceAs(v, shape, outShape, first, step)
	case []uint8:
		backing = sliceAs(v, shape, outShape, first, step)
	case []uint16:
		backing = sliceAs(v, shape, outShape, first, step)
	case []uint32:
		backing = sliceAs(v, shape, outShape, first, step)
	case []uint64:
		backing = sliceAs(v, shape, outShape, first, step)
	case []bool:
		backing = sliceAs(v, shape, outShape, first, step)
	case []string:
		backing = sliceAs(v, shape, outShape, first, step)
	case []complex64:
		backing = sliceAs(v, shape, outShape, first, step)
	case []complex128:
		backing = sliceAs(v, shape, outShape, first, step)
	default:
		return nil, ops.ErrInvalidInputType(0, x.Dtype().Name(), o)
	}
	return []tensor.Tensor{tensor.New(tensor.WithShape(outShape...), tensor.WithBacking(backing))}, nil
}

// sliceAs is x (of shape) sliced to outShape: along axis i from first[i]
// by step[i] (a step of at most the axis's size, so nothing overflows);
// walked odometer style.
func sliceAs[T any](x []T, shape, outShape, first, step []int) []T {
	r := len(shape)
	strides := make([]int, r)
	s := 1
	for i := r - 1; i >= 0; i-- {
		strides[i] = s
		s *= shape[i]
	}
	at := 0
	for i := range first {
		at += first[i] * strides[i]
	}
	out := make([]T, tensor.Shape(outShape).TotalSize()) // at most x's size
	idx := make([]int, r)
	for k := range out {
		out[k] = x[at]
		for i := r - 1; i >= 0; i-- {
			idx[i]++
			at += step[i] * strides[i]
			if idx[i] < outShape[i] {
				break
			}
			at -= step[i] * strides[i] * idx[i]
			idx[i] = 0
		}
	}
	return out
}
