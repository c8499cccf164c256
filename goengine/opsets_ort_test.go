//go:build cgo && !noort

package goengine

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand"
	"strings"
	"testing"

	gonnxproto "github.com/advancedclimatesystems/gonnx/onnx"

	"github.com/enclaveai/enclaveai/modelstore"
)

// compileBoth compiles model in ONNX Runtime (in process) and in the
// pure-Go engine; both are closed when the test ends.
func compileBoth(t *testing.T, model []byte) (ort, gos modelstore.EngineSession) {
	t.Helper()
	src := modelstore.ModelSource{Data: model}
	ort, err := modelstore.InProcess{}.Compile(src, modelstore.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ort.Close() })
	if gos, err = (Engine{}).Compile(src, modelstore.SessionOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gos.Close() })
	return ort, gos
}

// closeToORT fails t unless got and want are outputs of the same shapes,
// types and values (rtol 1e-3, atol 1e-4; NaN where ORT has NaN).
func closeToORT(t *testing.T, what string, want, got []*modelstore.Tensor) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d outputs, ORT %d", what, len(got), len(want))
	}
	for i := range want {
		if !equalShape(got[i].Shape, want[i].Shape) || got[i].DType != want[i].DType {
			t.Fatalf("%s output %d: %s %v, ORT %s %v", what, i, got[i].DType, got[i].Shape, want[i].DType, want[i].Shape)
		}
		g, w := floatsOf(got[i]), floatsOf(want[i])
		for k := range w {
			if d := math.Abs(float64(g[k] - w[k])); d > 1e-4+1e-3*math.Abs(float64(w[k])) || (g[k] != g[k]) != (w[k] != w[k]) {
				t.Fatalf("%s output %d[%d]: %g, ORT %g", what, i, k, g[k], w[k])
			}
		}
	}
}

// Models of opsets 11, 12 and 14 to 17 give ONNX Runtime's outputs: the
// benchmark models declared at each of them (the transformer at 11: its
// Softmax is rewritten), the transformer with its norms as
// LayerNormalization nodes, and what PyTorch exports at opset 17 (Reshape
// with allowzero 0, LayerNormalization over one and two dimensions) and 11.
// The engine refused them all ("runs opset 13 only"). And the vision
// classifier PyTorch exported at opsets 11, 13 and 14 (Pad, its pads
// reversed by a Slice of step -1, AveragePool, HardSwish and the like),
// which it refused too ("unsupported operator Pad"), and the decoder it
// exported at the same opsets (ConvTranspose, InstanceNormalization,
// CumSum). And opset18.onnx: Pad with its input axes, the Reduce
// operators with theirs, Split with num_outputs, which the engine refused
// ("this engine runs opsets 11 to 17").
func TestLaterOpsetsMatchONNXRuntime(t *testing.T) {
	requireORT(t)
	r := rand.New(rand.NewSource(3))
	type run struct {
		model string
		opset int64 // 0: as it is
		shape []int64
	}
	var runs []run
	for v := int64(MinOpset); v <= MaxOpset; v++ {
		if v == 13 {
			continue // TestMatchesONNXRuntime
		}
		runs = append(runs, run{"mlp.onnx", v, []int64{3, 784}}, run{"cnn.onnx", v, []int64{2, 1, 28, 28}})
	}
	runs = append(runs, run{"torch17.onnx", 0, []int64{1, 8, 32}}, run{"torch17.onnx", 0, []int64{5, 8, 32}},
		run{"torch11.onnx", 0, []int64{3, 8, 32}},
		run{"transformer17.onnx", 0, []int64{1, 64, 256}}, run{"transformer.onnx", 11, []int64{1, 64, 256}},
		run{"vision11.onnx", 0, []int64{2, 3, 15, 15}}, run{"vision13.onnx", 0, []int64{1, 3, 15, 15}}, run{"vision14.onnx", 0, []int64{4, 3, 15, 15}},
		run{"decoder11.onnx", 0, []int64{2, 4, 5, 5}}, run{"decoder13.onnx", 0, []int64{1, 4, 5, 5}}, run{"decoder14.onnx", 0, []int64{3, 4, 5, 5}},
		run{"opset18.onnx", 0, []int64{1, 4, 6, 5}}, run{"opset18.onnx", 0, []int64{3, 4, 6, 5}})
	for _, c := range runs {
		model := readTestModel(t, c.model)
		if c.opset != 0 {
			model = withOpset(t, model, c.opset)
		}
		ort, gos := compileBoth(t, model)
		in := []*modelstore.Tensor{randomFloats(r, c.shape...)}
		want, got := runBoth(t, ort, gos, c.model, in)
		closeToORT(t, c.model, want, got)
	}
}

// LayerNormalization gives ONNX Runtime's outputs, its mean and inverse
// standard deviation too, over any axis, with and without a bias, with
// another epsilon, and at opset 13 (ONNX Runtime's own version 1).
func TestLayerNormalizationMatchesONNXRuntime(t *testing.T) {
	requireORT(t)
	r := rand.New(rand.NewSource(4))
	x := []int64{2, 3, 4, 5}
	for _, c := range []struct {
		opset  int64
		axis   int64
		noBias bool
		stats  bool
		eps    float32
	}{
		{17, -1, false, false, 0}, {17, -1, false, true, 0}, {17, -2, true, true, 0}, {17, 1, false, true, 1e-2},
		{17, 0, false, true, 0}, {17, 3, true, false, 0.5}, {13, -1, false, true, 0}, {15, 2, false, false, 0},
	} {
		attrs := []*gonnxproto.AttributeProto{intAttr("axis", c.axis)}
		if c.eps != 0 {
			attrs = append(attrs, &gonnxproto.AttributeProto{Name: "epsilon", Type: gonnxproto.AttributeProto_FLOAT, F: c.eps})
		}
		model := layerNormModel(t, c.opset, x[(c.axis+4)%4:], c.noBias, c.stats, attrs...)
		ort, gos := compileBoth(t, model)
		in := randomFloats(r, x...)
		for i, f := range floatsOf(in) { // far from zero mean, as activations are
			putFloat(in, i, 3+4*f)
		}
		want, got := runBoth(t, ort, gos, "LayerNormalization", []*modelstore.Tensor{in})
		closeToORT(t, "LayerNormalization", want, got)
	}
}

// putFloat sets element i of a FLOAT tensor.
func putFloat(t *modelstore.Tensor, i int, v float32) {
	b := math.Float32bits(v)
	t.Data[4*i], t.Data[4*i+1], t.Data[4*i+2], t.Data[4*i+3] = byte(b), byte(b>>8), byte(b>>16), byte(b>>24)
}

// A GRU of opset 14 with its layout of 0 is opset 13's, and one whose node
// leaves out the optional Y_h output runs (gonnx failed it: "could not set
// output tensor").
func TestGRULayoutZeroMatchesONNXRuntime(t *testing.T) {
	requireORT(t)
	r := rand.New(rand.NewSource(5))
	w, rw := randomFloats(r, 1, 6, 3), randomFloats(r, 1, 6, 2)
	model := withOpset(t, oneNode(t, "GRU", []int64{4, 1, 3}, []*modelstore.Tensor{w, rw}, intAttr("layout", 0), intAttr("hidden_size", 2)), 14)
	ort, gos := compileBoth(t, model)
	want, got := runBoth(t, ort, gos, "GRU", []*modelstore.Tensor{randomFloats(r, 4, 1, 3)})
	closeToORT(t, "GRU", want, got)
}

// Before opset 13, Softmax is over every dimension from axis on (by
// default 1) as one, and Squeeze's and Unsqueeze's axes are an attribute:
// the rewritten nodes give ONNX Runtime's outputs at opsets 11 and 12.
func TestOlderOpsetsMatchONNXRuntime(t *testing.T) {
	requireORT(t)
	r := rand.New(rand.NewSource(6))
	x := []int64{2, 3, 4, 5}
	type node struct {
		op    string
		attrs []*gonnxproto.AttributeProto
		in    []int64
	}
	var nodes []node
	for _, axis := range []int64{0, 1, 2, 3, -1, -3} {
		nodes = append(nodes, node{"Softmax", []*gonnxproto.AttributeProto{intAttr("axis", axis)}, x})
	}
	nodes = append(nodes, node{"Softmax", nil, x}, // axis 1 by default
		node{"Squeeze", []*gonnxproto.AttributeProto{ints("axes", -1)}, []int64{2, 1, 3, 1}},
		node{"Squeeze", nil, []int64{1, 3, 1, 2}},
		node{"Unsqueeze", []*gonnxproto.AttributeProto{ints("axes", 0, 3)}, []int64{2, 3}},
		node{"Unsqueeze", []*gonnxproto.AttributeProto{ints("axes", -1)}, []int64{2, 3}})
	for _, v := range []int64{11, 12} {
		for _, c := range nodes {
			ort, gos := compileBoth(t, withOpset(t, oneNode(t, c.op, c.in, nil, c.attrs...), v))
			want, got := runBoth(t, ort, gos, c.op, []*modelstore.Tensor{randomFloats(r, c.in...)})
			closeToORT(t, c.op, want, got)
		}
	}
}

// Expand and Tile give ONNX Runtime's outputs, byte for byte, for every
// type they copy, over broadcasts either way (a 1 in the shape keeps the
// input's dimension), a rank that grows, and repeats of 1.
func TestExpandTileMatchONNXRuntime(t *testing.T) {
	requireORT(t)
	r := rand.New(rand.NewSource(8))
	types := []elemType{{gonnxproto.TensorProto_FLOAT, modelstore.Float}, {gonnxproto.TensorProto_DOUBLE, modelstore.Double},
		{gonnxproto.TensorProto_INT8, modelstore.Int8}, {gonnxproto.TensorProto_INT64, modelstore.Int64},
		{gonnxproto.TensorProto_UINT16, modelstore.Uint16}, {gonnxproto.TensorProto_UINT64, modelstore.Uint64},
		{gonnxproto.TensorProto_BOOL, modelstore.Bool}}
	in := []string{"x", "s"}
	for _, ty := range types {
		elems := []gonnxproto.TensorProto_DataType{ty.elem, gonnxproto.TensorProto_INT64}
		ort, gos := typedNodeBoth(t, "Expand", nil, in, elems)
		for _, c := range []struct{ x, shape []int64 }{
			{[]int64{3, 1}, []int64{2, 3, 4}}, {[]int64{1, 4}, []int64{3, 1}}, {[]int64{2, 3}, []int64{1}},
			{[]int64{5}, []int64{2, 1, 5}}, {[]int64{1, 1, 1}, []int64{2, 3, 4}}, {[]int64{2, 1, 3}, []int64{2, 1, 4, 1}},
		} {
			x := randomOf(r, ty.dt, c.x...)
			if ty.dt == modelstore.Bool {
				x = boolsOf(r, c.x...)
			}
			sameAsORT(t, ort, gos, fmt.Sprint("Expand ", ty.dt, c), x, int64s(c.shape...))
		}
		ort, gos = typedNodeBoth(t, "Tile", nil, in, elems)
		for _, c := range []struct{ x, reps []int64 }{
			{[]int64{2, 3}, []int64{2, 2}}, {[]int64{4}, []int64{3}}, {[]int64{2, 1, 3}, []int64{1, 4, 2}}, {[]int64{1, 2}, []int64{1, 1}},
		} {
			x := randomOf(r, ty.dt, c.x...)
			if ty.dt == modelstore.Bool {
				x = boolsOf(r, c.x...)
			}
			sameAsORT(t, ort, gos, fmt.Sprint("Tile ", ty.dt, c), x, int64s(c.reps...))
		}
	}
}

// boolsOf is a BOOL tensor of random 0 and 1 bytes.
func boolsOf(r *rand.Rand, shape ...int64) *modelstore.Tensor {
	t := &modelstore.Tensor{DType: modelstore.Bool, Shape: shape, Data: make([]byte, modelstore.ShapeLen(shape))}
	for i := range t.Data {
		t.Data[i] = byte(r.Intn(2))
	}
	return t
}

// floats32 is a FLOAT tensor of shape holding v.
func floats32(shape []int64, v ...float32) *modelstore.Tensor {
	t := &modelstore.Tensor{DType: modelstore.Float, Shape: shape, Data: make([]byte, 4*len(v))}
	for i, f := range v {
		putFloat(t, i, f)
	}
	return t
}

// The review's cases, each once different from ONNX Runtime: ReduceMax
// and ReduceMin of rows with a NaN (passed over), Clip with a NaN bound
// (every element NaN), ReduceSum with an empty axes attribute at opset 11
// (refused) and Unsqueeze with one (every run failed).
func TestReviewedOpsMatchONNXRuntime(t *testing.T) {
	requireORT(t)
	nan := float32(math.NaN())
	f := gonnxproto.TensorProto_FLOAT
	rows := floats32([]int64{3, 3}, nan, 1, 2, 3, nan, 0.5, nan, nan, nan)
	long := make([]float32, 4*40) // rows long enough for vector kernels
	for i := range long {
		long[i] = float32(i%17) - 8
	}
	long[0], long[45], long[87], long[120], long[159] = nan, nan, nan, nan, nan
	for _, op := range []string{"ReduceMax", "ReduceMin"} {
		for _, v := range []int64{11, 13} {
			for _, in := range []*modelstore.Tensor{rows, floats32([]int64{4, 40}, long...), floats32([]int64{4, 4, 10}, long...)} {
				for _, axes := range [][]int64{{1}, {0}, {-1}} {
					likeORT(t, fmt.Sprint(op, v, in.Shape, axes), node{op: op, opset: v, in: []string{"x"}, inTypes: []gonnxproto.TensorProto_DataType{f},
						attrs: []*gonnxproto.AttributeProto{ints("axes", axes...), intAttr("keepdims", 0)}, out: []gonnxproto.TensorProto_DataType{f}}, in)
				}
			}
		}
	}
	x := floats32([]int64{4}, -1, 0, 2, nan)
	for _, v := range []int64{11, 13} {
		for _, in := range [][]string{{"x", "b"}, {"x", "", "b"}} { // the NaN as min, then as max
			likeORT(t, fmt.Sprint("Clip ", v, in), node{op: "Clip", opset: v, in: in, inTypes: []gonnxproto.TensorProto_DataType{f},
				inits: []*gonnxproto.TensorProto{{Name: "b", DataType: int32(f), FloatData: []float32{nan}}},
				out:   []gonnxproto.TensorProto_DataType{f}}, x)
		}
	}
	cube := randomFloats(rand.New(rand.NewSource(9)), 2, 3, 4)
	for _, op := range []string{"ReduceSum", "Unsqueeze", "Squeeze"} {
		likeORT(t, op+" axes []", node{op: op, opset: 11, in: []string{"x"}, inTypes: []gonnxproto.TensorProto_DataType{f},
			attrs: []*gonnxproto.AttributeProto{ints("axes")}, out: []gonnxproto.TensorProto_DataType{f}}, cube)
	}
}

// Split gives ONNX Runtime's outputs, byte for byte, at opsets 11 (its
// sizes an attribute, rewritten), 13 and 18 (an input), with sizes and in
// equal parts, along every axis, for several types; at 18 with
// num_outputs too, in equal parts and in uneven ones (the last smaller).
func TestSplitMatchesONNXRuntime(t *testing.T) {
	requireORT(t)
	r := rand.New(rand.NewSource(10))
	x := []int64{4, 6, 2}
	for _, ty := range []elemType{{gonnxproto.TensorProto_FLOAT, modelstore.Float}, {gonnxproto.TensorProto_INT64, modelstore.Int64},
		{gonnxproto.TensorProto_UINT8, modelstore.Uint8}} {
		for _, c := range []struct {
			axis  int64
			sizes []int64 // nil: equal parts
			outs  int
		}{{0, nil, 2}, {1, nil, 3}, {-1, nil, 2}, {1, []int64{1, 5}, 2}, {0, []int64{2, 1, 1}, 3}, {-2, []int64{6}, 1}} {
			for _, v := range []int64{11, 13, 18} {
				n := node{op: "Split", opset: v, in: []string{"x"}, inTypes: []gonnxproto.TensorProto_DataType{ty.elem},
					attrs: []*gonnxproto.AttributeProto{intAttr("axis", c.axis)}}
				for range c.outs {
					n.out = append(n.out, ty.elem)
				}
				if c.sizes != nil && v == 11 {
					n.attrs = append(n.attrs, ints("split", c.sizes...))
				} else if c.sizes != nil {
					n.in = append(n.in, "s")
					n.inits = []*gonnxproto.TensorProto{{Name: "s", Dims: []int64{int64(len(c.sizes))}, DataType: int32(gonnxproto.TensorProto_INT64), Int64Data: c.sizes}}
				}
				likeORT(t, fmt.Sprint("Split ", ty.dt, " at ", v, " ", c), n, randomOf(r, ty.dt, x...))
				if v == 18 && c.sizes == nil {
					n.attrs = append(n.attrs, intAttr("num_outputs", int64(c.outs)))
					likeORT(t, fmt.Sprint("Split ", ty.dt, " at ", v, " num_outputs ", c), n, randomOf(r, ty.dt, x...))
				}
			}
		}
		// Uneven parts: a dimension of 5 in 2 or 3, 7 in 2, 3 or 4.
		for _, c := range []struct {
			axis int64
			outs int
		}{{0, 2}, {0, 3}, {1, 3}, {1, 4}, {-2, 2}, {2, 2}, {1, 1}} {
			n := node{op: "Split", opset: 18, in: []string{"x"}, inTypes: []gonnxproto.TensorProto_DataType{ty.elem},
				attrs: []*gonnxproto.AttributeProto{intAttr("axis", c.axis), intAttr("num_outputs", int64(c.outs))}}
			for range c.outs {
				n.out = append(n.out, ty.elem)
			}
			likeORT(t, fmt.Sprint("Split ", ty.dt, " at 18 uneven ", c), n, randomOf(r, ty.dt, 5, 7, 2))
		}
	}
}

// Split with num_outputs gives ONNX Runtime's outputs for every dimension
// from 1 to 12 in 1 to 12 parts where ONNX Runtime runs it (parts of
// ceil(dimension / outputs), the last the rest), and fails where ONNX
// Runtime fails it: where those parts overrun the dimension or leave the
// last one empty (6 in 4: 2, 2, 2 and 0), and where the parts outnumber
// the dimension.
func TestSplitNumOutputsMatchesONNXRuntime(t *testing.T) {
	requireORT(t)
	r := rand.New(rand.NewSource(11))
	f32 := gonnxproto.TensorProto_FLOAT
	ran := 0
	for dim := int64(1); dim <= 12; dim++ {
		for outs := 1; outs <= 12; outs++ {
			n := node{op: "Split", opset: 18, in: []string{"x"}, inTypes: []gonnxproto.TensorProto_DataType{f32},
				attrs: []*gonnxproto.AttributeProto{intAttr("axis", 1), intAttr("num_outputs", int64(outs))}}
			for range outs {
				n.out = append(n.out, f32)
			}
			x := randomFloats(r, 2, dim, 3)
			what := fmt.Sprint("Split of ", dim, " in ", outs)
			ort, gos := compileBoth(t, n.model(t))
			if _, err := ort.Run(context.Background(), []*modelstore.Tensor{x}); err != nil {
				if _, err := gos.Run(context.Background(), []*modelstore.Tensor{x}); err == nil {
					t.Errorf("%s: the engine ran it, ONNX Runtime failed", what)
				}
				continue
			}
			ran++
			likeORT(t, what, n, x)
		}
	}
	if ran < 40 { // ONNX Runtime 1.24 runs 50 of them
		t.Errorf("ONNX Runtime ran %d of the splits", ran)
	}
}

// An empty list input that ONNX Runtime takes as left out, Split's sizes
// (equal parts) and Squeeze's axes (every dimension of 1), or as none,
// Unsqueeze's axes (its input as it is), an initializer or fed, gives its
// outputs; the engine refused them all as empty tensors.
func TestEmptyListsMatchONNXRuntime(t *testing.T) {
	requireORT(t)
	r := rand.New(rand.NewSource(12))
	f32, i64 := gonnxproto.TensorProto_FLOAT, gonnxproto.TensorProto_INT64
	empty := &gonnxproto.TensorProto{Name: "l", DataType: int32(i64), Dims: []int64{0}}
	for _, v := range []int64{13, 18} {
		x := randomFloats(r, 2, 1, 4, 1)
		for _, c := range []struct {
			op   string
			outs int
		}{{"Split", 2}, {"Squeeze", 1}, {"Unsqueeze", 1}} {
			constant := node{op: c.op, opset: v, in: []string{"x", "l"}, inTypes: []gonnxproto.TensorProto_DataType{f32},
				inits: []*gonnxproto.TensorProto{empty}}
			fed := node{op: c.op, opset: v, in: []string{"x", "l"}, inTypes: []gonnxproto.TensorProto_DataType{f32, i64}}
			for range c.outs {
				constant.out = append(constant.out, f32)
				fed.out = append(fed.out, f32)
			}
			likeORT(t, fmt.Sprint(c.op, " at ", v, " of an empty initializer"), constant, x)
			likeORT(t, fmt.Sprint(c.op, " at ", v, " fed empty"), fed, x, int64s())
		}
	}
}

// scalarT is a rank-0 tensor of dt holding v.
func scalarT(dt modelstore.DType, v float64) *modelstore.Tensor {
	t := &modelstore.Tensor{DType: dt, Shape: []int64{}}
	switch dt {
	case modelstore.Float:
		t.Data = binary.LittleEndian.AppendUint32(nil, math.Float32bits(float32(v)))
	case modelstore.Double:
		t.Data = binary.LittleEndian.AppendUint64(nil, math.Float64bits(v))
	case modelstore.Int32:
		t.Data = binary.LittleEndian.AppendUint32(nil, uint32(int32(v)))
	default:
		t.Data = binary.LittleEndian.AppendUint64(nil, uint64(int64(v)))
	}
	return t
}

// Range gives ONNX Runtime's outputs: its count, and each
// element the one before plus delta (rounding accumulates, as ORT's).
func TestRangeMatchesONNXRuntime(t *testing.T) {
	requireORT(t)
	for _, ty := range []elemType{{gonnxproto.TensorProto_FLOAT, modelstore.Float}, {gonnxproto.TensorProto_DOUBLE, modelstore.Double},
		{gonnxproto.TensorProto_INT32, modelstore.Int32}, {gonnxproto.TensorProto_INT64, modelstore.Int64}} {
		for _, c := range [][3]float64{{0, 10, 3}, {-5, 5, 2}, {5, -5, -3}, {1, 2, 1}, {0, 1000, 7}, {0.5, 10.25, 0.3}, {10, 0, -1.5}, {0, 1, 0.1}} {
			if ty.dt == modelstore.Int32 || ty.dt == modelstore.Int64 {
				if c[0] != math.Trunc(c[0]) || c[1] != math.Trunc(c[1]) || c[2] != math.Trunc(c[2]) {
					continue
				}
			}
			n := node{op: "Range", opset: 11, in: []string{"s", "l", "d"}, inTypes: []gonnxproto.TensorProto_DataType{ty.elem, ty.elem, ty.elem},
				out: []gonnxproto.TensorProto_DataType{ty.elem}}
			likeORT(t, fmt.Sprint("Range ", ty.dt, c), n, scalarT(ty.dt, c[0]), scalarT(ty.dt, c[1]), scalarT(ty.dt, c[2]))
		}
	}
}

// What ONNX Runtime refuses of opset 18's changes the engine refuses too:
// when the model is stored, an axes attribute of a Reduce operator at 18,
// and what 18 added in a model before it (the Reduce operators' axes input
// and noop_with_empty_axes, Pad's axes, Split's num_outputs); at the run,
// num_outputs parts that do not add up to the dimension or outnumber it,
// and Pad's axes out of range or not matching its pads.
func TestOpset18RefusalsMatchONNXRuntime(t *testing.T) {
	requireORT(t)
	f32, i64 := gonnxproto.TensorProto_FLOAT, gonnxproto.TensorProto_INT64
	out := []gonnxproto.TensorProto_DataType{f32}
	axes := []*gonnxproto.TensorProto{{Name: "axes", Dims: []int64{1}, DataType: int32(i64), Int64Data: []int64{1}}}
	pads := []*gonnxproto.TensorProto{{Name: "pads", Dims: []int64{2}, DataType: int32(i64), Int64Data: []int64{1, 1}}, axes[0]}
	for _, c := range []struct {
		what string
		n    node
		want string
	}{
		{"ReduceMax axes attribute at 18", node{op: "ReduceMax", opset: 18, in: []string{"x"}, inTypes: out, out: out,
			attrs: []*gonnxproto.AttributeProto{ints("axes", 1)}}, "attribute axes, which opset 18 made an input"},
		{"ReduceMin axes input at 17", node{op: "ReduceMin", opset: 17, in: []string{"x", "axes"}, inTypes: out, inits: axes, out: out},
			"uses other inputs than the data before opset 18"},
		{"ReduceMean noop_with_empty_axes at 17", node{op: "ReduceMean", opset: 17, in: []string{"x"}, inTypes: out, out: out,
			attrs: []*gonnxproto.AttributeProto{intAttr("noop_with_empty_axes", 1)}}, "uses noop_with_empty_axes before opset 18"},
		{"Pad axes at 17", node{op: "Pad", opset: 17, in: []string{"x", "pads", "", "axes"}, inTypes: out, inits: pads, out: out},
			"uses input axes (opset 18)"},
		{"Split num_outputs at 17", node{op: "Split", opset: 17, in: []string{"x"}, inTypes: out, out: []gonnxproto.TensorProto_DataType{f32, f32},
			attrs: []*gonnxproto.AttributeProto{intAttr("num_outputs", 2)}}, "uses attribute num_outputs (opset 18)"},
	} {
		src := modelstore.ModelSource{Data: c.n.model(t)}
		if s, err := (modelstore.InProcess{}).Compile(src, modelstore.SessionOptions{}); err == nil {
			s.Close()
			t.Errorf("%s: ONNX Runtime took it", c.what)
		}
		if _, err := (Engine{}).Compile(src, modelstore.SessionOptions{}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", c.what, err, c.want)
		}
	}

	splitNode := func(outs int) node {
		n := node{op: "Split", opset: 18, in: []string{"x"}, inTypes: out, attrs: []*gonnxproto.AttributeProto{intAttr("num_outputs", int64(outs))}}
		for range outs {
			n.out = append(n.out, f32)
		}
		return n
	}
	padFed := node{op: "Pad", opset: 18, in: []string{"x", "pads", "", "axes"}, inTypes: []gonnxproto.TensorProto_DataType{f32, i64, i64}, out: out}
	r := rand.New(rand.NewSource(18))
	for _, c := range []struct {
		what string
		n    node
		in   []*modelstore.Tensor
		want string
	}{
		{"6 in 4 parts", splitNode(4), []*modelstore.Tensor{randomFloats(r, 6)}, "sizes summing to 8 of a dimension of 6"},
		{"7 in 5 parts", splitNode(5), []*modelstore.Tensor{randomFloats(r, 7, 2)}, "sizes summing to 9 of a dimension of 7"},
		{"2 in 3 parts", splitNode(3), []*modelstore.Tensor{randomFloats(r, 2, 2)}, "num_outputs 3 of a dimension of 2"},
		{"Pad axis 3 of rank 3", padFed, []*modelstore.Tensor{randomFloats(r, 2, 3, 4), int64s(1, 1), int64s(3)}, "axis 3 of an input of rank 3"},
		{"Pad axis -4 of rank 3", padFed, []*modelstore.Tensor{randomFloats(r, 2, 3, 4), int64s(1, 1), int64s(-4)}, "axis -4 of an input of rank 3"},
		{"Pad 2 pads for 2 axes", padFed, []*modelstore.Tensor{randomFloats(r, 2, 3, 4), int64s(1, 1), int64s(0, 1)}, "pads of shape (2) for 2 axes, where it takes 4"},
	} {
		ort, gos := compileBoth(t, c.n.model(t))
		if _, err := ort.Run(context.Background(), c.in); err == nil {
			t.Errorf("%s: ONNX Runtime ran it", c.what)
		}
		if _, err := gos.Run(context.Background(), c.in); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", c.what, err, c.want)
		}
	}
}
