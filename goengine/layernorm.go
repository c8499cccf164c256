package goengine

import (
	"fmt"
	"math"
	"slices"

	gonnxproto "github.com/advancedclimatesystems/gonnx/onnx"
	"github.com/advancedclimatesystems/gonnx/ops"
	"gorgonia.org/tensor"
)

// layerNorm is LayerNormalization (opset 17, and ONNX Runtime's own
// version 1 of it in the default domain, which it runs at any opset):
// each run of X's dimensions from axis on is normalized to a mean of 0
// and a variance of 1 (epsilon added to the variance), then multiplied by
// Scale and shifted by B, both of that normalized shape. Its optional
// outputs are the mean and the inverse standard deviation, of X's shape
// with the normalized dimensions 1. PyTorch exports nn.LayerNorm as one
// at opset 17. FLOAT, as the model's stash_type 1 (the only one taken)
// computes it; the sums are in float64.
type layerNorm struct {
	axis    int
	epsilon float64
	outputs int
}

func (o *layerNorm) Init(n *gonnxproto.NodeProto) error {
	o.axis, o.epsilon, o.outputs = -1, 1e-5, len(n.GetOutput())
	for _, a := range n.GetAttribute() {
		switch a.GetName() {
		case "axis":
			o.axis = int(a.GetI())
		case "epsilon":
			o.epsilon = float64(a.GetF())
		case "stash_type":
			if a.GetI() != 1 {
				return ops.ErrUnsupportedAttribute(a.GetName(), o)
			}
		default:
			return ops.ErrUnsupportedAttribute(a.GetName(), o)
		}
	}
	if o.outputs < 1 || o.outputs > 3 {
		return fmt.Errorf("%s: %d outputs, where it has 1 to 3", o, o.outputs)
	}
	return nil
}

func (o *layerNorm) GetMinInputs() int { return 2 }
func (o *layerNorm) GetMaxInputs() int { return 3 }
func (o *layerNorm) GetInputTypeConstraints() [][]tensor.Dtype {
	f := []tensor.Dtype{tensor.Float32}
	return [][]tensor.Dtype{f, f, f}
}
func (o *layerNorm) String() string { return "layernormalization operator" }

func (o *layerNorm) ValidateInputs(in []tensor.Tensor) ([]tensor.Tensor, error) {
	return ops.ValidateInputs(o, in)
}

func (o *layerNorm) Apply(in []tensor.Tensor) ([]tensor.Tensor, error) {
	x := dense(in[0])
	shape := x.Shape().Clone()
	if x.IsScalar() {
		shape = tensor.Shape{}
	}
	r := len(shape)
	if o.axis < -r || o.axis >= r {
		return nil, ops.ErrAxisOutOfRange(-r, r, o.axis)
	}
	axis := (o.axis + r) % r
	rows, n := 1, 1
	for _, d := range shape[:axis] {
		rows *= d
	}
	for _, d := range shape[axis:] {
		n *= d
	}
	xs, ok := x.Data().([]float32)
	if !ok {
		return nil, ops.ErrInvalidInputType(0, x.Dtype().Name(), o)
	}
	params := make([][]float32, 2) // Scale, then B (nil: none)
	for i := 1; i < len(in); i++ {
		if in[i] == nil {
			continue
		}
		p := dense(in[i])
		if !sameNormalized(p.Shape(), shape[axis:]) {
			return nil, ops.ErrInvalidInput(fmt.Sprintf("input %d has shape %v, not X's normalized shape %v", i, p.Shape(), shape[axis:]), o)
		}
		if params[i-1], ok = p.Data().([]float32); !ok {
			return nil, ops.ErrInvalidInputType(i, p.Dtype().Name(), o)
		}
	}
	scale, bias := params[0], params[1]
	y := make([]float32, len(xs))
	means, invs := make([]float32, rows), make([]float32, rows)
	for row := range rows {
		v := xs[row*n : (row+1)*n]
		mean, variance := moments(v)
		inv := 1 / math.Sqrt(variance+o.epsilon)
		out := y[row*n : (row+1)*n]
		for j, e := range v {
			z := (float64(e) - mean) * inv * float64(scale[j])
			if bias != nil {
				z += float64(bias[j])
			}
			out[j] = float32(z)
		}
		means[row], invs[row] = float32(mean), float32(inv)
	}
	statShape := slices.Clone(shape)
	for i := axis; i < r; i++ {
		statShape[i] = 1
	}
	outs := []tensor.Tensor{
		tensor.New(tensor.WithShape(shape...), tensor.WithBacking(y)),
		tensor.New(tensor.WithShape(statShape...), tensor.WithBacking(means)),
		tensor.New(tensor.WithShape(statShape...), tensor.WithBacking(invs)),
	}
	return outs[:o.outputs], nil
}

// sameNormalized reports whether a parameter of shape p fits a normalized
// shape: the same dimensions, leading ones aside.
func sameNormalized(p, norm tensor.Shape) bool {
	trim := func(s tensor.Shape) tensor.Shape {
		for len(s) > 0 && s[0] == 1 {
			s = s[1:]
		}
		return s
	}
	return slices.Equal(trim(p), trim(norm))
}
