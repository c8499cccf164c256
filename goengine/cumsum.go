package goengine

import (
	"fmt"

	gonnxproto "github.com/advancedclimatesystems/gonnx/onnx"
	"github.com/advancedclimatesystems/gonnx/ops"
	"gorgonia.org/tensor"
)

// cumSum is CumSum (versions 11 and 14, which added BFLOAT16 and FLOAT16):
// the running sums of x along an axis, the second input (a scalar, or one
// element, of INT32 or INT64; negative counts from the end). exclusive 1
// leaves each element out of its own sum (the first is 0), reverse 1 sums
// from the end. Each sum is the one before plus the next element, in x's
// type, as ONNX Runtime adds them: floats bit for bit, integers wrapping
// around. FLOAT, DOUBLE, INT32 and INT64, as in ONNX Runtime's CPU
// provider. PyTorch exports torch.cumsum as it.
type cumSum struct{ exclusive, reverse bool }

func (o *cumSum) Init(n *gonnxproto.NodeProto) error {
	*o = cumSum{}
	for _, a := range n.GetAttribute() {
		var flag *bool
		switch a.GetName() {
		case "exclusive":
			flag = &o.exclusive
		case "reverse":
			flag = &o.reverse
		default:
			return ops.ErrUnsupportedAttribute(a.GetName(), o)
		}
		if a.GetI() != 0 && a.GetI() != 1 {
			return ops.ErrInvalidAttribute(fmt.Sprintf("%s %d (it is 0 or 1)", a.GetName(), a.GetI()), o)
		}
		*flag = a.GetI() == 1
	}
	if len(n.GetOutput()) != 1 {
		return fmt.Errorf("%s: %d outputs, where it has 1", o, len(n.GetOutput()))
	}
	return nil
}

func (o *cumSum) ValidateInputs(in []tensor.Tensor) ([]tensor.Tensor, error) {
	return ops.ValidateInputs(o, in)
}
func (*cumSum) GetMinInputs() int { return 2 }
func (*cumSum) GetMaxInputs() int { return 2 }
func (*cumSum) GetInputTypeConstraints() [][]tensor.Dtype {
	return [][]tensor.Dtype{sumTypes, {tensor.Int32, tensor.Int64}}
}
func (*cumSum) String() string { return "cumsum operator" }

func (o *cumSum) Apply(in []tensor.Tensor) ([]tensor.Tensor, error) {
	x := dense(in[0])
	if x.IsScalar() {
		return nil, ops.ErrInvalidInput("a scalar input: there is no axis to sum along", o)
	}
	var axis int64
	count := 0
	switch v := flat(in[1]).(type) {
	case []int32:
		if count = len(v); count == 1 {
			axis = int64(v[0])
		}
	case []int64:
		if count = len(v); count == 1 {
			axis = v[0]
		}
	}
	if len(in[1].Shape()) > 1 || count != 1 {
		return nil, ops.ErrInvalidInput(fmt.Sprintf("axis of shape %v, where it takes one element", in[1].Shape()), o)
	}
	a, outer, inner, err := aroundAxis(x.Shape(), false, int(axis))
	if err != nil {
		return nil, err
	}
	n := x.Shape()[a]
	var backing any
	switch v := x.Data().(type) {
	case []float32:
		backing = runningSums(v, outer, n, inner, o.exclusive, o.reverse)
	case []float64:
		backing = runningSums(v, outer, n, inner, o.exclusive, o.reverse)
	case []int32:
		backing = runningSums(v, outer, n, inner, o.exclusive, o.reverse)
	case []int64:
		backing = runningSums(v, outer, n, inner, o.exclusive, o.reverse)
	default:
		return nil, ops.ErrInvalidInputType(0, x.Dtype().Name(), o)
	}
	return []tensor.Tensor{tensor.New(tensor.WithShape(x.Shape().Clone()...), tensor.WithBacking(backing))}, nil
}

// runningSums is CumSum of x, laid out as [outer, n, inner], along its
// middle axis: the first sum is its element itself (or 0 when
// exclusive), each next one the sum before plus the next element (or,
// when exclusive, the one before it), from the end when reverse.
func runningSums[T float32 | float64 | int32 | int64](x []T, outer, n, inner int, exclusive, reverse bool) []T {
	out := make([]T, len(x))
	for o := range outer {
		for j := range inner {
			at, step := o*n*inner+j, inner
			if reverse {
				at, step = at+(n-1)*inner, -inner
			}
			var sum T
			for k := range n {
				switch {
				case exclusive:
					out[at] = sum
					sum += x[at]
				case k == 0:
					sum = x[at] // not 0 + x: a first -0 stays -0, as in ONNX Runtime
					out[at] = sum
				default:
					sum += x[at]
					out[at] = sum
				}
				at += step
			}
		}
	}
	return out
}
