//go:build cgo && !noort

package goengine

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand"
	"testing"

	gonnxproto "github.com/advancedclimatesystems/gonnx/onnx"

	"github.com/enclaveai/enclaveai/modelstore"
)

// edgeValue is a normal float, or one of the values element-wise
// operators get wrong: NaN, the infinities, signed zeros, halves (which
// Round takes to even), and numbers large enough to overflow an
// exponential.
func edgeValue(r *rand.Rand) float64 {
	edges := []float64{math.NaN(), math.Inf(1), math.Inf(-1), 0, math.Copysign(0, -1), 0.5, -0.5, 1.5, 2.5, -2.5,
		100, -100, 1e-30, 3, -3, 1e6, -1e6}
	if r.Intn(2) == 0 {
		return edges[r.Intn(len(edges))]
	}
	return r.NormFloat64() * 4
}

// Floor, Ceil, Round and Reciprocal (FLOAT, DOUBLE), Softplus, Elu,
// HardSigmoid and HardSwish (FLOAT) give ONNX Runtime's outputs at every
// rank and at opsets 11 to 17 (HardSwish from 14, where it is new), with
// their default attributes and others, NaN, infinities, zeros and halves
// among the inputs: the pure-Go engine refused every model with one.
func TestActivationsMatchONNXRuntime(t *testing.T) {
	requireORT(t)
	r := rand.New(rand.NewSource(40))
	f := func(name string, v float32) *gonnxproto.AttributeProto {
		return &gonnxproto.AttributeProto{Name: name, Type: gonnxproto.AttributeProto_FLOAT, F: v}
	}
	for _, c := range []struct {
		op    string
		types []elemType
		attrs [][]*gonnxproto.AttributeProto
	}{
		{"Floor", floatElems, nil},
		{"Ceil", floatElems, nil},
		{"Round", floatElems, nil},
		{"Reciprocal", floatElems, nil},
		{"Softplus", floatElems[:1], nil},
		{"Elu", floatElems[:1], [][]*gonnxproto.AttributeProto{{f("alpha", 0.3)}}},
		{"HardSigmoid", floatElems[:1], [][]*gonnxproto.AttributeProto{{f("alpha", 1.0/6)}, {f("alpha", 0.3), f("beta", 0.1)}}},
		{"HardSwish", floatElems[:1], nil},
	} {
		for _, ty := range c.types {
			for v := int64(MinOpset); v <= MaxOpset; v++ {
				if c.op == "HardSwish" && v < 14 {
					continue
				}
				for _, attrs := range append([][]*gonnxproto.AttributeProto{nil}, c.attrs...) {
					for _, s := range shapes {
						n := node{op: c.op, opset: v, attrs: attrs, in: []string{"x"}, inTypes: []gonnxproto.TensorProto_DataType{ty.elem}, out: []gonnxproto.TensorProto_DataType{ty.elem}}
						likeORT(t, fmt.Sprint(c.op, " ", ty.dt, " opset ", v, " ", s, attrs), n, floatTensor(ty.dt, func(int) float64 { return edgeValue(r) }, s...))
					}
				}
			}
		}
	}
}

// Sign of every type ONNX Runtime has it for gives its outputs byte for
// byte (a NaN's sign is 0 there), at opsets 11 to 17.
func TestSignMatchesONNXRuntime(t *testing.T) {
	requireORT(t)
	r := rand.New(rand.NewSource(41))
	for _, ty := range numericElems {
		for v := int64(MinOpset); v <= MaxOpset; v++ {
			x := randomOf(r, ty.dt, 4, 16)
			if ty.dt == modelstore.Float || ty.dt == modelstore.Double {
				x = floatTensor(ty.dt, func(int) float64 { return edgeValue(r) }, 4, 16)
			}
			clear(x.Data[:ty.dt.Size()]) // a 0
			n := node{op: "Sign", opset: v, in: []string{"x"}, inTypes: []gonnxproto.TensorProto_DataType{ty.elem}, out: []gonnxproto.TensorProto_DataType{ty.elem}}
			likeORT(t, fmt.Sprint("Sign ", ty.dt, " opset ", v), n, x)
		}
	}
}

// LogSoftmax (FLOAT, DOUBLE) gives ONNX Runtime's outputs over each axis,
// at opsets 11 and 12 (over the dimensions from axis on as a matrix,
// rewritten) to 17, infinities and NaN among FLOAT inputs too (a row
// with one is all NaN, as ONNX Runtime's; its DOUBLE kernel, Eigen's,
// gives numbers above 0 for such rows, which this does not copy).
func TestLogSoftmaxMatchesONNXRuntime(t *testing.T) {
	requireORT(t)
	r := rand.New(rand.NewSource(42))
	for _, ty := range floatElems {
		for v := int64(MinOpset); v <= MaxOpset; v++ {
			for _, axis := range []int64{-1, 0, 1, 2, -2} {
				for _, edges := range []bool{false, ty.dt == modelstore.Float} {
					n := node{op: "LogSoftmax", opset: v, attrs: []*gonnxproto.AttributeProto{intAttr("axis", axis)}, in: []string{"x"},
						inTypes: []gonnxproto.TensorProto_DataType{ty.elem}, out: []gonnxproto.TensorProto_DataType{ty.elem}}
					x := floatTensor(ty.dt, func(int) float64 {
						if edges && r.Intn(6) == 0 {
							return edgeValue(r)
						}
						return r.NormFloat64() * 5
					}, 2, 3, 4)
					likeORT(t, fmt.Sprint("LogSoftmax ", ty.dt, " opset ", v, " axis ", axis, " edges ", edges), n, x)
				}
			}
			n := node{op: "LogSoftmax", opset: v, in: []string{"x"}, inTypes: []gonnxproto.TensorProto_DataType{ty.elem}, out: []gonnxproto.TensorProto_DataType{ty.elem}}
			likeORT(t, fmt.Sprint("LogSoftmax ", ty.dt, " opset ", v, " default axis"), n, valuesOf(r, ty, false, 3, 10))
		}
	}
}

// ArgMax and ArgMin of each type ONNX Runtime has them for give its
// indices over each axis, keepdims 0 and 1, select_last_index from opset
// 12, ties (integers of a few values) and NaN among the floats, at opsets
// 11 to 17.
func TestArgMaxMinMatchONNXRuntime(t *testing.T) {
	requireORT(t)
	r := rand.New(rand.NewSource(43))
	for _, op := range []string{"ArgMax", "ArgMin"} {
		for _, ty := range numericElems {
			switch ty.dt {
			case modelstore.Int16, modelstore.Uint16, modelstore.Uint32, modelstore.Uint64:
				continue
			}
			for v := int64(MinOpset); v <= MaxOpset; v++ {
				for _, axis := range []int64{0, 1, 2, -1} {
					for _, keep := range []int64{0, 1} {
						for _, last := range []int64{-1, 0, 1} { // -1: no attribute
							if last >= 0 && v < 12 {
								continue
							}
							attrs := []*gonnxproto.AttributeProto{intAttr("axis", axis), intAttr("keepdims", keep)}
							if last >= 0 {
								attrs = append(attrs, intAttr("select_last_index", last))
							}
							var x *modelstore.Tensor
							if ty.dt == modelstore.Float || ty.dt == modelstore.Double {
								x = floatTensor(ty.dt, func(int) float64 {
									if r.Intn(5) == 0 {
										return edgeValue(r)
									}
									return float64(r.Intn(3))
								}, 3, 4, 5)
							} else {
								x = randomOf(r, ty.dt, 3, 4, 5)
								for i := range x.Data {
									if i%ty.dt.Size() == 0 {
										x.Data[i] %= 3 // ties
									} else {
										x.Data[i] = 0
									}
								}
							}
							n := node{op: op, opset: v, attrs: attrs, in: []string{"x"}, inTypes: []gonnxproto.TensorProto_DataType{ty.elem},
								out: []gonnxproto.TensorProto_DataType{gonnxproto.TensorProto_INT64}}
							likeORT(t, fmt.Sprint(op, " ", ty.dt, " opset ", v, " axis ", axis, " keepdims ", keep, " select_last_index ", last), n, x)
						}
					}
				}
			}
		}
	}
}

// AveragePool (FLOAT) gives ONNX Runtime's outputs over kernels, strides,
// pads, ceil_mode and count_include_pad together, auto_pad VALID too, at
// opsets 11 to 17; windows that reach into the padding, and past it with
// ceil_mode, divided as ONNX Runtime divides them.
func TestAveragePoolMatchesONNXRuntime(t *testing.T) {
	requireORT(t)
	r := rand.New(rand.NewSource(44))
	f32 := []gonnxproto.TensorProto_DataType{gonnxproto.TensorProto_FLOAT}
	cases := [][]*gonnxproto.AttributeProto{
		{ints("kernel_shape", 2, 2)},
		{ints("kernel_shape", 3, 3), ints("strides", 2, 2)},
		{ints("kernel_shape", 3, 2), ints("strides", 1, 2), ints("pads", 1, 0, 1, 1)},
		{ints("kernel_shape", 3, 3), ints("strides", 2, 2), ints("pads", 1, 1, 1, 1), intAttr("count_include_pad", 1)},
		{ints("kernel_shape", 3, 3), ints("strides", 2, 2), ints("pads", 1, 1, 1, 1), intAttr("count_include_pad", 0)},
		{ints("kernel_shape", 2, 2), ints("strides", 2, 2), intAttr("ceil_mode", 1)},
		{ints("kernel_shape", 3, 3), ints("strides", 2, 2), intAttr("ceil_mode", 1), intAttr("count_include_pad", 1)},
		{ints("kernel_shape", 3, 3), ints("strides", 2, 2), ints("pads", 1, 1, 1, 1), intAttr("ceil_mode", 1), intAttr("count_include_pad", 1)},
		{ints("kernel_shape", 3, 3), ints("strides", 2, 2), ints("pads", 0, 0, 2, 2), intAttr("ceil_mode", 1)},
		{ints("kernel_shape", 2, 3), ints("strides", 3, 2), ints("pads", 1, 2, 0, 1), intAttr("ceil_mode", 1), intAttr("count_include_pad", 1)},
		{ints("kernel_shape", 2, 2), {Name: "auto_pad", Type: gonnxproto.AttributeProto_STRING, S: []byte("VALID")}},
		{ints("kernel_shape", 7, 7)},
	}
	for v := int64(MinOpset); v <= MaxOpset; v++ {
		for i, attrs := range cases {
			for _, s := range [][]int64{{1, 1, 7, 7}, {2, 3, 8, 9}, {1, 2, 10, 7}} {
				n := node{op: "AveragePool", opset: v, attrs: attrs, in: []string{"x"}, inTypes: f32, out: f32}
				likeORT(t, fmt.Sprint("AveragePool opset ", v, " case ", i, " ", s), n, valuesOf(r, floatElems[0], false, s...))
			}
		}
	}
}

// Pad of each type ONNX Runtime has it for gives its outputs byte for
// byte in each mode, with pads that widen, crop (negative) or leave an
// axis, a constant_value given or not, at opsets 11 (BOOL from 13, as
// ONNX Runtime has it) to 18; at 18 with its input axes too (INT64 and
// INT32, negative, in any order, a repeated one taking its last pads, as
// ONNX Runtime's), constant or fed at the run.
func TestPadMatchesONNXRuntime(t *testing.T) {
	requireORT(t)
	r := rand.New(rand.NewSource(45))
	types := append([]elemType{}, numericElems...)
	types = append(types, elemType{gonnxproto.TensorProto_BOOL, modelstore.Bool})
	for _, ty := range types {
		if ty.dt == modelstore.Int16 || ty.dt == modelstore.Uint16 {
			continue
		}
		for _, v := range []int64{11, 12, 13, 17, 18} {
			if ty.dt == modelstore.Bool && v < 13 {
				continue
			}
			for _, mode := range []string{"", "constant", "reflect", "edge"} {
				for _, pads := range [][]int64{{0, 1, 2, 0, 2, 1}, {1, 0, 0, 1, 0, 0}, {0, 2, 2, 0, 2, 2}, {0, -1, 1, 0, 1, -2}, {1, 1, 1, 1, 1, 1}} {
					for _, withValue := range []bool{false, true} {
						if withValue && mode != "" && mode != "constant" {
							continue
						}
						n := node{op: "Pad", opset: v, in: []string{"x", "pads"}, inTypes: []gonnxproto.TensorProto_DataType{ty.elem},
							inits: []*gonnxproto.TensorProto{{Name: "pads", DataType: int32(gonnxproto.TensorProto_INT64), Dims: []int64{6}, Int64Data: pads}},
							out:   []gonnxproto.TensorProto_DataType{ty.elem}}
						if mode != "" {
							n.attrs = []*gonnxproto.AttributeProto{{Name: "mode", Type: gonnxproto.AttributeProto_STRING, S: []byte(mode)}}
						}
						feeds := []*modelstore.Tensor{valuesOf(r, ty, true, 2, 3, 4)}
						if ty.dt == modelstore.Bool {
							feeds[0] = randomOf(r, ty.dt, 2, 3, 4)
							for i := range feeds[0].Data {
								feeds[0].Data[i] &= 1
							}
						}
						if withValue {
							n.in = append(n.in, "c")
							n.inTypes = append(n.inTypes, ty.elem)
							c := valuesOf(r, ty, false, 1)
							if ty.dt == modelstore.Bool {
								c = &modelstore.Tensor{DType: modelstore.Bool, Shape: []int64{1}, Data: []byte{1}}
							}
							c.Shape = []int64{}
							feeds = append(feeds, c)
						}
						likeORT(t, fmt.Sprint("Pad ", ty.dt, " opset ", v, " mode ", mode, " pads ", pads, " value ", withValue), n, feeds...)
					}
				}
			}
		}
		x := valuesOf(r, ty, true, 2, 3, 4)
		if ty.dt == modelstore.Bool {
			x = &modelstore.Tensor{DType: modelstore.Bool, Shape: []int64{2, 3, 4}, Data: make([]byte, 24)}
			for i := range x.Data {
				x.Data[i] = byte(r.Intn(2))
			}
		}
		for _, mode := range []string{"constant", "reflect", "edge"} {
			for _, c := range []struct {
				axes, pads []int64
				i32, fed   bool // axes INT32; pads and axes graph inputs
			}{
				{[]int64{1}, []int64{1, 2}, false, false},
				{[]int64{-1, 0}, []int64{2, 0, 1, 1}, true, false},
				{[]int64{2, 2}, []int64{1, 3, 0, 1}, false, false},
				{[]int64{0, 2, 1}, []int64{1, -1, 0, 0, 2, 1}, true, false},
				{[]int64{-2}, []int64{1, -1}, false, true},
				{[]int64{2, 0}, []int64{3, 0, 1, 1}, true, true},
			} {
				axesType, axes := gonnxproto.TensorProto_INT64, int64s(c.axes...)
				if c.i32 {
					axesType, axes = gonnxproto.TensorProto_INT32, &modelstore.Tensor{DType: modelstore.Int32, Shape: []int64{int64(len(c.axes))}}
					for _, a := range c.axes {
						axes.Data = binary.LittleEndian.AppendUint32(axes.Data, uint32(int32(a)))
					}
				}
				n := node{op: "Pad", opset: 18, in: []string{"x", "pads", "", "axes"}, inTypes: []gonnxproto.TensorProto_DataType{ty.elem},
					attrs: []*gonnxproto.AttributeProto{{Name: "mode", Type: gonnxproto.AttributeProto_STRING, S: []byte(mode)}},
					out:   []gonnxproto.TensorProto_DataType{ty.elem}}
				feeds := []*modelstore.Tensor{x}
				if c.fed {
					n.inTypes = append(n.inTypes, gonnxproto.TensorProto_INT64, axesType)
					feeds = append(feeds, int64s(c.pads...), axes)
				} else {
					n.inits = []*gonnxproto.TensorProto{{Name: "pads", DataType: int32(gonnxproto.TensorProto_INT64), Dims: []int64{int64(len(c.pads))}, Int64Data: c.pads},
						{Name: "axes", DataType: int32(axesType), Dims: axes.Shape, RawData: axes.Data}}
				}
				likeORT(t, fmt.Sprint("Pad ", ty.dt, " opset 18 mode ", mode, " ", c), n, feeds...)
			}
		}
	}
}

// Slice gives ONNX Runtime's outputs byte for byte with negative steps
// (gonnx's failed every one: "Invalid slice index"), starts and ends past
// their axis at either end (PyTorch's -2^63+1 and 2^63-1), negative ones,
// axes left out, negative or in another order, steps left out, INT32
// indices, over several types, at opsets 11, 13 and 17.
func TestSliceMatchesONNXRuntime(t *testing.T) {
	requireORT(t)
	r := rand.New(rand.NewSource(46))
	const big = math.MaxInt64
	for _, ty := range []elemType{floatElems[0], floatElems[1], numericElems[2], numericElems[5], numericElems[6], {gonnxproto.TensorProto_BOOL, modelstore.Bool}} {
		for _, v := range []int64{11, 13, 17} {
			for _, c := range []struct{ starts, ends, axes, steps []int64 }{
				{[]int64{-1}, []int64{-big}, []int64{0}, []int64{-1}},
				{[]int64{-1, 0}, []int64{-big, big}, []int64{1, 2}, []int64{-1, 2}},
				{[]int64{3, 5}, []int64{0, -7}, []int64{-1, -2}, []int64{-2, -1}},
				{[]int64{0, 1, 1}, []int64{big, -1, 100}, nil, nil},
				{[]int64{1}, []int64{big}, []int64{2}, nil},
				{[]int64{-100}, []int64{100}, []int64{1}, []int64{3}},
				{[]int64{100}, []int64{-100}, []int64{1}, []int64{-3}},
				{[]int64{2, 0}, []int64{-big, 2}, []int64{2, 0}, []int64{-big, big}},
			} {
				for _, idx := range []gonnxproto.TensorProto_DataType{gonnxproto.TensorProto_INT64, gonnxproto.TensorProto_INT32} {
					list := func(name string, vals []int64) *gonnxproto.TensorProto {
						tp := &gonnxproto.TensorProto{Name: name, DataType: int32(idx), Dims: []int64{int64(len(vals))}}
						for _, e := range vals {
							if idx == gonnxproto.TensorProto_INT32 {
								tp.Int32Data = append(tp.Int32Data, int32(max(min(e, math.MaxInt32), math.MinInt32)))
							} else {
								tp.Int64Data = append(tp.Int64Data, e)
							}
						}
						return tp
					}
					n := node{op: "Slice", opset: v, in: []string{"x", "s", "e"}, inTypes: []gonnxproto.TensorProto_DataType{ty.elem},
						inits: []*gonnxproto.TensorProto{list("s", c.starts), list("e", c.ends)}, out: []gonnxproto.TensorProto_DataType{ty.elem}}
					switch {
					case c.steps != nil && c.axes == nil:
						t.Fatal("steps without axes")
					case c.axes != nil:
						n.in = append(n.in, "a")
						n.inits = append(n.inits, list("a", c.axes))
						if c.steps != nil {
							n.in = append(n.in, "p")
							n.inits = append(n.inits, list("p", c.steps))
						}
					}
					x := randomOf(r, ty.dt, 4, 6, 8)
					if ty.dt == modelstore.Bool {
						for i := range x.Data {
							x.Data[i] &= 1
						}
					}
					likeORT(t, fmt.Sprint("Slice ", ty.dt, " opset ", v, " ", c, " ", idx), n, x)
				}
			}
		}
	}
}
