package goengine

import (
	"math"

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
