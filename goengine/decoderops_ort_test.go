//go:build cgo && !noort

package goengine

import (
	"fmt"
	"math"
	"math/rand"
	"testing"

	gonnxproto "github.com/advancedclimatesystems/gonnx/onnx"

	"github.com/enclaveai/enclaveai/modelstore"
)

// withEdges is a FLOAT tensor of shape of normal values but for a NaN, an
// infinity of each sign and a -0 at a few places, sparse enough that most
// outputs of an operator that sums over a window stay numbers.
func withEdges(r *rand.Rand, shape ...int64) *modelstore.Tensor {
	n := int(modelstore.ShapeLen(shape))
	return floatTensor(modelstore.Float, func(i int) float64 {
		switch i {
		case 1:
			return math.NaN()
		case n / 2:
			return math.Inf(1)
		case n - 2:
			return math.Inf(-1)
		case n / 3:
			return math.Copysign(0, -1)
		}
		return r.NormFloat64() * 2
	}, shape...)
}

// ConvTranspose (FLOAT, as ONNX Runtime has it) gives ONNX Runtime's
// outputs in 1, 2 and 3 spatial dimensions, with and without a bias,
// with strides, dilations, groups (depthwise too), asymmetric pads,
// output_padding, output_shape (larger and smaller than the kernel
// makes, with each auto_pad's split), auto_pad SAME_UPPER, SAME_LOWER
// (odd total pads, split the other way round from the ONNX text as ONNX
// Runtime splits them) and VALID, kernel_shape given, and NaN, infinities
// and -0 among the inputs, at opsets 11 to 17: the pure-Go engine refused
// every model with one ("unsupported operator ConvTranspose").
func TestConvTransposeMatchesONNXRuntime(t *testing.T) {
	requireORT(t)
	r := rand.New(rand.NewSource(50))
	f32 := []gonnxproto.TensorProto_DataType{gonnxproto.TensorProto_FLOAT}
	autoPad := func(s string) *gonnxproto.AttributeProto {
		return &gonnxproto.AttributeProto{Name: "auto_pad", Type: gonnxproto.AttributeProto_STRING, S: []byte(s)}
	}
	cases := []struct {
		x, w  []int64
		bias  bool
		attrs []*gonnxproto.AttributeProto
	}{
		// 1-D.
		{[]int64{2, 4, 7}, []int64{4, 3, 3}, true, nil},
		{[]int64{2, 4, 7}, []int64{4, 3, 3}, false, []*gonnxproto.AttributeProto{ints("strides", 2), ints("pads", 1, 2), ints("output_padding", 1)}},
		{[]int64{1, 4, 6}, []int64{4, 3, 4}, true, []*gonnxproto.AttributeProto{intAttr("group", 2), ints("dilations", 2), ints("strides", 3)}},
		{[]int64{1, 2, 5}, []int64{2, 2, 3}, true, []*gonnxproto.AttributeProto{ints("strides", 2), autoPad("SAME_UPPER")}},
		{[]int64{1, 2, 5}, []int64{2, 3, 2}, true, []*gonnxproto.AttributeProto{ints("strides", 2), ints("output_padding", 3)}}, // past the stride: the bias alone there
		// 2-D.
		{[]int64{2, 4, 5, 6}, []int64{4, 2, 3, 2}, true, nil},
		{[]int64{2, 4, 5, 6}, []int64{4, 2, 3, 3}, true, []*gonnxproto.AttributeProto{ints("strides", 2, 3), ints("pads", 1, 0, 0, 2), ints("output_padding", 1, 2)}},
		{[]int64{1, 4, 5, 6}, []int64{4, 3, 3, 3}, false, []*gonnxproto.AttributeProto{intAttr("group", 2), ints("dilations", 2, 1), ints("strides", 1, 2)}},
		{[]int64{2, 4, 5, 5}, []int64{4, 1, 3, 3}, true, []*gonnxproto.AttributeProto{intAttr("group", 4), ints("strides", 2, 2), ints("pads", 1, 1, 1, 1), ints("output_padding", 1, 1)}}, // depthwise
		{[]int64{1, 3, 4, 4}, []int64{3, 2, 4, 4}, true, []*gonnxproto.AttributeProto{ints("strides", 2, 2), ints("pads", 1, 1, 1, 1), ints("kernel_shape", 4, 4)}},                        // PyTorch's usual upsampling
		{[]int64{1, 2, 4, 5}, []int64{2, 3, 3, 3}, true, []*gonnxproto.AttributeProto{ints("strides", 2, 2), ints("output_shape", 10, 9)}},
		{[]int64{1, 2, 4, 5}, []int64{2, 3, 3, 3}, true, []*gonnxproto.AttributeProto{ints("strides", 2, 2), ints("output_shape", 7, 8)}},
		{[]int64{1, 2, 4, 5}, []int64{2, 3, 3, 3}, true, []*gonnxproto.AttributeProto{ints("strides", 2, 2), ints("output_shape", 6, 7), autoPad("SAME_UPPER")}},
		{[]int64{1, 2, 4, 5}, []int64{2, 3, 3, 3}, true, []*gonnxproto.AttributeProto{ints("strides", 2, 2), ints("output_shape", 6, 7), autoPad("SAME_LOWER")}},
		{[]int64{1, 2, 4, 5}, []int64{2, 3, 3, 2}, false, []*gonnxproto.AttributeProto{ints("strides", 2, 3), autoPad("SAME_UPPER")}},
		{[]int64{1, 2, 4, 5}, []int64{2, 3, 3, 2}, true, []*gonnxproto.AttributeProto{ints("strides", 2, 3), autoPad("SAME_LOWER")}},
		{[]int64{1, 2, 4, 5}, []int64{2, 3, 1, 1}, true, []*gonnxproto.AttributeProto{ints("strides", 3, 3), autoPad("SAME_LOWER")}}, // the kernel short of D x stride
		{[]int64{1, 2, 4, 5}, []int64{2, 3, 3, 2}, true, []*gonnxproto.AttributeProto{ints("strides", 2, 1), autoPad("VALID")}},
		{[]int64{1, 2, 3, 3}, []int64{2, 2, 2, 2}, true, []*gonnxproto.AttributeProto{ints("strides", 4, 3), ints("pads", 0, 1, 2, 0)}}, // gaps between the kernels
		// 3-D.
		{[]int64{1, 2, 3, 4, 3}, []int64{2, 3, 2, 3, 2}, true, []*gonnxproto.AttributeProto{ints("strides", 2, 1, 2), ints("pads", 0, 1, 1, 1, 0, 0)}},
		{[]int64{2, 4, 2, 3, 3}, []int64{4, 1, 2, 2, 2}, false, []*gonnxproto.AttributeProto{intAttr("group", 2), ints("dilations", 1, 2, 1), ints("output_padding", 0, 1, 0), ints("strides", 1, 2, 1)}},
	}
	for v := int64(MinOpset); v <= MaxOpset; v++ {
		for i, c := range cases {
			n := node{op: "ConvTranspose", opset: v, attrs: c.attrs, in: []string{"x", "w"}, inTypes: f32, out: f32,
				inits: []*gonnxproto.TensorProto{floatInit("w", floatElems[0], func(int) float64 { return r.NormFloat64() }, c.w...)}}
			if c.bias {
				m := c.w[1]
				for _, a := range c.attrs {
					if a.GetName() == "group" {
						m *= a.GetI()
					}
				}
				n.in = append(n.in, "b")
				n.inits = append(n.inits, floatInit("b", floatElems[0], func(int) float64 { return r.NormFloat64() }, m))
			}
			what := fmt.Sprint("ConvTranspose opset ", v, " case ", i, " x ", c.x, " w ", c.w)
			likeORT(t, what, n, valuesOf(r, floatElems[0], false, c.x...))
			likeORT(t, what+" edges", n, withEdges(r, c.x...))
		}
	}
}

// InstanceNormalization (FLOAT, as ONNX Runtime has it) gives ONNX
// Runtime's outputs over 1, 2 and 3 spatial dimensions, its default
// epsilon and others, a channel of one value (its variance 0), and NaN
// and infinities in some channels (all NaN there, as in ONNX Runtime), at
// opsets 11 to 17: the pure-Go engine refused every model with one
// ("unsupported operator InstanceNormalization").
func TestInstanceNormalizationMatchesONNXRuntime(t *testing.T) {
	requireORT(t)
	r := rand.New(rand.NewSource(51))
	f32 := []gonnxproto.TensorProto_DataType{gonnxproto.TensorProto_FLOAT}
	eps := func(v float32) []*gonnxproto.AttributeProto {
		return []*gonnxproto.AttributeProto{{Name: "epsilon", Type: gonnxproto.AttributeProto_FLOAT, F: v}}
	}
	for v := int64(MinOpset); v <= MaxOpset; v++ {
		for _, s := range [][]int64{{2, 3, 7}, {1, 4, 5, 6}, {2, 3, 1, 1}, {2, 2, 3, 4, 5}, {3, 1, 2}} {
			c := s[1]
			inits := []*gonnxproto.TensorProto{
				floatInit("scale", floatElems[0], func(int) float64 { return r.NormFloat64() }, c),
				floatInit("b", floatElems[0], func(int) float64 { return r.NormFloat64() }, c),
			}
			for _, attrs := range [][]*gonnxproto.AttributeProto{nil, eps(0.1), eps(1e-3)} {
				n := node{op: "InstanceNormalization", opset: v, attrs: attrs, in: []string{"x", "scale", "b"}, inTypes: f32, inits: inits, out: f32}
				what := fmt.Sprint("InstanceNormalization opset ", v, " ", s, " ", attrs)
				x := floatTensor(modelstore.Float, func(int) float64 { return 2 + 3*r.NormFloat64() }, s...)
				likeORT(t, what, n, x)
				// The first plane of one value; a NaN, an infinity and a
				// -infinity in others.
				inner, planes := int(modelstore.ShapeLen(s[2:])), int(s[0]*s[1])
				likeORT(t, what+" edges", n, floatTensor(modelstore.Float, func(i int) float64 {
					switch p, j := i/inner, i%inner; {
					case p == 0:
						return 0.75
					case p == 1 && j == 0:
						return math.NaN()
					case p == 2 && j == inner-1:
						return math.Inf(1)
					case p == planes-1 && j == 0:
						return math.Inf(-1)
					}
					return 2 + 3*r.NormFloat64()
				}, s...))
			}
		}
	}
}

// CumSum of each type ONNX Runtime has it for (FLOAT, DOUBLE, INT32,
// INT64) gives its outputs byte for byte over each axis, negative ones
// too, exclusive and reverse, the axis an INT32 or INT64 scalar or
// one-element initializer or fed at the run, NaN, infinities, -0 and
// numbers of far apart magnitudes among the floats (summed in the same
// order), integer sums that wrap around, ranks 1 to 4, at opsets 11 to
// 17: the pure-Go engine refused every model with one ("unsupported
// operator CumSum").
func TestCumSumMatchesONNXRuntime(t *testing.T) {
	requireORT(t)
	r := rand.New(rand.NewSource(52))
	const i32, i64 = gonnxproto.TensorProto_INT32, gonnxproto.TensorProto_INT64
	values := func(ty elemType, shape ...int64) *modelstore.Tensor {
		if ty.dt == modelstore.Float || ty.dt == modelstore.Double {
			last := int(modelstore.ShapeLen(shape)) - 1
			return floatTensor(ty.dt, func(i int) float64 {
				if i == 0 || i == last { // a sum that starts at -0 stays -0
					return math.Copysign(0, -1)
				}
				return edgeValue(r)
			}, shape...)
		}
		return randomOf(r, ty.dt, shape...) // the whole range: sums wrap around
	}
	axisInit := func(ty gonnxproto.TensorProto_DataType, v int64, dims ...int64) *gonnxproto.TensorProto {
		tp := &gonnxproto.TensorProto{Name: "axis", DataType: int32(ty), Dims: dims}
		if ty == i32 {
			tp.Int32Data = []int32{int32(v)}
		} else {
			tp.Int64Data = []int64{v}
		}
		return tp
	}
	for _, ty := range []elemType{floatElems[0], floatElems[1], numericElems[4], numericElems[5]} {
		for v := int64(MinOpset); v <= MaxOpset; v++ {
			t.Run(fmt.Sprint(ty.dt, " opset ", v), func(t *testing.T) { // closes its sessions
				for k, axis := range []int64{0, 1, 2, -1, -3} {
					for _, flags := range [][2]int64{{-1, -1}, {0, 0}, {1, 0}, {0, 1}, {1, 1}} { // -1: no attribute
						var attrs []*gonnxproto.AttributeProto
						if flags[0] >= 0 {
							attrs = []*gonnxproto.AttributeProto{intAttr("exclusive", flags[0]), intAttr("reverse", flags[1])}
						}
						axisType := []gonnxproto.TensorProto_DataType{i64, i32}[k%2]
						var axisDims []int64 // a scalar, or of one element
						if k%3 == 1 {
							axisDims = []int64{1}
						}
						n := node{op: "CumSum", opset: v, attrs: attrs, in: []string{"x", "axis"}, inTypes: []gonnxproto.TensorProto_DataType{ty.elem},
							inits: []*gonnxproto.TensorProto{axisInit(axisType, axis, axisDims...)}, out: []gonnxproto.TensorProto_DataType{ty.elem}}
						ort, gos := compileBoth(t, n.model(t))
						sameAsORT(t, ort, gos, fmt.Sprint("axis ", axis, " ", axisType, " ", axisDims, " exclusive, reverse ", flags), values(ty, 3, 4, 5))
					}
				}
				// Ranks 1, 2 and 4, the axis fed at the run.
				n := node{op: "CumSum", opset: v, attrs: []*gonnxproto.AttributeProto{intAttr("reverse", 1)}, in: []string{"x", "axis"},
					inTypes: []gonnxproto.TensorProto_DataType{ty.elem, i32}, out: []gonnxproto.TensorProto_DataType{ty.elem}}
				ort, gos := compileBoth(t, n.model(t))
				for _, s := range [][]int64{{9}, {4, 6}, {2, 3, 2, 4}} {
					axis := &modelstore.Tensor{DType: modelstore.Int32, Shape: []int64{}, Data: []byte{byte(len(s) - 1), 0, 0, 0}}
					sameAsORT(t, ort, gos, fmt.Sprint(s, " axis fed"), values(ty, s...), axis)
				}
			})
		}
	}
}
