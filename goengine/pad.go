package goengine

import (
	"fmt"
	"math"

	gonnxproto "github.com/advancedclimatesystems/gonnx/onnx"
	"github.com/advancedclimatesystems/gonnx/ops"
	"gorgonia.org/tensor"
)

// padTypes are Pad's types in ONNX Runtime 1.24's CPU provider (BOOL
// from opset 13 there; taken at 11 and 12 too).
var padTypes = []tensor.Dtype{tensor.Float32, tensor.Float64, tensor.Int8, tensor.Int32, tensor.Int64,
	tensor.Uint8, tensor.Uint32, tensor.Uint64, tensor.Bool}

// pad is Pad at opsets 11 to 18 (13 added BFLOAT16, 18 the input axes):
// x widened along each axis by the INT64 input pads, 2 x rank of them, the
// begins then the ends, as ONNX Runtime pads: a negative one crops. With
// axes (INT32 or INT64, negative from the end), pads has 2 x len(axes)
// and pads those axes only, a repeated one by its last pads, as ONNX
// Runtime's (ONNX leaves it undefined). mode is constant (the
// optional input constant_value, one element of x's type, 0 by default),
// reflect (mirrored about the edge, which is not repeated) or edge (the
// edge repeated); wrap is opset 19's. PyTorch exports ZeroPad2d,
// ReflectionPad2d and ReplicationPad2d, and an AvgPool2d that counts its
// padding, as Pad. Its output is bounded before it runs (outputElems); a
// dimension of 0 or below is refused, as the engine makes no empty tensors,
// and so are edge and reflect pads of an axis that negative ones crop
// whole, which ONNX Runtime refuses, and a reflect pad as large as what
// is left of the axis, where ONNX Runtime reads memory it never wrote.
type pad struct{ mode string }

func (o *pad) Init(n *gonnxproto.NodeProto) error {
	o.mode = "constant"
	for _, a := range n.GetAttribute() {
		if a.GetName() != "mode" {
			return ops.ErrUnsupportedAttribute(a.GetName(), o)
		}
		o.mode = string(a.GetS())
	}
	switch o.mode {
	case "constant", "reflect", "edge":
		return nil
	}
	return ops.ErrUnsupportedAttribute("mode="+o.mode, o)
}
func (o *pad) ValidateInputs(in []tensor.Tensor) ([]tensor.Tensor, error) {
	return ops.ValidateInputs(o, in)
}
func (*pad) GetMinInputs() int { return 2 }
func (*pad) GetMaxInputs() int { return 4 }
func (*pad) GetInputTypeConstraints() [][]tensor.Dtype {
	return [][]tensor.Dtype{padTypes, {tensor.Int64}, padTypes, {tensor.Int32, tensor.Int64}}
}
func (*pad) String() string { return "pad operator" }

// outputElems implements sizer: each dimension plus its two pads (at
// least 1: the run refuses less), saturating.
func (o *pad) outputElems(in []tensor.Tensor) int64 {
	if len(in) < 2 || in[0] == nil || in[1] == nil {
		return 0
	}
	s := in[0].Shape()
	p, err := padsOf(in, len(s))
	if err != nil {
		return 0
	}
	n := int64(1)
	for i, d := range s {
		n = mul(n, max(1, satAdd(satAdd(int64(d), p[i]), p[i+len(s)])))
	}
	return n
}

// satAdd is a + b, held to the range of int64.
func satAdd(a, b int64) int64 {
	switch {
	case b > 0 && a > math.MaxInt64-b:
		return math.MaxInt64
	case b < 0 && a < math.MinInt64-b:
		return math.MinInt64
	}
	return a + b
}

func (o *pad) Apply(in []tensor.Tensor) ([]tensor.Tensor, error) {
	x := dense(in[0])
	if x.IsScalar() {
		return nil, ops.ErrInvalidInput("a scalar input: there is no axis to pad", o)
	}
	shape := x.Shape().Clone()
	r := len(shape)
	p, err := padsOf(in, r)
	if err != nil {
		return nil, ops.ErrInvalidInput(err.Error(), o)
	}
	outShape := make([]int, r)
	for i, d := range shape {
		begin, end := p[i], p[i+r]
		n := satAdd(satAdd(int64(d), begin), end)
		if n <= 0 {
			return nil, ops.ErrInvalidInput(fmt.Sprintf("pads %d and %d of a dimension of %d: this engine makes no empty tensors", begin, end, d), o)
		}
		// What is left of the axis once negative pads have cropped it:
		// edge and reflect read it, and reflect reads it from its second
		// element on, so past it ONNX Runtime reads memory it never wrote.
		kept := int64(d) + min(begin, 0) + min(end, 0)
		switch {
		case o.mode != "constant" && kept <= 0:
			return nil, ops.ErrInvalidInput(fmt.Sprintf("%s pads %d and %d of a dimension of %d crop all of it", o.mode, begin, end, d), o)
		case o.mode == "reflect" && (begin > 0 || end > 0) && (kept < 2 || begin >= kept || end >= kept):
			return nil, ops.ErrInvalidInput(fmt.Sprintf("reflect pads %d and %d of a dimension of %d: each must be less than the %d elements they reflect", begin, end, d, kept), o)
		}
		outShape[i] = int(n) // bounded before Apply (outputElems)
	}
	var c any
	if len(in) > 2 && in[2] != nil && o.mode == "constant" {
		if in[2].Dtype() != x.Dtype() || in[2].Shape().TotalSize() != 1 {
			return nil, ops.ErrInvalidInput(fmt.Sprintf("constant_value is %v of shape %v, where it must be one %v", in[2].Dtype(), in[2].Shape(), x.Dtype()), o)
		}
		c = flat(in[2])
	}
	var backing any
	switch v := flat(x).(type) {
	case []float32:
		backing = padAs(v, shape, outShape, p[:r], o.mode, c)
	case []float64:
		backing = padAs(v, shape, outShape, p[:r], o.mode, c)
	case []int8:
		backing = padAs(v, shape, outShape, p[:r], o.mode, c)
	case []int32:
		backing = padAs(v, shape, outShape, p[:r], o.mode, c)
	case []int64:
		backing = padAs(v, shape, outShape, p[:r], o.mode, c)
	case []uint8:
		backing = padAs(v, shape, outShape, p[:r], o.mode, c)
	case []uint32:
		backing = padAs(v, shape, outShape, p[:r], o.mode, c)
	case []uint64:
		backing = padAs(v, shape, outShape, p[:r], o.mode, c)
	case []bool:
		backing = padAs(v, shape, outShape, p[:r], o.mode, c)
	default:
		return nil, ops.ErrInvalidInputType(0, x.Dtype().Name(), o)
	}
	return []tensor.Tensor{tensor.New(tensor.WithShape(outShape...), tensor.WithBacking(backing))}, nil
}

// padsOf is Pad's pads for each of the r axes of its input, the begins
// then the ends: its input pads, of shape [2n] or [1, 2n] as ONNX Runtime
// takes them ([2, n] has the count but is no list of pads), n r or, with
// the input axes (1-D, each in [-r, r)), the number of axes.
func padsOf(in []tensor.Tensor, r int) ([]int64, error) {
	ps := in[1].Shape()
	p, ok := flat(in[1]).([]int64)
	if len(in) < 4 || in[3] == nil {
		if !ok || len(p) != 2*r || len(ps) > 2 || len(ps) == 2 && ps[0] != 1 {
			return nil, fmt.Errorf("pads of shape %v for an input of rank %d, where it takes %d", ps, r, 2*r)
		}
		return p, nil
	}
	axes := numbers(in[3])
	if len(in[3].Shape()) != 1 || axes == nil {
		return nil, fmt.Errorf("axes of shape %v, where it takes a list", in[3].Shape())
	}
	if !ok || len(p) != 2*len(axes) || len(ps) > 2 || len(ps) == 2 && ps[0] != 1 {
		return nil, fmt.Errorf("pads of shape %v for %d axes, where it takes %d", ps, len(axes), 2*len(axes))
	}
	all := make([]int64, 2*r)
	for i, a := range axes {
		if a < float64(-r) || a >= float64(r) {
			return nil, fmt.Errorf("axis %v of an input of rank %d", a, r)
		}
		k := (int(a) + r) % r
		all[k], all[k+r] = p[i], p[i+len(axes)]
	}
	return all, nil
}

// padIndex is the index along an axis of d elements that position j
// (before the begin pad is added) reads in mode, -1 for the constant.
// Reflect pads are less than what is left of the axis (Apply), so a
// reflection stays inside it.
func padIndex(j int64, d int, mode string) int {
	n := int64(d)
	switch {
	case j >= 0 && j < n:
		return int(j)
	case mode == "edge":
		return int(min(max(j, 0), n-1))
	case mode == "reflect" && n > 1:
		if j < 0 {
			return int(-j)
		}
		return int(2*(n-1) - j)
	case mode == "reflect":
		return 0
	}
	return -1
}

// padAs is x (of shape) padded to outShape, begins[i] before it along
// axis i, in mode, the constant c (a []T of one, or nil: 0) where it
// reads none of x; walked odometer style.
func padAs[T any](x []T, shape, outShape []int, begins []int64, mode string, c any) []T {
	var fill T
	if v, ok := c.([]T); ok {
		fill = v[0]
	}
	r := len(shape)
	strides := make([]int, r)
	step := 1
	for i := r - 1; i >= 0; i-- {
		strides[i] = step
		step *= shape[i]
	}
	n := 1
	for _, d := range outShape {
		n *= d
	}
	out := make([]T, n)
	idx := make([]int, r)
	for k := range out {
		at, inside := 0, true
		for i, j := range idx {
			src := padIndex(int64(j)-begins[i], shape[i], mode)
			if src < 0 {
				inside = false
				break
			}
			at += src * strides[i]
		}
		if inside {
			out[k] = x[at]
		} else {
			out[k] = fill
		}
		for i := r - 1; i >= 0; i-- {
			if idx[i]++; idx[i] < outShape[i] {
				break
			}
			idx[i] = 0
		}
	}
	return out
}
