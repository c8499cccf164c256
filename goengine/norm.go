package goengine

import (
	"fmt"
	"math"

	gonnxproto "github.com/advancedclimatesystems/gonnx/onnx"
	"github.com/advancedclimatesystems/gonnx/ops"
	"gorgonia.org/tensor"
)

// What CNNs exported for inference use beside convolutions and pools,
// and gonnx lacks: Dropout (the identity outside training),
// GlobalAveragePool and BatchNormalization in their inference forms, and
// InstanceNormalization (style transfer, GANs). A
// model that would train (Dropout's training_mode true, a
// BatchNormalization of training_mode 1 or with its running statistics
// as outputs) is refused: this engine does not train.

// dropout is Dropout at inference (opset 12's and 13's; older nodes
// are rewritten by dropoutRatio): its output is its input, and its optional
// mask all true, of the input's shape. The ratio, an input, must be in
// [0, 1) as ONNX Runtime asks; a training_mode of true, which would drop
// elements at random, is refused: at AI.MODELSTORE where it is a
// constant (refuseTraining), else at the run. FLOAT and DOUBLE, as in
// ONNX Runtime's CPU provider.
type dropout struct{ outputs int }

func (o *dropout) Init(n *gonnxproto.NodeProto) error {
	for _, a := range n.GetAttribute() {
		if a.GetName() != "seed" { // of the random drops, which inference makes none of
			return ops.ErrUnsupportedAttribute(a.GetName(), o)
		}
	}
	if o.outputs = len(n.GetOutput()); o.outputs < 1 || o.outputs > 2 {
		return fmt.Errorf("%s: %d outputs, where it has 1 or 2", o, o.outputs)
	}
	return nil
}

func (o *dropout) ValidateInputs(in []tensor.Tensor) ([]tensor.Tensor, error) {
	return ops.ValidateInputs(o, in)
}
func (*dropout) GetMinInputs() int { return 1 }
func (*dropout) GetMaxInputs() int { return 3 }
func (*dropout) GetInputTypeConstraints() [][]tensor.Dtype {
	return [][]tensor.Dtype{floatTypes, floatTypes, {tensor.Bool}}
}
func (*dropout) String() string { return "dropout operator" }

func (o *dropout) Apply(in []tensor.Tensor) ([]tensor.Tensor, error) {
	if len(in) > 1 && in[1] != nil {
		r := numbers(in[1])
		if len(r) != 1 || !(r[0] >= 0 && r[0] < 1) {
			return nil, ops.ErrInvalidInput(fmt.Sprintf("ratio %v, where it must be one number in [0, 1)", r), o)
		}
	}
	if len(in) > 2 && in[2] != nil {
		if b, ok := flat(in[2]).([]bool); !ok || len(b) != 1 || b[0] {
			return nil, ops.ErrInvalidInput("training_mode true: this engine does not train", o)
		}
	}
	outs := []tensor.Tensor{in[0]}
	if o.outputs > 1 {
		x := dense(in[0])
		mask := make([]bool, x.Shape().TotalSize())
		if x.IsScalar() {
			mask = make([]bool, 1)
		}
		for i := range mask {
			mask[i] = true
		}
		outs = append(outs, shaped(x, mask))
	}
	return outs, nil
}

// dropoutRatio is Dropout before opset 12, of one input and its ratio an
// attribute, as ONNX Runtime runs it there: the identity, whatever the
// ratio, and a mask all false (its kernel of versions 7 to 11 is its
// Identity's, which zeroes the mask), written as opset 12's Dropout
// without the ratio and a Not of its mask.
func dropoutRatio(e *edit, n *gonnxproto.NodeProto, _ bool) error {
	if len(n.GetInput()) != 1 {
		return e.cannot(n, "other inputs than the data before opset 12")
	}
	for _, a := range n.GetAttribute() {
		if a.GetName() != "ratio" {
			return e.cannot(n, "attribute "+a.GetName()+" before opset 12")
		}
	}
	n.Attribute = nil
	if len(n.GetOutput()) != 2 || n.GetOutput()[1] == "" {
		return nil
	}
	mask := n.GetOutput()[1]
	all := e.fresh(mask + "/true")
	n.Output = []string{n.GetOutput()[0], all}
	e.emit(n, &gonnxproto.NodeProto{Name: n.GetName() + "/not", OpType: "Not", Input: []string{all}, Output: []string{mask}})
	return nil
}

// refuseTraining refuses a Dropout node whose training_mode is a
// constant true (an initializer or a Constant node's value): every run
// would fail.
func refuseTraining(g *gonnxproto.GraphProto) error {
	consts := map[string]*gonnxproto.TensorProto{}
	for _, t := range g.GetInitializer() {
		consts[t.GetName()] = t
	}
	for _, n := range g.GetNode() {
		if n.GetOpType() == "Constant" && len(n.GetOutput()) == 1 {
			for _, a := range n.GetAttribute() {
				if a.GetName() == "value" && a.GetT() != nil {
					consts[n.GetOutput()[0]] = a.GetT()
				}
			}
		}
	}
	for _, n := range g.GetNode() {
		if n.GetOpType() != "Dropout" || len(n.GetInput()) < 3 {
			continue
		}
		if t, ok := consts[n.GetInput()[2]]; ok && constTrue(t) {
			return refuse("node %q (Dropout): training_mode is true, and this engine does not train (inference-engine onnxruntime does)", n.GetName())
		}
	}
	return nil
}

// constTrue is whether t is a BOOL tensor with an element true.
func constTrue(t *gonnxproto.TensorProto) bool {
	if t.GetDataType() != int32(gonnxproto.TensorProto_BOOL) {
		return false
	}
	for _, b := range t.GetRawData() {
		if b != 0 {
			return true
		}
	}
	for _, v := range t.GetInt32Data() {
		if v != 0 {
			return true
		}
	}
	return false
}

// globalAveragePool is GlobalAveragePool over N x C x D1 x ... x Dn input
// (n at least 1): the mean of each channel's D1 x ... x Dn elements,
// summed in float64, of shape N x C x 1 x ... x 1. FLOAT, as in ONNX
// Runtime's CPU provider.
type globalAveragePool struct{}

func (o *globalAveragePool) Init(n *gonnxproto.NodeProto) error { return noAttributes(n, o) }
func (o *globalAveragePool) ValidateInputs(in []tensor.Tensor) ([]tensor.Tensor, error) {
	return ops.ValidateInputs(o, in)
}
func (*globalAveragePool) GetMinInputs() int { return 1 }
func (*globalAveragePool) GetMaxInputs() int { return 1 }
func (*globalAveragePool) GetInputTypeConstraints() [][]tensor.Dtype {
	return [][]tensor.Dtype{float32Only}
}
func (*globalAveragePool) String() string { return "globalaveragepool operator" }

func (o *globalAveragePool) Apply(in []tensor.Tensor) ([]tensor.Tensor, error) {
	x := dense(in[0])
	s := x.Shape().Clone()
	xs, ok := x.Data().([]float32)
	if !ok || x.IsScalar() || len(s) < 3 {
		return nil, ops.ErrInvalidInput(fmt.Sprintf("input of shape %v; it takes N x C x D1 x ...", s), o)
	}
	n := 1
	outShape := []int{s[0], s[1]}
	for _, d := range s[2:] {
		n *= d
		outShape = append(outShape, 1)
	}
	out := make([]float32, s[0]*s[1])
	for i := range out {
		sum := 0.0
		for _, v := range xs[i*n : (i+1)*n] {
			sum += float64(v)
		}
		out[i] = float32(sum / float64(n))
	}
	return []tensor.Tensor{tensor.New(tensor.WithShape(outShape...), tensor.WithBacking(out))}, nil
}

// batchNorm is BatchNormalization at inference: each channel c (X's
// dimension 1) of X is (X - mean[c]) / sqrt(var[c] + epsilon) * scale[c]
// + B[c], computed in float64. FLOAT or DOUBLE, the five inputs of the
// same type, as in ONNX Runtime's CPU provider. The outputs a training
// run has (the saved or running mean and variance) and training_mode 1
// (opset 14) are refused; momentum, which only training uses, is taken
// and ignored.
type batchNorm struct{ epsilon float64 }

func (o *batchNorm) Init(n *gonnxproto.NodeProto) error {
	o.epsilon = 1e-5
	for _, a := range n.GetAttribute() {
		switch a.GetName() {
		case "epsilon":
			o.epsilon = float64(a.GetF())
		case "momentum":
		case "training_mode":
			if a.GetI() != 0 {
				return ops.ErrUnsupportedAttribute("training_mode 1 (this engine does not train)", o)
			}
		default:
			return ops.ErrUnsupportedAttribute(a.GetName(), o)
		}
	}
	if len(n.GetOutput()) != 1 {
		return fmt.Errorf("%s: %d outputs; this engine runs inference, of Y alone", o, len(n.GetOutput()))
	}
	return nil
}

func (o *batchNorm) ValidateInputs(in []tensor.Tensor) ([]tensor.Tensor, error) {
	return ops.ValidateInputs(o, in)
}
func (*batchNorm) GetMinInputs() int { return 5 }
func (*batchNorm) GetMaxInputs() int { return 5 }
func (*batchNorm) GetInputTypeConstraints() [][]tensor.Dtype {
	return [][]tensor.Dtype{floatTypes, floatTypes, floatTypes, floatTypes, floatTypes}
}
func (*batchNorm) String() string { return "batchnormalization operator" }

func (o *batchNorm) Apply(in []tensor.Tensor) ([]tensor.Tensor, error) {
	x := dense(in[0])
	s := x.Shape().Clone()
	if x.IsScalar() || len(s) < 2 {
		return nil, ops.ErrInvalidInput(fmt.Sprintf("input of shape %v; it takes N x C x ...", s), o)
	}
	params := make([][]float64, 4) // scale, B, mean, var
	for i := range params {
		p := dense(in[i+1])
		if p.Dtype() != x.Dtype() {
			return nil, ops.ErrInvalidInput(fmt.Sprintf("input %d is %v and X %v", i+1, p.Dtype(), x.Dtype()), o)
		}
		if len(p.Shape()) != 1 || p.Shape()[0] != s[1] {
			return nil, ops.ErrInvalidInput(fmt.Sprintf("input %d has shape %v, not [%d] (X's channels)", i+1, p.Shape(), s[1]), o)
		}
		params[i] = numbers(p)
	}
	// Y = X * a[c] + b[c].
	a, b := make([]float64, s[1]), make([]float64, s[1])
	for c := range a {
		a[c] = params[0][c] / math.Sqrt(params[3][c]+o.epsilon)
		b[c] = params[1][c] - params[2][c]*a[c]
	}
	inner := 1
	for _, d := range s[2:] {
		inner *= d
	}
	var backing any
	switch v := x.Data().(type) {
	case []float32:
		backing = affinePerChannel(v, a, b, inner)
	case []float64:
		backing = affinePerChannel(v, a, b, inner)
	default:
		return nil, ops.ErrInvalidInputType(0, x.Dtype().Name(), o)
	}
	return []tensor.Tensor{tensor.New(tensor.WithShape(s...), tensor.WithBacking(backing))}, nil
}

// affinePerChannel is x * a[c] + b[c] for x laid out as [N, C, inner].
func affinePerChannel[T float32 | float64](x []T, a, b []float64, inner int) []T {
	out := make([]T, len(x))
	for i, v := range x {
		c := i / inner % len(a)
		out[i] = T(float64(v)*a[c] + b[c])
	}
	return out
}

// batchNormTraining is BatchNormalization's version 14, which has
// training_mode: a node of training_mode 1 is refused, as is one with the
// attribute in a model of an older opset (which ONNX Runtime refuses).
func batchNormTraining(e *edit, n *gonnxproto.NodeProto, reached bool) error {
	for _, a := range n.GetAttribute() {
		switch {
		case a.GetName() != "training_mode":
		case a.GetI() != 0:
			return e.cannot(n, "training_mode 1 (opset 14; this engine does not train)")
		case !reached:
			return e.cannot(n, "attribute training_mode before opset 14")
		}
	}
	return nil
}

// instanceNorm is InstanceNormalization (version 6, the same at opsets
// 11 to 17), FLOAT as in ONNX Runtime's CPU provider: each channel of
// each item of N x C x D1 x ... x Dn input (n at least 1) is normalized
// to a mean of 0 and a variance of 1 (epsilon, 1e-5 by default, added to
// the variance), then multiplied by scale[c] and shifted by B[c], both of
// C elements; the sums are in float64. A NaN or an infinity in a channel
// makes it all NaN, as in ONNX Runtime. PyTorch exports InstanceNorm1d,
// 2d and 3d as it (style transfer, GANs), with a scale of ones and a B of
// zeros when they have no affine parameters.
type instanceNorm struct{ epsilon float64 }

func (o *instanceNorm) Init(n *gonnxproto.NodeProto) error {
	o.epsilon = 1e-5
	for _, a := range n.GetAttribute() {
		if a.GetName() != "epsilon" {
			return ops.ErrUnsupportedAttribute(a.GetName(), o)
		}
		o.epsilon = float64(a.GetF())
	}
	if len(n.GetOutput()) != 1 {
		return fmt.Errorf("%s: %d outputs, where it has 1", o, len(n.GetOutput()))
	}
	return nil
}

func (o *instanceNorm) ValidateInputs(in []tensor.Tensor) ([]tensor.Tensor, error) {
	return ops.ValidateInputs(o, in)
}
func (*instanceNorm) GetMinInputs() int { return 3 }
func (*instanceNorm) GetMaxInputs() int { return 3 }
func (*instanceNorm) GetInputTypeConstraints() [][]tensor.Dtype {
	return [][]tensor.Dtype{float32Only, float32Only, float32Only}
}
func (*instanceNorm) String() string { return "instancenormalization operator" }

func (o *instanceNorm) Apply(in []tensor.Tensor) ([]tensor.Tensor, error) {
	x := dense(in[0])
	s := x.Shape().Clone()
	xs, ok := x.Data().([]float32)
	if !ok || x.IsScalar() || len(s) < 3 {
		return nil, ops.ErrInvalidInput(fmt.Sprintf("input of shape %v; it takes N x C x D1 x ...", s), o)
	}
	params := make([][]float32, 2) // scale, B
	for i := range params {
		p := dense(in[i+1])
		v, ok := p.Data().([]float32)
		if !ok || p.IsScalar() || len(p.Shape()) != 1 || len(v) != s[1] {
			return nil, ops.ErrInvalidInput(fmt.Sprintf("input %d has shape %v, not [%d] (X's channels)", i+1, p.Shape(), s[1]), o)
		}
		params[i] = v
	}
	inner := len(xs) / (s[0] * s[1])
	y := make([]float32, len(xs))
	for plane := range s[0] * s[1] {
		v, out := xs[plane*inner:(plane+1)*inner], y[plane*inner:(plane+1)*inner]
		mean, variance := moments(v)
		c := plane % s[1]
		a := float64(params[0][c]) / math.Sqrt(variance+o.epsilon)
		b := float64(params[1][c]) - mean*a
		for j, e := range v {
			out[j] = float32(float64(e)*a + b)
		}
	}
	return []tensor.Tensor{tensor.New(tensor.WithShape(s...), tensor.WithBacking(y))}, nil
}

// moments is the mean and the variance (over len(v), not len(v) − 1) of
// v, summed in float64: LayerNormalization's and InstanceNormalization's
// statistics.
func moments(v []float32) (mean, variance float64) {
	sum := 0.0
	for _, e := range v {
		sum += float64(e)
	}
	mean = sum / float64(len(v))
	sq := 0.0
	for _, e := range v {
		d := float64(e) - mean
		sq += d * d
	}
	return mean, sq / float64(len(v))
}
