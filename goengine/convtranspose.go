package goengine

import (
	"fmt"
	"slices"

	gonnxproto "github.com/advancedclimatesystems/gonnx/onnx"
	"github.com/advancedclimatesystems/gonnx/ops"
	"gorgonia.org/tensor"
)

// convTranspose is ConvTranspose (version 11, the same at opsets 11 to
// 17), FLOAT as in ONNX Runtime's CPU provider (which has no DOUBLE
// kernel), over N x C x D1 x ... x Dn input of any spatial rank n: W is C
// x M/group x k1 x ... x kn, the optional B has M elements. Each input
// element adds its products with its group's kernels into the output,
// stride apart, the taps dilation apart, shifted back by the begin pads;
// along axis i the output has
//
//	(D_i - 1) x stride + output_padding + (k_i - 1) x dilation + 1
//
// elements less the pads. output_shape sets that size instead, and the
// pads are what is left over, split as ONNX Runtime splits them (the odd
// one at the start, but at the end with SAME_UPPER); auto_pad SAME_UPPER
// and SAME_LOWER pad so that it is D_i x stride where the kernel reaches
// that far, split the same way, and VALID pads nothing. PyTorch exports
// ConvTranspose1d, 2d and 3d as it (decoders, U-Nets, learned
// upsampling). Its output is bounded before it is made (outputElems), its
// multiply-adds against the run's deadline (work.go).
type convTranspose struct {
	autoPad string
	group   int
	// The list attributes, nil when the node has none: kernel_shape,
	// strides, dilations, output_padding and output_shape one per spatial
	// axis, pads two (the begins, then the ends).
	kernel, strides, dilations, pads, outPadding, outShape []int
}

func (o *convTranspose) Init(n *gonnxproto.NodeProto) error {
	*o = convTranspose{autoPad: "NOTSET", group: 1}
	for _, a := range n.GetAttribute() {
		var least int64 = 1
		var list *[]int
		switch a.GetName() {
		case "auto_pad":
			switch o.autoPad = string(a.GetS()); o.autoPad {
			case "":
				o.autoPad = "NOTSET"
			case "NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID":
			default:
				return ops.ErrUnsupportedAttribute("auto_pad="+o.autoPad, o)
			}
			continue
		case "group":
			if a.GetI() < 1 || a.GetI() > 1<<31 {
				return ops.ErrInvalidAttribute("group (it must be in [1, 2^31])", o)
			}
			o.group = int(a.GetI())
			continue
		case "kernel_shape":
			list = &o.kernel
		case "strides":
			list = &o.strides
		case "dilations":
			list = &o.dilations
		case "pads":
			list, least = &o.pads, 0
		case "output_padding":
			list, least = &o.outPadding, 0
		case "output_shape":
			list = &o.outShape
		default:
			return ops.ErrUnsupportedAttribute(a.GetName(), o)
		}
		// The sanitizer's bound on strides, dilations and pads, for all of
		// them: the sizes they make stay far from overflowing.
		*list = make([]int, 0, len(a.GetInts()))
		for _, v := range a.GetInts() {
			if v < least || v > 1<<31 {
				return ops.ErrInvalidAttribute(fmt.Sprintf("%s (each must be in [%d, 2^31], not %d)", a.GetName(), least, v), o)
			}
			*list = append(*list, int(v))
		}
	}
	if o.autoPad != "NOTSET" && o.pads != nil { // ONNX Runtime refuses both too
		return ops.ErrUnsupportedAttribute("pads with auto_pad="+o.autoPad, o)
	}
	if len(n.GetOutput()) != 1 {
		return fmt.Errorf("%s: %d outputs, where it has 1", o, len(n.GetOutput()))
	}
	return nil
}

func (o *convTranspose) ValidateInputs(in []tensor.Tensor) ([]tensor.Tensor, error) {
	return ops.ValidateInputs(o, in)
}
func (*convTranspose) GetMinInputs() int { return 2 }
func (*convTranspose) GetMaxInputs() int { return 3 }
func (*convTranspose) GetInputTypeConstraints() [][]tensor.Dtype {
	return [][]tensor.Dtype{float32Only, float32Only, float32Only}
}
func (*convTranspose) String() string { return "convtranspose operator" }

// geometry checks X's and W's shapes against each other and the
// attributes, and gives the output's shape and the pad before each
// spatial axis; the sizes saturate at math.MaxInt64 (outputElems bounds
// them before Apply allocates).
func (o *convTranspose) geometry(xs, ws tensor.Shape) (out, head []int64, err error) {
	if len(xs) < 3 {
		return nil, nil, ops.ErrInvalidInput(fmt.Sprintf("X of shape %v; it takes N x C x D1 x ...", xs), o)
	}
	sp := len(xs) - 2
	switch {
	case len(ws) != len(xs):
		return nil, nil, ops.ErrInvalidInput(fmt.Sprintf("W of shape %v for X of shape %v: their ranks differ", ws, xs), o)
	case ws[0] != xs[1]:
		return nil, nil, ops.ErrInvalidInput(fmt.Sprintf("W of shape %v for X's %d channels: W's first dimension must be X's channels", ws, xs[1]), o)
	case xs[1]%o.group != 0:
		return nil, nil, ops.ErrInvalidInput(fmt.Sprintf("group %d does not divide X's %d channels", o.group, xs[1]), o)
	case o.kernel != nil && !slices.Equal(o.kernel, []int(ws[2:])):
		return nil, nil, ops.ErrInvalidInput(fmt.Sprintf("kernel_shape %v, but W has shape %v", o.kernel, ws), o)
	}
	for _, l := range []struct {
		name string
		v    []int
		want int
	}{
		{"strides", o.strides, sp}, {"dilations", o.dilations, sp}, {"output_padding", o.outPadding, sp},
		{"output_shape", o.outShape, sp}, {"pads", o.pads, 2 * sp},
	} {
		if l.v != nil && len(l.v) != l.want {
			return nil, nil, ops.ErrInvalidInput(fmt.Sprintf("%s has %d entries for %d spatial axes", l.name, len(l.v), sp), o)
		}
	}
	at := func(v []int, i, def int) int64 {
		if v == nil {
			return int64(def)
		}
		return int64(v[i])
	}
	out = []int64{int64(xs[0]), mul(int64(ws[1]), int64(o.group))}
	head = make([]int64, sp)
	for i := range sp {
		in, k := int64(xs[2+i]), int64(ws[2+i])
		stride := at(o.strides, i, 1)
		// The whole output, before any padding crops it.
		full := add(add(mul(in-1, stride), at(o.outPadding, i, 0)), add(mul(k-1, at(o.dilations, i, 1)), 1))
		var size int64
		switch {
		case o.outShape != nil:
			size = int64(o.outShape[i])
			head[i] = o.split(max(0, full-size))
		case o.autoPad == "SAME_UPPER" || o.autoPad == "SAME_LOWER":
			total := max(0, full-mul(in, stride))
			head[i], size = o.split(total), full-total
		default:
			head[i] = at(o.pads, i, 0)
			size = full - head[i] - at(o.pads, sp+i, 0)
		}
		if size < 1 {
			return nil, nil, ops.ErrInvalidInput(fmt.Sprintf("an output of %d elements along spatial axis %d: the pads crop all of it", size, i), o)
		}
		out = append(out, size)
	}
	return out, head, nil
}

// split is the begin pad of total padding: half of it, the odd one more
// but with SAME_UPPER, as the ONNX specification and ONNX Runtime split
// it.
func (o *convTranspose) split(total int64) int64 {
	if o.autoPad == "SAME_UPPER" {
		return total / 2
	}
	return total - total/2
}

// outputElems implements sizer: the output's elements, 0 when Apply will
// refuse the inputs.
func (o *convTranspose) outputElems(in []tensor.Tensor) int64 {
	if len(in) < 2 || in[0] == nil || in[1] == nil {
		return 0
	}
	out, _, err := o.geometry(in[0].Shape(), in[1].Shape())
	if err != nil {
		return 0
	}
	return product(out)
}

func (o *convTranspose) Apply(in []tensor.Tensor) ([]tensor.Tensor, error) {
	x, w := dense(in[0]), dense(in[1])
	xd, ok := x.Data().([]float32)
	if !ok || x.IsScalar() {
		return nil, ops.ErrInvalidInputType(0, x.Dtype().Name(), o)
	}
	wd, ok := w.Data().([]float32)
	if !ok || w.IsScalar() {
		return nil, ops.ErrInvalidInputType(1, w.Dtype().Name(), o)
	}
	xs, ws := x.Shape(), w.Shape()
	out64, head64, err := o.geometry(xs, ws)
	if err != nil {
		return nil, err
	}
	out, head := make([]int, len(out64)), make([]int, len(head64))
	for i, d := range out64 {
		out[i] = int(d)
	}
	for i, h := range head64 {
		head[i] = int(h)
	}
	m := out[1]
	var bias []float32
	if len(in) > 2 && in[2] != nil {
		b := dense(in[2])
		if bias, ok = b.Data().([]float32); !ok || b.IsScalar() || len(b.Shape()) != 1 || len(bias) != m {
			return nil, ops.ErrInvalidInput(fmt.Sprintf("B of shape %v, where it takes the %d output channels", b.Shape(), m), o)
		}
	}
	p := transposePlan{in: xs[2:], out: out[2:], head: head, kernel: ws[2:],
		strides: o.strides, dilations: o.dilations}
	p.init()
	inPlane, outPlane, kPlane := planeSize(xs[2:]), planeSize(out[2:]), planeSize(ws[2:])
	cinG, coutG := xs[1]/o.group, ws[1]
	y := make([]float32, out[0]*m*outPlane)
	for b := range out[0] {
		for oc := range m {
			dst := y[(b*m+oc)*outPlane : (b*m+oc+1)*outPlane]
			g, ocg := oc/coutG, oc%coutG
			for icg := range cinG {
				ic := g*cinG + icg
				src := xd[(b*xs[1]+ic)*inPlane : (b*xs[1]+ic+1)*inPlane]
				kern := wd[(ic*coutG+ocg)*kPlane : (ic*coutG+ocg+1)*kPlane]
				p.scatter(dst, src, kern)
			}
			if bias != nil {
				for i := range dst {
					dst[i] += bias[oc]
				}
			}
		}
	}
	return []tensor.Tensor{tensor.New(tensor.WithShape(out...), tensor.WithBacking(y))}, nil
}

// planeSize is the product of dims (of tensors in memory, or bounded
// before they are made).
func planeSize(dims []int) int {
	n := 1
	for _, d := range dims {
		n *= d
	}
	return n
}

// transposePlan is the geometry of one input plane scattered into one
// output plane (in, out and kernel the spatial dimensions; strides and
// dilations nil for 1s), with each axis's strides through the planes.
type transposePlan struct {
	in, out, head, kernel, strides, dilations []int
	inStep, outStep                           []int // elements between neighbours along each axis
	tap, off, lo, hi, pos                     []int // scatter's state
}

func (p *transposePlan) init() {
	sp := len(p.in)
	p.inStep, p.outStep = make([]int, sp), make([]int, sp)
	in, out := 1, 1
	for i := sp - 1; i >= 0; i-- {
		p.inStep[i], p.outStep[i] = in, out
		in *= p.in[i]
		out *= p.out[i]
	}
	if p.strides == nil {
		p.strides = slices.Repeat([]int{1}, sp)
	}
	if p.dilations == nil {
		p.dilations = slices.Repeat([]int{1}, sp)
	}
	p.tap, p.off, p.lo, p.hi, p.pos = make([]int, sp), make([]int, sp), make([]int, sp), make([]int, sp), make([]int, sp)
}

// scatter adds src (an input plane) times each tap of kern (one kernel)
// into dst (an output plane). For each tap it visits only the input
// positions that land inside the output: along axis i, input position j
// lands at j x stride + tap x dilation - head.
func (p *transposePlan) scatter(dst, src, kern []float32) {
	sp := len(p.in)
	clear(p.tap)
	for _, wv := range kern {
		empty := false
		for i := range sp {
			s := p.strides[i]
			off := p.tap[i]*p.dilations[i] - p.head[i]
			p.off[i] = off
			p.lo[i] = 0
			if off < 0 {
				p.lo[i] = (-off + s - 1) / s
			}
			p.hi[i] = -1
			if last := p.out[i] - 1 - off; last >= 0 {
				p.hi[i] = min(p.in[i]-1, last/s)
			}
			empty = empty || p.lo[i] > p.hi[i]
		}
		if !empty {
			p.scatterTap(dst, src, wv)
		}
		for i := sp - 1; i >= 0; i-- { // the next tap
			if p.tap[i]++; p.tap[i] < p.kernel[i] {
				break
			}
			p.tap[i] = 0
		}
	}
}

// scatterTap adds src times wv into dst over the input positions from lo
// to hi along each axis (scatter's), walked odometer style but for the
// last axis, the inner loop.
func (p *transposePlan) scatterTap(dst, src []float32, wv float32) {
	last := len(p.in) - 1
	copy(p.pos, p.lo)
	s, lo, hi := p.strides[last], p.lo[last], p.hi[last]
	for {
		from, to := 0, 0
		for i := range last {
			from += p.pos[i] * p.inStep[i]
			to += (p.pos[i]*p.strides[i] + p.off[i]) * p.outStep[i]
		}
		row := src[from : from+p.in[last]]
		at := to + lo*s + p.off[last]
		for j := lo; j <= hi; j++ {
			dst[at] += wv * row[j]
			at += s
		}
		i := last - 1
		for ; i >= 0; i-- {
			if p.pos[i]++; p.pos[i] <= p.hi[i] {
				break
			}
			p.pos[i] = p.lo[i]
		}
		if i < 0 {
			return
		}
	}
}
