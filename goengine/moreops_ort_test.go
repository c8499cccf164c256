//go:build cgo && !noort

package goengine

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand"
	"testing"

	gonnxproto "github.com/advancedclimatesystems/gonnx/onnx"

	"github.com/enclaveai/enclaveai/modelstore"
)

// likeORT runs n on both engines with in and fails t unless every output
// has ONNX Runtime's type and shape, and its values: floats within rtol
// 1e-3 and atol 1e-4 (NaN where ONNX Runtime has NaN), others the same
// bytes.
func likeORT(t *testing.T, what string, n node, in ...*modelstore.Tensor) {
	t.Helper()
	src := modelstore.ModelSource{Data: n.model(t)}
	ort, err := modelstore.InProcess{}.Compile(src, modelstore.SessionOptions{Optimize: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ort.Close()
	gos, err := Engine{}.Compile(src, modelstore.SessionOptions{})
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	defer gos.Close()
	want, got := runBoth(t, ort, gos, what, in)
	if len(got) != len(want) {
		t.Fatalf("%s: %d outputs, ORT %d", what, len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if g == nil || g.DType != w.DType || !equalShape(g.Shape, w.Shape) {
			t.Fatalf("%s output %d: %v, ORT %s %v", what, i, g, w.DType, w.Shape)
		}
		switch w.DType {
		case modelstore.Float, modelstore.Double:
			for k := range len(w.Data) / w.DType.Size() {
				a, b := floatAt(g, k), floatAt(w, k)
				if bothNaN := math.IsNaN(a) && math.IsNaN(b); !bothNaN && a != b && !(math.Abs(a-b) <= 1e-4+1e-3*math.Abs(b)) {
					t.Fatalf("%s output %d[%d]: %g, ORT %g", what, i, k, a, b)
				}
			}
		default:
			if !bytes.Equal(g.Data, w.Data) {
				t.Fatalf("%s output %d: %x, ORT %x", what, i, g.Data, w.Data)
			}
		}
	}
}

// floatAt is element k of a FLOAT or DOUBLE tensor.
func floatAt(t *modelstore.Tensor, k int) float64 {
	if t.DType == modelstore.Float {
		return float64(math.Float32frombits(binary.LittleEndian.Uint32(t.Data[4*k:])))
	}
	return math.Float64frombits(binary.LittleEndian.Uint64(t.Data[8*k:]))
}

// floatTensor is a FLOAT or DOUBLE tensor of shape whose elements are
// f(i).
func floatTensor(dt modelstore.DType, f func(i int) float64, shape ...int64) *modelstore.Tensor {
	t := &modelstore.Tensor{DType: dt, Shape: shape}
	for i := range int(modelstore.ShapeLen(shape)) {
		if dt == modelstore.Float {
			t.Data = binary.LittleEndian.AppendUint32(t.Data, math.Float32bits(float32(f(i))))
		} else {
			t.Data = binary.LittleEndian.AppendUint64(t.Data, math.Float64bits(f(i)))
		}
	}
	return t
}

// floatElems are FLOAT and DOUBLE.
var floatElems = []elemType{{gonnxproto.TensorProto_FLOAT, modelstore.Float}, {gonnxproto.TensorProto_DOUBLE, modelstore.Double}}

// shapes are the ranks the element-wise tests run, 1 to 4 (the server's
// ONNX Runtime binding reads no scalar outputs).
var shapes = [][]int64{{1}, {7}, {3, 5}, {2, 3, 4}, {2, 3, 4, 5}}

// Erf (FLOAT), Exp and Log (FLOAT, DOUBLE) give ONNX Runtime's outputs
// at every rank and at opsets 11 to 17, Log of 0 and of negative numbers
// (-inf, NaN) and Exp past FLOAT's range too; the pure-Go engine refused
// every model with one ("unsupported operator Erf"), so every BERT
// exported from PyTorch (its GELU).
func TestErfExpLogMatchONNXRuntime(t *testing.T) {
	requireORT(t)
	r := rand.New(rand.NewSource(20))
	for _, c := range []struct {
		op    string
		types []elemType
		value func() float64
	}{
		{"Erf", floatElems[:1], func() float64 { return r.NormFloat64() * 2 }},
		{"Exp", floatElems, func() float64 { return []float64{r.NormFloat64() * 5, 100, -200, 0}[r.Intn(4)] }},
		{"Log", floatElems, func() float64 { return []float64{r.ExpFloat64() * 10, 1e-30, 0, -1}[r.Intn(4)] }},
	} {
		for _, ty := range c.types {
			for v := int64(MinOpset); v <= MaxOpset; v++ {
				for _, s := range shapes {
					n := node{op: c.op, opset: v, in: []string{"x"}, inTypes: []gonnxproto.TensorProto_DataType{ty.elem}, out: []gonnxproto.TensorProto_DataType{ty.elem}}
					likeORT(t, fmt.Sprint(c.op, " ", ty.dt, " opset ", v, " ", s), n, floatTensor(ty.dt, func(int) float64 { return c.value() }, s...))
				}
			}
		}
	}
}

// scalarInit is an initializer of one element: FLOAT, DOUBLE, INT64 or
// BOOL v.
func scalarInit(name string, ty gonnxproto.TensorProto_DataType, v float64, dims ...int64) *gonnxproto.TensorProto {
	t := &gonnxproto.TensorProto{Name: name, DataType: int32(ty), Dims: dims}
	switch ty {
	case gonnxproto.TensorProto_FLOAT:
		t.FloatData = []float32{float32(v)}
	case gonnxproto.TensorProto_DOUBLE:
		t.DoubleData = []float64{v}
	case gonnxproto.TensorProto_BOOL:
		t.Int32Data = []int32{int32(v)}
	default:
		t.Int64Data = []int64{int64(v)}
	}
	return t
}

// floatInit is a FLOAT or DOUBLE initializer of shape, its elements f(i).
func floatInit(name string, ty elemType, f func(i int) float64, shape ...int64) *gonnxproto.TensorProto {
	t := &gonnxproto.TensorProto{Name: name, DataType: int32(ty.elem), Dims: shape}
	t.RawData = floatTensor(ty.dt, f, shape...).Data
	return t
}

// Dropout is the identity at opsets 11 to 17, its mask all true (all
// false before opset 12, as in ONNX Runtime): its ratio an attribute
// before 12, an input after (with training_mode
// false, a constant or fed), FLOAT and DOUBLE, ranks 1 to 4; the pure-Go
// engine refused every model with one ("unsupported operator Dropout").
func TestDropoutMatchesONNXRuntime(t *testing.T) {
	requireORT(t)
	r := rand.New(rand.NewSource(21))
	const boolT = gonnxproto.TensorProto_BOOL
	for _, ty := range floatElems {
		for v := int64(MinOpset); v <= MaxOpset; v++ {
			for _, s := range shapes {
				x := floatTensor(ty.dt, func(int) float64 { return r.NormFloat64() }, s...)
				what := fmt.Sprint("Dropout ", ty.dt, " opset ", v, " ", s)
				types := []gonnxproto.TensorProto_DataType{ty.elem}
				plain := node{op: "Dropout", opset: v, in: []string{"x"}, inTypes: types, out: types}
				likeORT(t, what, plain, x)
				masked := plain
				masked.out = []gonnxproto.TensorProto_DataType{ty.elem, boolT}
				if v < 12 {
					masked.attrs = []*gonnxproto.AttributeProto{{Name: "ratio", Type: gonnxproto.AttributeProto_FLOAT, F: 0.3}}
					likeORT(t, what+" ratio 0.3, mask", masked, x) // all false, as ONNX Runtime's
					continue
				}
				likeORT(t, what+" mask", masked, x)
				masked.in = []string{"x", "ratio", "training"}
				masked.inits = []*gonnxproto.TensorProto{scalarInit("ratio", ty.elem, 0.25), scalarInit("training", boolT, 0)}
				likeORT(t, what+" ratio 0.25, training_mode false", masked, x)
				fed := masked
				fed.inits = fed.inits[:1]
				fed.inTypes = []gonnxproto.TensorProto_DataType{ty.elem, boolT}
				likeORT(t, what+" training_mode fed false", fed, x, &modelstore.Tensor{DType: modelstore.Bool, Shape: []int64{1}, Data: []byte{0}})
			}
		}
	}
}

// GlobalAveragePool (FLOAT) gives ONNX Runtime's means over 1 to 3
// spatial dimensions, at opsets 11 to 17.
func TestGlobalAveragePoolMatchesONNXRuntime(t *testing.T) {
	requireORT(t)
	r := rand.New(rand.NewSource(22))
	types := []gonnxproto.TensorProto_DataType{gonnxproto.TensorProto_FLOAT}
	for v := int64(MinOpset); v <= MaxOpset; v++ {
		for _, s := range [][]int64{{2, 3, 7}, {1, 4, 5, 6}, {2, 3, 1, 1}, {2, 2, 3, 4, 5}} {
			x := floatTensor(modelstore.Float, func(int) float64 { return 3 + r.NormFloat64() }, s...)
			likeORT(t, fmt.Sprint("GlobalAveragePool opset ", v, " ", s), node{op: "GlobalAveragePool", opset: v, in: []string{"x"}, inTypes: types, out: types}, x)
		}
	}
}

// BatchNormalization at inference gives ONNX Runtime's outputs, FLOAT and
// DOUBLE, ranks 2 to 5, with another epsilon and training_mode 0, at
// opsets 11 to 17 (versions 9, 14 and 15).
func TestBatchNormalizationMatchesONNXRuntime(t *testing.T) {
	requireORT(t)
	r := rand.New(rand.NewSource(23))
	for _, ty := range floatElems {
		for v := int64(MinOpset); v <= MaxOpset; v++ {
			for _, s := range [][]int64{{4, 3}, {2, 3, 7}, {2, 3, 5, 6}, {1, 3, 2, 3, 4}} {
				c := s[1]
				inits := []*gonnxproto.TensorProto{
					floatInit("scale", ty, func(int) float64 { return r.NormFloat64() }, c),
					floatInit("b", ty, func(int) float64 { return r.NormFloat64() }, c),
					floatInit("mean", ty, func(int) float64 { return r.NormFloat64() }, c),
					floatInit("var", ty, func(int) float64 { return r.ExpFloat64() }, c),
				}
				for _, attrs := range [][]*gonnxproto.AttributeProto{nil, {{Name: "epsilon", Type: gonnxproto.AttributeProto_FLOAT, F: 0.1},
					{Name: "momentum", Type: gonnxproto.AttributeProto_FLOAT, F: 0.8}}} {
					if v >= 14 && attrs != nil {
						attrs = append(attrs, intAttr("training_mode", 0))
					}
					n := node{op: "BatchNormalization", opset: v, attrs: attrs, in: []string{"x", "scale", "b", "mean", "var"},
						inTypes: []gonnxproto.TensorProto_DataType{ty.elem}, inits: inits, out: []gonnxproto.TensorProto_DataType{ty.elem}}
					x := floatTensor(ty.dt, func(int) float64 { return 2 + 3*r.NormFloat64() }, s...)
					likeORT(t, fmt.Sprint("BatchNormalization ", ty.dt, " opset ", v, " ", s, " ", len(attrs)), n, x)
				}
			}
		}
	}
}

// numericElems are the types Clip takes in both engines.
var numericElems = []elemType{
	{gonnxproto.TensorProto_FLOAT, modelstore.Float}, {gonnxproto.TensorProto_DOUBLE, modelstore.Double},
	{gonnxproto.TensorProto_INT8, modelstore.Int8}, {gonnxproto.TensorProto_INT16, modelstore.Int16},
	{gonnxproto.TensorProto_INT32, modelstore.Int32}, {gonnxproto.TensorProto_INT64, modelstore.Int64},
	{gonnxproto.TensorProto_UINT8, modelstore.Uint8}, {gonnxproto.TensorProto_UINT16, modelstore.Uint16},
	{gonnxproto.TensorProto_UINT32, modelstore.Uint32}, {gonnxproto.TensorProto_UINT64, modelstore.Uint64},
}

// valuesOf is a tensor of ty: normal floats (NaN among them where nan),
// or integers of random bytes.
func valuesOf(r *rand.Rand, ty elemType, nan bool, shape ...int64) *modelstore.Tensor {
	if ty.dt != modelstore.Float && ty.dt != modelstore.Double {
		return randomOf(r, ty.dt, shape...)
	}
	return floatTensor(ty.dt, func(int) float64 {
		if nan && r.Intn(8) == 0 {
			return math.NaN()
		}
		return r.NormFloat64() * 4
	}, shape...)
}

// LeakyRelu gives ONNX Runtime's outputs, its default alpha and another,
// FLOAT at opsets 11 to 17 and DOUBLE from 16 (ONNX Runtime's).
func TestLeakyReluMatchesONNXRuntime(t *testing.T) {
	requireORT(t)
	r := rand.New(rand.NewSource(24))
	for _, ty := range floatElems {
		for v := int64(MinOpset); v <= MaxOpset; v++ {
			if ty.dt == modelstore.Double && v < 16 {
				continue
			}
			for _, attrs := range [][]*gonnxproto.AttributeProto{nil, {{Name: "alpha", Type: gonnxproto.AttributeProto_FLOAT, F: 0.2}}} {
				for _, s := range shapes {
					n := node{op: "LeakyRelu", opset: v, attrs: attrs, in: []string{"x"}, inTypes: []gonnxproto.TensorProto_DataType{ty.elem}, out: []gonnxproto.TensorProto_DataType{ty.elem}}
					likeORT(t, fmt.Sprint("LeakyRelu ", ty.dt, " opset ", v, " ", s, attrs), n, valuesOf(r, ty, false, s...))
				}
			}
		}
	}
}

// Clip of each type gives ONNX Runtime's outputs, bit for bit, with min
// and max, either, neither, and min past max, at opsets 11 (FLOAT, the
// one type ONNX Runtime has there), 12, 13 and 17 (INT16 and UINT16 from
// 13, and without bounds: ONNX Runtime fails those with bounds).
func TestClipMatchesONNXRuntime(t *testing.T) {
	requireORT(t)
	r := rand.New(rand.NewSource(25))
	for _, ty := range numericElems {
		for _, v := range []int64{11, 12, 13, 17} {
			if v == 11 && ty.dt != modelstore.Float || v == 12 && (ty.dt == modelstore.Int16 || ty.dt == modelstore.Uint16) {
				continue
			}
			for _, in := range [][]string{{"x", "lo", "hi"}, {"x", "lo"}, {"x", "", "hi"}, {"x"}, {"x", "hi", "lo"}} {
				if len(in) > 1 && (ty.dt == modelstore.Int16 || ty.dt == modelstore.Uint16) {
					continue // ONNX Runtime fails the model: "Could not find an implementation for Where(9)"
				}
				a, b := valuesOf(r, ty, false, 1), valuesOf(r, ty, false, 1)
				if bytes.Compare(a.Data, b.Data) > 0 && (ty.dt == modelstore.Uint8 || ty.dt == modelstore.Uint16 || ty.dt == modelstore.Uint32 || ty.dt == modelstore.Uint64) {
					a, b = b, a
				}
				// The bounds are fed: gonnx reads a UINT64 initializer's
				// raw data as nothing (its ReadUint64ArrayFromBytes).
				n := node{op: "Clip", opset: v, in: in, out: []gonnxproto.TensorProto_DataType{ty.elem}}
				feeds := []*modelstore.Tensor{valuesOf(r, ty, false, 3, 17)}
				for _, name := range in {
					switch name {
					case "lo":
						feeds = append(feeds, a)
					case "hi":
						feeds = append(feeds, b)
					}
					if name != "" {
						n.inTypes = append(n.inTypes, ty.elem)
					}
				}
				likeORT(t, fmt.Sprint("Clip ", ty.dt, " opset ", v, " ", in), n, feeds...)
			}
		}
	}
}

// Min and Max of each type ONNX Runtime has them for give its outputs, of
// one to three inputs broadcast together, NaNs among FLOATs and DOUBLEs,
// at opsets 12, 13 and 17 (FLOAT and DOUBLE at 11).
func TestMinMaxMatchONNXRuntime(t *testing.T) {
	requireORT(t)
	r := rand.New(rand.NewSource(26))
	for _, op := range []string{"Min", "Max"} {
		for _, ty := range numericElems {
			if ty.dt == modelstore.Int16 || ty.dt == modelstore.Uint16 {
				continue
			}
			for _, v := range []int64{11, 12, 13, 17} {
				if v == 11 && ty.dt != modelstore.Float && ty.dt != modelstore.Double {
					continue
				}
				for _, c := range [][][]int64{{{3, 4}}, {{3, 4}, {3, 4}}, {{2, 1, 4}, {3, 1}}, {{5}, {2, 3, 5}, {3, 1}}, {{1}, {4, 4}}} {
					var names []string
					var types []gonnxproto.TensorProto_DataType
					var feeds []*modelstore.Tensor
					for i, s := range c {
						names = append(names, fmt.Sprint("x", i))
						types = append(types, ty.elem)
						feeds = append(feeds, valuesOf(r, ty, true, s...))
					}
					n := node{op: op, opset: v, in: names, inTypes: types, out: []gonnxproto.TensorProto_DataType{ty.elem}}
					likeORT(t, fmt.Sprint(op, " ", ty.dt, " opset ", v, " ", c), n, feeds...)
				}
			}
		}
	}
}

// A Reduce operator given an empty axes input, an initializer or fed at
// the run, reduces every axis, or none with noop_with_empty_axes, and one
// whose optional axes input is left out (an empty name) the same, as
// ONNX Runtime has it: ReduceSum from opset 13, ReduceMax, ReduceMin and
// ReduceMean at 18, of each type they take. The engine refused every
// empty axes tensor ("this engine does not run empty tensors").
func TestReduceEmptyAxesMatchONNXRuntime(t *testing.T) {
	requireORT(t)
	r := rand.New(rand.NewSource(28))
	i64 := gonnxproto.TensorProto_INT64
	empty := &gonnxproto.TensorProto{Name: "axes", DataType: int32(i64), Dims: []int64{0}}
	for _, op := range []string{"ReduceSum", "ReduceMax", "ReduceMin", "ReduceMean"} {
		for _, ty := range numericElems {
			switch ty.dt {
			case modelstore.Int16, modelstore.Uint16, modelstore.Uint32, modelstore.Uint64:
				continue
			case modelstore.Int8, modelstore.Uint8:
				if op == "ReduceSum" || op == "ReduceMean" {
					continue
				}
			}
			for _, v := range []int64{13, 18} {
				if v == 13 && op != "ReduceSum" {
					continue // their axes an input from 18
				}
				for _, noop := range []int64{0, 1} {
					for _, keep := range []int64{0, 1} {
						if keep == 0 && noop == 0 {
							continue // a scalar, which the binding does not read
						}
						attrs := []*gonnxproto.AttributeProto{intAttr("keepdims", keep), intAttr("noop_with_empty_axes", noop)}
						what := fmt.Sprint(op, " ", ty.dt, " opset ", v, " noop_with_empty_axes ", noop, " keepdims ", keep)
						x := valuesOf(r, ty, false, 2, 3, 4)
						likeORT(t, what+" axes an empty initializer", node{op: op, opset: v, in: []string{"x", "axes"},
							inTypes: []gonnxproto.TensorProto_DataType{ty.elem}, inits: []*gonnxproto.TensorProto{empty}, attrs: attrs,
							out: []gonnxproto.TensorProto_DataType{ty.elem}}, x)
						likeORT(t, what+" axes fed empty", node{op: op, opset: v, in: []string{"x", "axes"},
							inTypes: []gonnxproto.TensorProto_DataType{ty.elem, i64}, attrs: attrs,
							out: []gonnxproto.TensorProto_DataType{ty.elem}}, x, int64s())
						likeORT(t, what+" axes left out", node{op: op, opset: v, in: []string{"x", ""},
							inTypes: []gonnxproto.TensorProto_DataType{ty.elem}, attrs: attrs,
							out: []gonnxproto.TensorProto_DataType{ty.elem}}, x)
					}
				}
			}
		}
	}
}

// ReduceSum and ReduceMean (FLOAT, DOUBLE, INT32, INT64; integer sums
// wrap, integer means truncate), ReduceMax and ReduceMin (those, INT8 and
// UINT8) give ONNX Runtime's outputs over each set of axes, keepdims 0
// and 1, at opsets 11, 12, 13, 17 and 18 (the axes an attribute before
// 13, for ReduceSum, and before 18, for the others, rewritten as an
// input), noop_with_empty_axes too (ReduceSum's from 13, the others' at
// 18), and axes fed at the run at 18.
func TestReduceMatchesONNXRuntime(t *testing.T) {
	requireORT(t)
	r := rand.New(rand.NewSource(27))
	for _, op := range []string{"ReduceSum", "ReduceMax", "ReduceMin", "ReduceMean"} {
		for _, ty := range numericElems {
			switch ty.dt {
			case modelstore.Int16, modelstore.Uint16, modelstore.Uint32, modelstore.Uint64:
				continue
			case modelstore.Int8, modelstore.Uint8:
				if op == "ReduceSum" || op == "ReduceMean" {
					continue
				}
			}
			for _, v := range []int64{11, 12, 13, 17, 18} { // their versions, and the last before 18
				if v == 11 && (ty.dt == modelstore.Int8 || ty.dt == modelstore.Uint8) {
					continue // ONNX Runtime has them from 12
				}
				for _, axes := range [][]int64{nil, {0}, {1}, {-1}, {0, 2}, {1, 2}, {0, 1, 2}} {
					for _, keep := range []int64{0, 1} {
						n := node{op: op, opset: v, in: []string{"x"}, inTypes: []gonnxproto.TensorProto_DataType{ty.elem},
							out: []gonnxproto.TensorProto_DataType{ty.elem}, attrs: []*gonnxproto.AttributeProto{intAttr("keepdims", keep)}}
						inputAxes := op == "ReduceSum" && v >= 13 || v >= 18
						switch {
						case axes == nil:
						case inputAxes:
							n.in = append(n.in, "axes")
							n.inits = []*gonnxproto.TensorProto{{Name: "axes", DataType: int32(gonnxproto.TensorProto_INT64), Dims: []int64{int64(len(axes))}, Int64Data: axes}}
						default:
							n.attrs = append(n.attrs, ints("axes", axes...))
						}
						if keep == 0 && len(axes) == 3 || keep == 0 && axes == nil {
							continue // a scalar, which the binding does not read
						}
						likeORT(t, fmt.Sprint(op, " ", ty.dt, " opset ", v, " axes ", axes, " keepdims ", keep), n, valuesOf(r, ty, false, 3, 4, 5))
					}
				}
				if op == "ReduceSum" && v >= 13 || v >= 18 {
					n := node{op: op, opset: v, in: []string{"x"}, inTypes: []gonnxproto.TensorProto_DataType{ty.elem},
						out: []gonnxproto.TensorProto_DataType{ty.elem}, attrs: []*gonnxproto.AttributeProto{intAttr("noop_with_empty_axes", 1)}}
					likeORT(t, fmt.Sprint(op, " ", ty.dt, " opset ", v, " noop_with_empty_axes"), n, valuesOf(r, ty, false, 3, 4, 5))
				}
				if v >= 18 { // the axes fed, with noop_with_empty_axes either way
					for _, noop := range []int64{0, 1} {
						n := node{op: op, opset: v, in: []string{"x", "axes"}, inTypes: []gonnxproto.TensorProto_DataType{ty.elem, gonnxproto.TensorProto_INT64},
							out: []gonnxproto.TensorProto_DataType{ty.elem}, attrs: []*gonnxproto.AttributeProto{intAttr("noop_with_empty_axes", noop)}}
						likeORT(t, fmt.Sprint(op, " ", ty.dt, " opset ", v, " fed axes, noop ", noop), n, valuesOf(r, ty, false, 3, 4, 5), int64s(-1, 0))
					}
				}
			}
		}
	}
}
