package goengine

import (
	"fmt"
	"math"
	"reflect"
	"slices"

	gonnxproto "github.com/advancedclimatesystems/gonnx/onnx"
	"github.com/advancedclimatesystems/gonnx/ops"
	"gorgonia.org/tensor"
)

// elementwise is an operator of one float input whose attributes, if
// any, are FLOATs (params), that maps each element through f, computed
// in float64 and rounded to the input's type: Erf (FLOAT only, as in ONNX
// Runtime's CPU provider; the GELU of PyTorch's exports is x * 0.5 * (1 +
// Erf(x / sqrt 2))), Exp and Log (FLOAT and DOUBLE); Floor, Ceil, Round
// (halves to even) and Reciprocal (FLOAT and DOUBLE), and the activations
// of vision nets, Softplus, Elu, HardSigmoid and HardSwish (FLOAT only).
// gonnx has none of them, and a model with any was refused at
// AI.MODELSTORE. A NaN stays NaN in each, as in ONNX Runtime.
type elementwise struct {
	name   string
	types  []tensor.Dtype
	params []param
	f      func(x float64, p []float64) float64
	p      []float64 // the params' values (Init's)
}

// param is a FLOAT attribute of an elementwise operator, and its value
// when the node does not give it.
type param struct {
	name string
	def  float32
}

func newElementwise(name string, types []tensor.Dtype, f func(float64) float64) func() (ops.Operator, error) {
	return newActivation(name, types, nil, func(x float64, _ []float64) float64 { return f(x) })
}

func newActivation(name string, types []tensor.Dtype, params []param, f func(x float64, p []float64) float64) func() (ops.Operator, error) {
	return func() (ops.Operator, error) { return &elementwise{name: name, types: types, params: params, f: f}, nil }
}

func (o *elementwise) Init(n *gonnxproto.NodeProto) error {
	o.p = make([]float64, len(o.params))
	for i, p := range o.params {
		o.p[i] = float64(p.def)
	}
	for _, a := range n.GetAttribute() {
		i := slices.IndexFunc(o.params, func(p param) bool { return p.name == a.GetName() })
		if i < 0 {
			return ops.ErrUnsupportedAttribute(a.GetName(), o)
		}
		o.p[i] = float64(a.GetF())
	}
	return nil
}
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
		backing = mapFloats(v, o.f, o.p)
	case []float64:
		backing = mapFloats(v, o.f, o.p)
	default:
		return nil, ops.ErrInvalidInputType(0, x.Dtype().Name(), o)
	}
	return []tensor.Tensor{shaped(x, backing)}, nil
}

// mapFloats is f of each element of v and p, in float64, in a new slice.
func mapFloats[T float32 | float64](v []T, f func(float64, []float64) float64, p []float64) []T {
	out := make([]T, len(v))
	for i, x := range v {
		out[i] = T(f(float64(x), p))
	}
	return out
}

var float32Only = []tensor.Dtype{tensor.Float32}

var (
	newErf        = newElementwise("erf", float32Only, math.Erf)
	newExp        = newElementwise("exp", floatTypes, math.Exp)
	newLog        = newElementwise("log", floatTypes, math.Log)
	newFloor      = newElementwise("floor", floatTypes, math.Floor)
	newCeil       = newElementwise("ceil", floatTypes, math.Ceil)
	newRound      = newElementwise("round", floatTypes, math.RoundToEven)
	newReciprocal = newElementwise("reciprocal", floatTypes, func(x float64) float64 { return 1 / x })
	// Softplus is log(1 + e^x), as log1p(e^-|x|) + max(x, 0) so that it
	// neither overflows nor loses a small e^x.
	newSoftplus = newElementwise("softplus", float32Only, func(x float64) float64 {
		if x != x {
			return x
		}
		return math.Log1p(math.Exp(-math.Abs(x))) + max(x, 0)
	})
	// Elu is x where x >= 0, else alpha (e^x - 1).
	newElu = newActivation("elu", float32Only, []param{{"alpha", 1}}, func(x float64, p []float64) float64 {
		if x >= 0 || x != x {
			return x
		}
		return p[0] * math.Expm1(x)
	})
	// HardSigmoid is alpha x + beta held to [0, 1]: max and min keep a
	// NaN, as ONNX Runtime's.
	newHardSigmoid = newActivation("hardsigmoid", float32Only, []param{{"alpha", 0.2}, {"beta", 0.5}}, func(x float64, p []float64) float64 {
		return max(min(p[0]*x+p[1], 1), 0)
	})
	// HardSwish is x HardSigmoid(x) with alpha 1/6 and beta 1/2.
	newHardSwish = newElementwise("hardswish", float32Only, func(x float64) float64 {
		return x * max(min(x/6+0.5, 1), 0)
	})
)

// signTypes are Sign's types in ONNX Runtime 1.24's CPU provider.
var signTypes = []tensor.Dtype{tensor.Float32, tensor.Float64, tensor.Int8, tensor.Int16, tensor.Int32, tensor.Int64,
	tensor.Uint8, tensor.Uint16, tensor.Uint32, tensor.Uint64}

// sign is Sign: 1, 0 or -1 of each element's sign, in its type (NaN for
// a NaN, as ONNX Runtime has it).
type sign struct{}

func (o *sign) Init(n *gonnxproto.NodeProto) error { return noAttributes(n, o) }
func (o *sign) ValidateInputs(in []tensor.Tensor) ([]tensor.Tensor, error) {
	return ops.ValidateInputs(o, in)
}
func (*sign) GetMinInputs() int                         { return 1 }
func (*sign) GetMaxInputs() int                         { return 1 }
func (*sign) GetInputTypeConstraints() [][]tensor.Dtype { return [][]tensor.Dtype{signTypes} }
func (*sign) String() string                            { return "sign operator" }

func (o *sign) Apply(in []tensor.Tensor) ([]tensor.Tensor, error) {
	x := dense(in[0])
	var backing any
	switch v := flat(x).(type) {
	case []float32:
		backing = signs(v)
	case []float64:
		backing = signs(v)
	case []int8:
		backing = signs(v)
	case []int16:
		backing = signs(v)
	case []int32:
		backing = signs(v)
	case []int64:
		backing = signs(v)
	case []uint8:
		backing = signs(v)
	case []uint16:
		backing = signs(v)
	case []uint32:
		backing = signs(v)
	case []uint64:
		backing = signs(v)
	default:
		return nil, ops.ErrInvalidInputType(0, x.Dtype().Name(), o)
	}
	return []tensor.Tensor{shaped(x, backing)}, nil
}

// signs is the sign of each element of v (0 for 0, NaN for NaN).
func signs[T number](v []T) []T {
	out := make([]T, len(v))
	var one T = 1
	for i, x := range v {
		switch {
		case x > 0:
			out[i] = one
		case x < 0:
			out[i] = -one
		case x != x:
			out[i] = x
		}
	}
	return out
}

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
