package goengine

import (
	"fmt"
	"math"
	"reflect"

	gonnxproto "github.com/advancedclimatesystems/gonnx/onnx"
	"github.com/advancedclimatesystems/gonnx/ops"
	"gorgonia.org/tensor"
)

// elementwise is an operator of one float input and no attributes that
// maps each element through f, computed in float64 and rounded to the
// input's type: Erf (FLOAT only, as in ONNX Runtime's CPU provider; the
// GELU of PyTorch's exports is x * 0.5 * (1 + Erf(x / sqrt 2))), Exp and
// Log (FLOAT and DOUBLE). gonnx has none of them, and a model with any
// was refused at AI.MODELSTORE.
type elementwise struct {
	name  string
	types []tensor.Dtype
	f     func(float64) float64
}

func newElementwise(name string, types []tensor.Dtype, f func(float64) float64) func() (ops.Operator, error) {
	return func() (ops.Operator, error) { return &elementwise{name: name, types: types, f: f}, nil }
}

func (o *elementwise) Init(n *gonnxproto.NodeProto) error { return noAttributes(n, o) }
func (o *elementwise) ValidateInputs(in []tensor.Tensor) ([]tensor.Tensor, error) {
	return ops.ValidateInputs(o, in)
}
func (*elementwise) GetMinInputs() int                           { return 1 }
func (*elementwise) GetMaxInputs() int                           { return 1 }
func (o *elementwise) GetInputTypeConstraints() [][]tensor.Dtype { return [][]tensor.Dtype{o.types} }
func (o *elementwise) String() string                            { return o.name + " operator" }

func (o *elementwise) Apply(in []tensor.Tensor) ([]tensor.Tensor, error) {
	x := dense(in[0])
	var backing any
	switch v := flat(x).(type) {
	case []float32:
		backing = mapFloats(v, o.f)
	case []float64:
		backing = mapFloats(v, o.f)
	default:
		return nil, ops.ErrInvalidInputType(0, x.Dtype().Name(), o)
	}
	return []tensor.Tensor{shaped(x, backing)}, nil
}

// mapFloats is f of each element of v, in float64, in a new slice.
func mapFloats[T float32 | float64](v []T, f func(float64) float64) []T {
	out := make([]T, len(v))
	for i, x := range v {
		out[i] = T(f(float64(x)))
	}
	return out
}

var float32Only = []tensor.Dtype{tensor.Float32}

var (
	newErf = newElementwise("erf", float32Only, math.Erf)
	newExp = newElementwise("exp", floatTypes, math.Exp)
	newLog = newElementwise("log", floatTypes, math.Log)
)

// leakyRelu is LeakyRelu: x where x >= 0, else alpha x (alpha 0.01 by
// default), in the input's type as ONNX Runtime computes it. FLOAT, and
// DOUBLE as ONNX Runtime's CPU provider has it from opset 16 (taken at
// the older opsets too).
type leakyRelu struct{ alpha float32 }

func (o *leakyRelu) Init(n *gonnxproto.NodeProto) error {
	o.alpha = 0.01
	for _, a := range n.GetAttribute() {
		if a.GetName() != "alpha" {
			return ops.ErrUnsupportedAttribute(a.GetName(), o)
		}
		o.alpha = a.GetF()
	}
	return nil
}
func (o *leakyRelu) ValidateInputs(in []tensor.Tensor) ([]tensor.Tensor, error) {
	return ops.ValidateInputs(o, in)
}
func (*leakyRelu) GetMinInputs() int                         { return 1 }
func (*leakyRelu) GetMaxInputs() int                         { return 1 }
func (*leakyRelu) GetInputTypeConstraints() [][]tensor.Dtype { return [][]tensor.Dtype{floatTypes} }
func (*leakyRelu) String() string                            { return "leakyrelu operator" }

func (o *leakyRelu) Apply(in []tensor.Tensor) ([]tensor.Tensor, error) {
	x := dense(in[0])
	var backing any
	switch v := flat(x).(type) {
	case []float32:
		backing = leaky(v, o.alpha)
	case []float64:
		backing = leaky(v, float64(o.alpha))
	default:
		return nil, ops.ErrInvalidInputType(0, x.Dtype().Name(), o)
	}
	return []tensor.Tensor{shaped(x, backing)}, nil
}

func leaky[T float32 | float64](v []T, alpha T) []T {
	out := make([]T, len(v))
	for i, x := range v {
		out[i] = x
		if x < 0 {
			out[i] = alpha * x
		}
	}
	return out
}

// number are the element types Clip, Min and Max compute on.
type number interface {
	int8 | int16 | int32 | int64 | uint8 | uint16 | uint32 | uint64 | float32 | float64
}

// clipTypes are Clip's types in ONNX Runtime 1.24's CPU provider.
var clipTypes = []tensor.Dtype{tensor.Float32, tensor.Float64, tensor.Int8, tensor.Int16, tensor.Int32, tensor.Int64,
	tensor.Uint8, tensor.Uint16, tensor.Uint32, tensor.Uint64}

// clip is Clip at opsets 11 to 13: each element of x raised to min and
// then lowered to max (so max where min > max), both optional inputs of
// x's type and one element each, as in ONNX Runtime.
type clip struct{}

func (o *clip) Init(n *gonnxproto.NodeProto) error { return noAttributes(n, o) }
func (o *clip) ValidateInputs(in []tensor.Tensor) ([]tensor.Tensor, error) {
	return ops.ValidateInputs(o, in)
}
func (*clip) GetMinInputs() int { return 1 }
func (*clip) GetMaxInputs() int { return 3 }
func (*clip) GetInputTypeConstraints() [][]tensor.Dtype {
	return [][]tensor.Dtype{clipTypes, clipTypes, clipTypes}
}
func (*clip) String() string { return "clip operator" }

func (o *clip) Apply(in []tensor.Tensor) ([]tensor.Tensor, error) {
	x := dense(in[0])
	bounds := make([]any, 2) // min, max; nil: none
	for i := 1; i < len(in); i++ {
		if in[i] == nil {
			continue
		}
		if in[i].Dtype() != x.Dtype() || len(in[i].Shape()) > 1 || in[i].Shape().TotalSize() != 1 {
			return nil, ops.ErrInvalidInput(fmt.Sprintf("input %d is %v of shape %v, where it must be one %v", i, in[i].Dtype(), in[i].Shape(), x.Dtype()), o)
		}
		bounds[i-1] = flat(in[i])
	}
	var backing any
	switch v := flat(x).(type) {
	case []float32:
		backing = clipped(v, bounds)
	case []float64:
		backing = clipped(v, bounds)
	case []int8:
		backing = clipped(v, bounds)
	case []int16:
		backing = clipped(v, bounds)
	case []int32:
		backing = clipped(v, bounds)
	case []int64:
		backing = clipped(v, bounds)
	case []uint8:
		backing = clipped(v, bounds)
	case []uint16:
		backing = clipped(v, bounds)
	case []uint32:
		backing = clipped(v, bounds)
	case []uint64:
		backing = clipped(v, bounds)
	default:
		return nil, ops.ErrInvalidInputType(0, x.Dtype().Name(), o)
	}
	return []tensor.Tensor{shaped(x, backing)}, nil
}

// clipped is max(v, lo) then min(that, hi), element by element; bounds
// are slices of one T or nil. A NaN bound is no bound, as in ONNX
// Runtime (Go's max and min would make every element NaN: review).
func clipped[T number](v []T, bounds []any) []T {
	out := make([]T, len(v))
	copy(out, v)
	if lo, ok := bounds[0].([]T); ok && lo[0] == lo[0] {
		for i, x := range out {
			out[i] = max(x, lo[0])
		}
	}
	if hi, ok := bounds[1].([]T); ok && hi[0] == hi[0] {
		for i, x := range out {
			out[i] = min(x, hi[0])
		}
	}
	return out
}

// minMaxTypes are Min's and Max's types in ONNX Runtime 1.24's CPU
// provider.
var minMaxTypes = []tensor.Dtype{tensor.Float32, tensor.Float64, tensor.Int8, tensor.Int32, tensor.Int64,
	tensor.Uint8, tensor.Uint32, tensor.Uint64}

// maxVariadic bounds how many inputs this engine's Min and Max take
// (ONNX's have no bound).
const maxVariadic = 64

// extreme is Min or Max at opsets 11 to 13: the least or greatest of its
// inputs (1 to maxVariadic of them, of one type), broadcast together
// (numpy's rules), element by element; a NaN wins, as Go's min and max
// and ONNX Runtime's have it.
type extreme struct{ greatest bool }

func (o *extreme) Init(n *gonnxproto.NodeProto) error {
	if len(n.GetInput()) > maxVariadic {
		return fmt.Errorf("%s: %d inputs, past this engine's bound of %d", o, len(n.GetInput()), maxVariadic)
	}
	return noAttributes(n, o)
}
func (o *extreme) ValidateInputs(in []tensor.Tensor) ([]tensor.Tensor, error) {
	return ops.ValidateInputs(o, in)
}
func (*extreme) GetMinInputs() int { return 1 }
func (*extreme) GetMaxInputs() int { return maxVariadic }
func (*extreme) GetInputTypeConstraints() [][]tensor.Dtype {
	c := make([][]tensor.Dtype, maxVariadic)
	for i := range c {
		c[i] = minMaxTypes
	}
	return c
}
func (o *extreme) String() string {
	if o.greatest {
		return "max operator"
	}
	return "min operator"
}

func (o *extreme) Apply(in []tensor.Tensor) ([]tensor.Tensor, error) {
	var given []tensor.Tensor
	for _, t := range in {
		if t != nil {
			if t.Dtype() != in[0].Dtype() {
				return nil, fmt.Errorf("%s: inputs of types %v and %v", o, in[0].Dtype(), t.Dtype())
			}
			given = append(given, t)
		}
	}
	_, out, strides, err := broadcastInputs(given)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", o, err)
	}
	xs := make([]any, len(given))
	for i, t := range given {
		xs[i] = flat(t)
	}
	var backing any
	switch xs[0].(type) {
	case []float32:
		backing = extremeOf[float32](xs, out, strides, o.greatest)
	case []float64:
		backing = extremeOf[float64](xs, out, strides, o.greatest)
	case []int8:
		backing = extremeOf[int8](xs, out, strides, o.greatest)
	case []int32:
		backing = extremeOf[int32](xs, out, strides, o.greatest)
	case []int64:
		backing = extremeOf[int64](xs, out, strides, o.greatest)
	case []uint8:
		backing = extremeOf[uint8](xs, out, strides, o.greatest)
	case []uint32:
		backing = extremeOf[uint32](xs, out, strides, o.greatest)
	case []uint64:
		backing = extremeOf[uint64](xs, out, strides, o.greatest)
	default:
		return nil, ops.ErrInvalidInputType(0, in[0].Dtype().Name(), o)
	}
	if len(out) == 0 {
		return []tensor.Tensor{tensor.New(tensor.FromScalar(reflect.ValueOf(backing).Index(0).Interface()))}, nil
	}
	return []tensor.Tensor{tensor.New(tensor.WithShape(out...), tensor.WithBacking(backing))}, nil
}

// extremeOf is the least or greatest of xs (slices of T) broadcast to
// shape, each with its strides, walked odometer style.
func extremeOf[T number](xs []any, shape []int, strides [][]int, greatest bool) []T {
	n := 1
	for _, d := range shape {
		n *= d
	}
	vs := make([][]T, len(xs))
	for i, x := range xs {
		vs[i] = x.([]T)
	}
	out := make([]T, n) // bounded before Apply (outputElems)
	idx := make([]int, len(shape))
	at := make([]int, len(xs))
	for k := range out {
		m := vs[0][at[0]]
		for i := 1; i < len(vs); i++ {
			if greatest {
				m = max(m, vs[i][at[i]])
			} else {
				m = min(m, vs[i][at[i]])
			}
		}
		out[k] = m
		for d := len(shape) - 1; d >= 0; d-- {
			idx[d]++
			for i := range at {
				at[i] += strides[i][d]
			}
			if idx[d] < shape[d] {
				break
			}
			for i := range at {
				at[i] -= strides[i][d] * idx[d]
			}
			idx[d] = 0
		}
	}
	return out
}
