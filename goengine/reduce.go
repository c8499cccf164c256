package goengine

import (
	"fmt"
	"math"
	"slices"

	gonnxproto "github.com/advancedclimatesystems/gonnx/onnx"
	"github.com/advancedclimatesystems/gonnx/ops"
	"gorgonia.org/tensor"
)

// reduce is ReduceSum (its opset 13), ReduceMax, ReduceMin and ReduceMean
// (their opset 18): over the axes, an optional INT64 input (every axis when
// it is left out or empty, which the guard gives as left out, listInput;
// none with noop_with_empty_axes), keepdims 1 by
// default. Older nodes' axes attribute is rewritten into the input
// (axesToInput). The types are ONNX Runtime's CPU provider's: ReduceSum
// and ReduceMean FLOAT, DOUBLE, INT32 and INT64, summed as sumOver does
// (an integer sum wraps around, as ONNX Runtime's, and an integer mean
// truncates); ReduceMax and ReduceMin those and INT8 and UINT8.
type reduce struct {
	op        string // "sum", "max", "min" or "mean"
	types     []tensor.Dtype
	keepDims  bool
	noopEmpty bool
}

var (
	sumTypes    = []tensor.Dtype{tensor.Float32, tensor.Float64, tensor.Int32, tensor.Int64}
	extremeType = []tensor.Dtype{tensor.Float32, tensor.Float64, tensor.Int32, tensor.Int64, tensor.Int8, tensor.Uint8}
)

func newReduce(op string, types []tensor.Dtype) func() (ops.Operator, error) {
	return func() (ops.Operator, error) {
		return &reduce{op: op, types: types, keepDims: true}, nil
	}
}

func (o *reduce) Init(n *gonnxproto.NodeProto) error {
	for _, a := range n.GetAttribute() {
		switch a.GetName() {
		case "keepdims":
			o.keepDims = a.GetI() != 0
		case "noop_with_empty_axes":
			o.noopEmpty = a.GetI() != 0
		default:
			return ops.ErrUnsupportedAttribute(a.GetName(), o)
		}
	}
	return nil
}

func (o *reduce) ValidateInputs(in []tensor.Tensor) ([]tensor.Tensor, error) {
	return ops.ValidateInputs(o, in)
}
func (*reduce) GetMinInputs() int { return 1 }
func (*reduce) GetMaxInputs() int { return 2 }
func (o *reduce) GetInputTypeConstraints() [][]tensor.Dtype {
	return [][]tensor.Dtype{o.types, {tensor.Int64}}
}
func (o *reduce) String() string { return "reduce" + o.op + " operator" }

// emptyIsLeftOut implements listInput: empty axes are as if left out
// (every axis, or none with noop_with_empty_axes), as in ONNX Runtime.
func (*reduce) emptyIsLeftOut(i int) bool { return i == 1 }

func (o *reduce) Apply(in []tensor.Tensor) ([]tensor.Tensor, error) {
	x := dense(in[0])
	var axes []int
	if len(in) > 1 && in[1] != nil {
		for _, v := range numbers(in[1]) {
			axes = append(axes, int(max(min(v, math.MaxInt32), math.MinInt32)))
		}
	}
	if len(axes) == 0 && o.noopEmpty {
		return []tensor.Tensor{in[0]}, nil
	}
	shape := x.Shape().Clone()
	if x.IsScalar() {
		shape = tensor.Shape{}
	}
	reduced, outShape, err := reducedShape(shape, axes)
	if err != nil {
		return nil, err
	}
	count := 1 // the elements each output element reduces
	for i, d := range shape {
		if reduced[i] {
			count *= d
		}
	}
	// The guard refuses empty tensors before any operator runs; a count
	// of 0 here, or past INT32's range, would divide an integer by 0.
	if o.op == "mean" && (count < 1 || x.Dtype() == tensor.Int32 && count > math.MaxInt32) {
		return nil, ops.ErrInvalidInput(fmt.Sprintf("a mean over %d elements", count), o)
	}
	var backing any
	switch v := flat(x).(type) {
	case []float32:
		backing = reduceAs(o, v, shape, outShape, count)
	case []float64:
		backing = reduceAs(o, v, shape, outShape, count)
	case []int32:
		backing = reduceAs(o, v, shape, outShape, count)
	case []int64:
		backing = reduceAs(o, v, shape, outShape, count)
	case []int8:
		backing = reduceAs(o, v, shape, outShape, count)
	case []uint8:
		backing = reduceAs(o, v, shape, outShape, count)
	}
	if backing == nil {
		return nil, ops.ErrInvalidInputType(0, x.Dtype().Name(), o)
	}
	if !o.keepDims {
		outShape = keptDims(outShape, reduced)
	}
	if len(outShape) == 0 {
		return []tensor.Tensor{tensor.New(tensor.FromScalar(flatIndex(backing)))}, nil
	}
	return []tensor.Tensor{tensor.New(tensor.WithShape(outShape...), tensor.WithBacking(backing))}, nil
}

// reduceAs is o's reduction of x (of shape) to outShape, count elements
// each, nil for a sum or mean of a type it does not take.
func reduceAs[T int8 | uint8 | int32 | int64 | float32 | float64](o *reduce, x []T, shape, outShape []int, count int) any {
	switch o.op {
	case "max", "min":
		return extremeOver(x, shape, outShape, o.op == "max")
	case "mean":
		switch v := any(x).(type) {
		case []float32:
			return meanOver(v, shape, outShape, count)
		case []float64:
			return meanOver(v, shape, outShape, count)
		case []int32:
			return intMeanOver(v, shape, outShape, count)
		case []int64:
			return intMeanOver(v, shape, outShape, count)
		}
		return nil
	}
	switch v := any(x).(type) {
	case []float32:
		sum := sumOver[float32, float64](v, shape, outShape)
		out := make([]float32, len(sum))
		for i, s := range sum {
			out[i] = float32(s)
		}
		return out
	case []float64:
		return sumOver[float64, float64](v, shape, outShape)
	case []int32:
		return sumOver[int32, int32](v, shape, outShape)
	case []int64:
		return sumOver[int64, int64](v, shape, outShape)
	}
	return nil
}

// flatIndex is the first element of a slice.
func flatIndex(backing any) any {
	switch v := backing.(type) {
	case []float32:
		return v[0]
	case []float64:
		return v[0]
	case []int32:
		return v[0]
	case []int64:
		return v[0]
	case []int8:
		return v[0]
	case []uint8:
		return v[0]
	}
	return nil
}

// reducedShape is which axes of shape a reduction over axes (every axis
// when none, negative ones counting from the end) reduces, and the shape
// it makes with those axes kept as 1.
func reducedShape(shape []int, axes []int) (reduced []bool, outShape []int, err error) {
	rank := len(shape)
	reduced = make([]bool, rank)
	for _, a := range axes {
		if a < -rank || a >= rank {
			return nil, nil, ops.ErrAxisOutOfRange(-rank, rank, a)
		}
		reduced[(a+rank)%rank] = true
	}
	outShape = make([]int, rank)
	for i, d := range shape {
		if len(axes) == 0 {
			reduced[i] = true
		}
		outShape[i] = d
		if reduced[i] {
			outShape[i] = 1
		}
	}
	return reduced, outShape, nil
}

// keptDims is outShape without the reduced axes (keepdims 0).
func keptDims(outShape []int, reduced []bool) []int {
	var kept []int
	for i, d := range outShape {
		if !reduced[i] {
			kept = append(kept, d)
		}
	}
	return kept
}

// extremeOver is the greatest (or least) element of x (of shape) over the
// axes that have size 1 in outShape, as sumOver walks them: the first,
// then each one greater (less), as ONNX Runtime compares them, so a NaN
// first stays and a NaN after a number is passed over (a later number
// replaced a first NaN: review).
func extremeOver[T int8 | uint8 | int32 | int64 | float32 | float64](x []T, shape, outShape []int, greatest bool) []T {
	rank := len(shape)
	outStrides := make([]int, rank)
	s := 1
	for i := rank - 1; i >= 0; i-- {
		if outShape[i] != 1 || shape[i] == 1 {
			outStrides[i] = s
		}
		s *= outShape[i]
	}
	out := make([]T, s)
	seen := make([]bool, s)
	idx := make([]int, rank)
	o := 0
	for _, v := range x {
		if !seen[o] || greatest && v > out[o] || !greatest && v < out[o] {
			out[o], seen[o] = v, true
		}
		for i := rank - 1; i >= 0; i-- {
			idx[i]++
			o += outStrides[i]
			if idx[i] < shape[i] {
				break
			}
			o -= outStrides[i] * idx[i]
			idx[i] = 0
		}
	}
	return out
}

// argTypes are ArgMax's and ArgMin's types in ONNX Runtime 1.24's CPU
// provider.
var argTypes = []tensor.Dtype{tensor.Float32, tensor.Float64, tensor.Int8, tensor.Int32, tensor.Int64, tensor.Uint8}

// argExtreme is ArgMax (greatest) or ArgMin at opsets 11 to 17 (12 added
// select_last_index, rewritten away before it; 13 BFLOAT16): the INT64
// index of the greatest (least) element along axis (0 by default), the
// first of equal ones unless select_last_index, keepdims 1 by default.
// Each element is compared with the best so far as ONNX Runtime compares
// them, so a NaN first stays and a later one is passed over.
type argExtreme struct {
	greatest, last, keepDims bool
	axis                     int
}

func (o *argExtreme) Init(n *gonnxproto.NodeProto) error {
	o.keepDims = true
	for _, a := range n.GetAttribute() {
		switch a.GetName() {
		case "axis":
			o.axis = int(max(min(a.GetI(), math.MaxInt32), math.MinInt32))
		case "keepdims":
			o.keepDims = a.GetI() != 0
		case "select_last_index":
			o.last = a.GetI() != 0
		default:
			return ops.ErrUnsupportedAttribute(a.GetName(), o)
		}
	}
	return nil
}
func (o *argExtreme) ValidateInputs(in []tensor.Tensor) ([]tensor.Tensor, error) {
	return ops.ValidateInputs(o, in)
}
func (*argExtreme) GetMinInputs() int                         { return 1 }
func (*argExtreme) GetMaxInputs() int                         { return 1 }
func (*argExtreme) GetInputTypeConstraints() [][]tensor.Dtype { return [][]tensor.Dtype{argTypes} }
func (o *argExtreme) String() string {
	if o.greatest {
		return "argmax operator"
	}
	return "argmin operator"
}

func (o *argExtreme) Apply(in []tensor.Tensor) ([]tensor.Tensor, error) {
	x := dense(in[0])
	shape := x.Shape().Clone()
	a, outer, inner, err := aroundAxis(shape, x.IsScalar(), o.axis)
	if err != nil {
		return nil, err
	}
	var idx []int64
	switch v := flat(x).(type) {
	case []float32:
		idx = argOver(v, outer, shape[a], inner, o.greatest, o.last)
	case []float64:
		idx = argOver(v, outer, shape[a], inner, o.greatest, o.last)
	case []int8:
		idx = argOver(v, outer, shape[a], inner, o.greatest, o.last)
	case []int32:
		idx = argOver(v, outer, shape[a], inner, o.greatest, o.last)
	case []int64:
		idx = argOver(v, outer, shape[a], inner, o.greatest, o.last)
	case []uint8:
		idx = argOver(v, outer, shape[a], inner, o.greatest, o.last)
	default:
		return nil, ops.ErrInvalidInputType(0, x.Dtype().Name(), o)
	}
	outShape := slices.Clone(shape)
	outShape[a] = 1
	if !o.keepDims {
		outShape = slices.Delete(outShape, a, a+1)
	}
	if len(outShape) == 0 {
		return []tensor.Tensor{tensor.New(tensor.FromScalar(idx[0]))}, nil
	}
	return []tensor.Tensor{tensor.New(tensor.WithShape(outShape...), tensor.WithBacking(idx))}, nil
}

// argOver is, for x laid out as [outer, n, inner], the index along its
// middle axis of the greatest (least) element: the first, then each one
// greater (less) or, with last, greater (less) or equal.
func argOver[T int8 | uint8 | int32 | int64 | float32 | float64](x []T, outer, n, inner int, greatest, last bool) []int64 {
	out := make([]int64, outer*inner)
	for o := range outer {
		for i := range inner {
			base := o*n*inner + i
			best, at := x[base], 0
			for j := 1; j < n; j++ {
				v := x[base+j*inner]
				if greatest && (v > best || last && v == best) || !greatest && (v < best || last && v == best) {
					best, at = v, j
				}
			}
			out[o*inner+i] = int64(at)
		}
	}
	return out
}
