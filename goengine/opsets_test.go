package goengine

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	gonnxproto "github.com/advancedclimatesystems/gonnx/onnx"
	"github.com/advancedclimatesystems/gonnx/ops/opset13"
	"google.golang.org/protobuf/proto"

	"github.com/enclaveai/enclaveai/modelstore"
)

// schemas is redis_tests/models/onnx_versions.json, which gen_models.py
// writes from the onnx package's schemas: each default-domain operator's
// versions and its attributes' types.
type schemas struct {
	MaxOpset   int64                        `json:"max_opset"`
	Versions   map[string][]int64           `json:"versions"`
	Attributes map[string]map[string]string `json:"attributes"`
}

// readSchemas reads onnx_versions.json.
func readSchemas(t *testing.T) schemas {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "redis_tests", "models", "onnx_versions.json"))
	if err != nil {
		t.Fatalf("%v (run `make models`)", err)
	}
	var doc schemas
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	return doc
}

// changes lists, for every operator the engine has, exactly the versions
// the ONNX schemas give it after MinOpset up to MaxOpset
// (redis_tests/models/onnx_versions.json, written by gen_models.py from the
// onnx package): an operator that changed and is missing from the table
// would run another version as if it were opset 13's.
func TestChangesMatchTheSchemas(t *testing.T) {
	doc := readSchemas(t)
	if doc.MaxOpset < MaxOpset {
		t.Fatalf("the schemas go up to opset %d, below MaxOpset %d", doc.MaxOpset, MaxOpset)
	}
	names := opset13.GetOpNames()
	for name := range extraOps {
		names = append(names, name)
	}
	checked := 0
	for _, name := range names {
		if !Supported(name) {
			continue
		}
		vs, ok := doc.Versions[name]
		if !ok {
			t.Errorf("%s: no such operator in the default domain", name)
			continue
		}
		var want, got []int64
		for _, v := range vs {
			if v > MinOpset && v <= MaxOpset {
				want = append(want, v)
			}
		}
		for _, c := range changes[name] {
			got = append(got, c.at)
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: changes has versions %v, the schemas %v", name, got, want)
		}
		checked++
	}
	for name := range changes {
		if !Supported(name) {
			t.Errorf("changes lists %s, which the engine does not have", name)
		}
	}
	if checked < 50 {
		t.Fatalf("checked %d operators", checked)
	}
}

// node is a one-node model for the engine's tests (and those against
// ONNX Runtime, likeORT): op at
// opset, its inputs graph inputs of the given types unless they are
// initializers (by name; "" leaves an optional input out), and outputs
// of the given types.
type node struct {
	op      string
	opset   int64
	attrs   []*gonnxproto.AttributeProto
	in      []string
	inTypes []gonnxproto.TensorProto_DataType // of the graph inputs, in order
	inits   []*gonnxproto.TensorProto
	out     []gonnxproto.TensorProto_DataType
}

// model is n's bytes.
func (n node) model(t *testing.T) []byte {
	t.Helper()
	g := &gonnxproto.GraphProto{Name: "g", Initializer: n.inits}
	nd := &gonnxproto.NodeProto{Name: "n", OpType: n.op, Input: n.in, Attribute: n.attrs}
	isInit := map[string]bool{"": true}
	for _, i := range n.inits {
		isInit[i.GetName()] = true
	}
	k := 0
	for _, name := range n.in {
		if !isInit[name] {
			g.Input = append(g.Input, valueInfo(name, n.inTypes[k]))
			k++
		}
	}
	for i, ty := range n.out {
		name := fmt.Sprintf("y%d", i)
		nd.Output = append(nd.Output, name)
		g.Output = append(g.Output, valueInfo(name, ty))
	}
	g.Node = []*gonnxproto.NodeProto{nd}
	b, err := proto.Marshal(&gonnxproto.ModelProto{IrVersion: 8, OpsetImport: []*gonnxproto.OperatorSetIdProto{{Version: n.opset}}, Graph: g})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// compileGo compiles model in the pure-Go engine, closed when t ends.
func compileGo(t *testing.T, model []byte) modelstore.EngineSession {
	t.Helper()
	s, err := Engine{}.Compile(modelstore.ModelSource{Data: model}, modelstore.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// withOpset is model with its default-domain opset import set to v.
func withOpset(t *testing.T, model []byte, v int64) []byte {
	t.Helper()
	mp := &gonnxproto.ModelProto{}
	if err := proto.Unmarshal(model, mp); err != nil {
		t.Fatal(err)
	}
	mp.OpsetImport = []*gonnxproto.OperatorSetIdProto{{Version: v}}
	b, err := proto.Marshal(mp)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// layerNormModel is one LayerNormalization node at opset: x FLOAT, scale
// (and bias unless noBias) initializers of normShape, outputs y, and mean
// and invstd when stats.
func layerNormModel(t *testing.T, opset int64, normShape []int64, noBias, stats bool, attrs ...*gonnxproto.AttributeProto) []byte {
	t.Helper()
	n := int64(1)
	for _, d := range normShape {
		n *= d
	}
	init := func(name string) *gonnxproto.TensorProto {
		v := make([]float32, n)
		for i := range v {
			v[i] = 0.5 + 0.1*float32(i%7) + float32(len(name))/10
		}
		return &gonnxproto.TensorProto{Name: name, Dims: normShape, DataType: int32(gonnxproto.TensorProto_FLOAT), FloatData: v}
	}
	inputs, inits := []string{"x", "scale"}, []*gonnxproto.TensorProto{init("scale")}
	if !noBias {
		inputs, inits = append(inputs, "bias"), append(inits, init("bias"))
	}
	outputs := []string{"y"}
	if stats {
		outputs = append(outputs, "mean", "invstd")
	}
	g := &gonnxproto.GraphProto{Name: "ln", Initializer: inits,
		Node:  []*gonnxproto.NodeProto{{OpType: "LayerNormalization", Input: inputs, Output: outputs, Attribute: attrs}},
		Input: []*gonnxproto.ValueInfoProto{valueInfo("x", gonnxproto.TensorProto_FLOAT)}}
	for _, o := range outputs {
		g.Output = append(g.Output, valueInfo(o, gonnxproto.TensorProto_FLOAT))
	}
	b, err := proto.Marshal(&gonnxproto.ModelProto{IrVersion: 8, OpsetImport: []*gonnxproto.OperatorSetIdProto{{Version: opset}}, Graph: g})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// reshapeModel is x FLOAT [2, 3] reshaped to [3, 2] at opset, with attrs.
func reshapeModel(t *testing.T, opset int64, attrs ...*gonnxproto.AttributeProto) []byte {
	t.Helper()
	f := gonnxproto.TensorProto_FLOAT
	return node{op: "Reshape", opset: opset, attrs: attrs, in: []string{"x", "shape"}, inTypes: []gonnxproto.TensorProto_DataType{f},
		inits: []*gonnxproto.TensorProto{{Name: "shape", Dims: []int64{2}, DataType: int32(gonnxproto.TensorProto_INT64), Int64Data: []int64{3, 2}}},
		out:   []gonnxproto.TensorProto_DataType{f}}.model(t)
}

// What a later opset's operators mean and this engine does not run is
// refused at Compile, naming it, as is an operator older than the model's
// opset, and what opset 18 added to Pad, Split and the Reduce operators
// in a model before it (an axes attribute at 18); opsets before 11 and
// after 18 are refused.
func TestLaterVersionsRefused(t *testing.T) {
	f32, i64 := gonnxproto.TensorProto_FLOAT, gonnxproto.TensorProto_INT64
	axes := []*gonnxproto.TensorProto{{Name: "axes", Dims: []int64{1}, DataType: int32(i64), Int64Data: []int64{1}}}
	reduceAt := func(op string, opset int64, in []string, attrs ...*gonnxproto.AttributeProto) []byte {
		return node{op: op, opset: opset, in: in, inTypes: []gonnxproto.TensorProto_DataType{f32}, inits: axes, attrs: attrs,
			out: []gonnxproto.TensorProto_DataType{f32}}.model(t)
	}
	pads := []*gonnxproto.TensorProto{{Name: "pads", Dims: []int64{2}, DataType: int32(i64), Int64Data: []int64{1, 1}},
		{Name: "axes", Dims: []int64{1}, DataType: int32(i64), Int64Data: []int64{1}}}
	padAt := func(opset int64) []byte {
		return node{op: "Pad", opset: opset, in: []string{"x", "pads", "", "axes"}, inTypes: []gonnxproto.TensorProto_DataType{f32},
			inits: pads, out: []gonnxproto.TensorProto_DataType{f32}}.model(t)
	}
	splitAt := func(opset int64, in []string, outs int, attrs ...*gonnxproto.AttributeProto) []byte {
		n := node{op: "Split", opset: opset, in: in, inTypes: []gonnxproto.TensorProto_DataType{f32, i64}, attrs: attrs}
		for range outs {
			n.out = append(n.out, f32)
		}
		return n.model(t)
	}
	for _, c := range []struct {
		what  string
		model []byte
		want  string // "" runs
	}{
		{"opset 10", withOpset(t, readTestModel(t, "mlp.onnx"), 10), "imports ONNX opset 10; this engine runs opsets 11 to 18"},
		{"opset 19", withOpset(t, readTestModel(t, "mlp.onnx"), 19), "imports ONNX opset 19; this engine runs opsets 11 to 18"},
		{"ReduceMax axes input at 17", reduceAt("ReduceMax", 17, []string{"x", "axes"}), "uses other inputs than the data before opset 18"},
		{"ReduceMean noop_with_empty_axes at 17", reduceAt("ReduceMean", 17, []string{"x"}, intAttr("noop_with_empty_axes", 1)), "uses noop_with_empty_axes before opset 18"},
		{"ReduceMin axes attribute at 18", reduceAt("ReduceMin", 18, []string{"x"}, ints("axes", 1)), "attribute axes, which opset 18 made an input"},
		{"ReduceMean axes attribute at 18", reduceAt("ReduceMean", 18, []string{"x"}, ints("axes", 1)), "attribute axes, which opset 18 made an input"},
		{"Pad axes at 17", padAt(17), "uses input axes (opset 18)"},
		{"Pad axes at 11", padAt(11), "uses input axes (opset 18)"},
		{"Split num_outputs at 17", splitAt(17, []string{"x"}, 2, intAttr("num_outputs", 2)), "uses attribute num_outputs (opset 18)"},
		{"Split num_outputs of another count", splitAt(18, []string{"x"}, 2, intAttr("num_outputs", 3)), "num_outputs 3 for a node of 2 outputs"},
		{"Split num_outputs 0", splitAt(18, []string{"x"}, 1, intAttr("num_outputs", 0)), "num_outputs 0 for a node of 1 outputs"},
		{"Split num_outputs and split", splitAt(18, []string{"x", "s"}, 2, intAttr("num_outputs", 2)), "both the input split and num_outputs"},
		{"GreaterOrEqual at 11", withOpset(t, oneNode(t, "GreaterOrEqual", []int64{2, 3}, []*modelstore.Tensor{{DType: modelstore.Float, Shape: []int64{3}, Data: make([]byte, 12)}}), 11), "no such operator in the model's opset"},
		{"Unsqueeze without axes at 11", withOpset(t, oneNode(t, "Unsqueeze", []int64{2, 3}, nil), 11), "uses no axes"},
		{"Reshape allowzero", reshapeModel(t, 14, intAttr("allowzero", 1)), "uses allowzero 1 (opset 14)"},
		{"Reshape allowzero at 13", reshapeModel(t, 13, intAttr("allowzero", 1)), "uses allowzero 1 (opset 14)"},
		{"Shape start", withOpset(t, oneNode(t, "Shape", []int64{2, 3}, nil, intAttr("start", 1)), 15), "uses attribute start (opset 15)"},
		{"GRU layout 1", withOpset(t, oneNode(t, "GRU", []int64{1, 2, 3}, nil, intAttr("layout", 1), intAttr("hidden_size", 2)), 14), "uses layout 1 (opset 14)"},
		{"LayerNormalization stash_type", layerNormModel(t, 17, []int64{3}, true, false, intAttr("stash_type", 11)), "stash_type"},
	} {
		_, err := Engine{}.Compile(modelstore.ModelSource{Data: c.model}, modelstore.SessionOptions{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", c.what, err, c.want)
		}
	}
}

// Expand and Tile refuse dimensions and repeats of 0 or below, repeats
// that do not match the input's rank, and a shape past the engine's
// memory bound, before they allocate; none of them panics.
func TestExpandTileRefuse(t *testing.T) {
	compile := func(op string) modelstore.EngineSession {
		return compileGo(t, node{op: op, opset: 13, in: []string{"x", "s"},
			inTypes: []gonnxproto.TensorProto_DataType{gonnxproto.TensorProto_FLOAT, gonnxproto.TensorProto_INT64},
			out:     []gonnxproto.TensorProto_DataType{gonnxproto.TensorProto_FLOAT}}.model(t))
	}
	x := &modelstore.Tensor{DType: modelstore.Float, Shape: []int64{2, 3}, Data: make([]byte, 24)}
	for _, c := range []struct {
		op   string
		s    []int64
		want string
	}{
		{"Expand", []int64{0, 3}, "makes no empty tensors"},
		{"Expand", []int64{-1, 3}, "makes no empty tensors"},
		{"Expand", []int64{4, 3}, "do not broadcast"},
		{"Expand", []int64{1 << 20, 1 << 20, 3}, "would make"},
		{"Tile", []int64{2}, "1 repeats for an input of rank 2"},
		{"Tile", []int64{2, 0}, "makes no empty tensors"},
		{"Tile", []int64{1 << 30, 1 << 30}, "would make"},
	} {
		_, err := compile(c.op).Run(context.Background(), []*modelstore.Tensor{x, int64s(c.s...)})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %v: %v, want an error with %q", c.op, c.s, err, c.want)
		}
	}
}

// The review's refusals: a Softmax of opset 11 whose axis is below the
// input's rank fails its run with an axis error, without the panic inside
// gonnx's Flatten that quarantined the model; a Squeeze axis out of range
// or of a dimension other than 1 fails the run (gonnx squeezed nothing);
// an axes attribute at opset 13, and ReduceSum's noop_with_empty_axes at
// 11, are refused as ONNX Runtime refuses them.
func TestReviewedRefusals(t *testing.T) {
	x := &modelstore.Tensor{DType: modelstore.Float, Shape: []int64{2, 1, 3}, Data: make([]byte, 24)}
	run := func(what string, model []byte, want string) {
		t.Helper()
		s, err := Engine{}.Compile(modelstore.ModelSource{Data: model}, modelstore.SessionOptions{})
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		defer s.Close()
		for range 2 {
			_, err := s.Run(context.Background(), []*modelstore.Tensor{x})
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("%s: %v, want an error with %q", what, err, want)
			}
		}
		if err := s.(modelstore.Quarantiner).Quarantined(); err != nil {
			t.Errorf("%s: quarantined: %v", what, err)
		}
	}
	run("Softmax axis -4 at 11", withOpset(t, oneNode(t, "Softmax", nil, nil, intAttr("axis", -4)), 11), "axis")
	run("Squeeze axes [4] at 11", withOpset(t, oneNode(t, "Squeeze", nil, nil, ints("axes", 4)), 11), "axis")
	run("Squeeze axes [0] at 11", withOpset(t, oneNode(t, "Squeeze", nil, nil, ints("axes", 0)), 11), "of a dimension of 1")
	for _, c := range []struct {
		what  string
		model []byte
	}{
		{"Squeeze axes attribute at 13", oneNode(t, "Squeeze", nil, nil, ints("axes", 1))},
		{"Unsqueeze axes attribute at 13", oneNode(t, "Unsqueeze", nil, nil, ints("axes", 1))},
		{"ReduceSum axes attribute at 13", oneNode(t, "ReduceSum", nil, nil, ints("axes", 1))},
		{"ReduceSum noop_with_empty_axes at 11", withOpset(t, oneNode(t, "ReduceSum", nil, nil, intAttr("noop_with_empty_axes", 1)), 11)},
	} {
		if _, err := (Engine{}).Compile(modelstore.ModelSource{Data: c.model}, modelstore.SessionOptions{}); err == nil {
			t.Errorf("%s: compiled", c.what)
		}
	}
}

// Split refuses sizes of 0, sizes that do not sum to the dimension or do
// not match its outputs, equal parts of a dimension they do not divide,
// and num_outputs parts (opset 18) that do not add up to it or outnumber
// it, before it allocates; none of them panics.
func TestSplitRefuses(t *testing.T) {
	x := &modelstore.Tensor{DType: modelstore.Float, Shape: []int64{2, 6}, Data: make([]byte, 48)}
	model := func(outs int, inputs ...string) []byte {
		n := node{op: "Split", opset: 13, in: inputs, attrs: []*gonnxproto.AttributeProto{intAttr("axis", 1)},
			inTypes: []gonnxproto.TensorProto_DataType{gonnxproto.TensorProto_FLOAT, gonnxproto.TensorProto_INT64}}
		for range outs {
			n.out = append(n.out, gonnxproto.TensorProto_FLOAT)
		}
		return n.model(t)
	}
	for _, c := range []struct {
		outs  int
		sizes []int64 // nil: equal parts
		want  string
	}{
		{4, nil, "a dimension of 6 in 4 equal parts"},
		{7, nil, "a dimension of 6 in 7 equal parts"},
		{2, []int64{6, 0}, "makes no empty tensors"},
		{2, []int64{-1, 7}, "makes no empty tensors"},
		{2, []int64{2, 3}, "sizes summing to 5"},
		{2, []int64{1, 2, 3}, "3 sizes for 2 outputs"},
	} {
		in, feeds := []string{"x"}, []*modelstore.Tensor{x}
		if c.sizes != nil {
			in, feeds = append(in, "s"), append(feeds, int64s(c.sizes...))
		}
		_, err := compileGo(t, model(c.outs, in...)).Run(context.Background(), feeds)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%d outputs, sizes %v: %v, want an error with %q", c.outs, c.sizes, err, c.want)
		}
	}
	// Opset 18's num_outputs: parts of ceil(6 / outputs), the last the
	// remainder, must add up to the dimension, as ONNX Runtime's must.
	for _, c := range []struct {
		outs int
		want string
	}{{4, "sizes summing to 8 of a dimension of 6"}, {5, "sizes summing to 10 of a dimension of 6"}, {7, "num_outputs 7 of a dimension of 6"}} {
		n := node{op: "Split", opset: 18, in: []string{"x"}, inTypes: []gonnxproto.TensorProto_DataType{gonnxproto.TensorProto_FLOAT},
			attrs: []*gonnxproto.AttributeProto{intAttr("axis", 1), intAttr("num_outputs", int64(c.outs))}}
		for range c.outs {
			n.out = append(n.out, gonnxproto.TensorProto_FLOAT)
		}
		_, err := compileGo(t, n.model(t)).Run(context.Background(), []*modelstore.Tensor{x})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("num_outputs %d: %v, want an error with %q", c.outs, err, c.want)
		}
	}
}

// Range refuses a delta of 0, a range of no elements, one past the memory
// bound and inputs of two types, before it allocates; none panics.
func TestRangeRefuses(t *testing.T) {
	i64 := gonnxproto.TensorProto_INT64
	s := compileGo(t, node{op: "Range", opset: 13, in: []string{"s", "l", "d"},
		inTypes: []gonnxproto.TensorProto_DataType{i64, i64, i64}, out: []gonnxproto.TensorProto_DataType{i64}}.model(t))
	scalar := func(v int64) *modelstore.Tensor {
		t := int64s(v)
		t.Shape = []int64{}
		return t
	}
	for _, c := range []struct {
		in   [3]int64
		want string
	}{
		{[3]int64{0, 10, 0}, "a delta of 0"},
		{[3]int64{5, 5, 1}, "makes no empty tensors"},
		{[3]int64{10, 0, 1}, "makes no empty tensors"},
		{[3]int64{0, 1 << 62, 1}, "would make"},
	} {
		_, err := s.Run(context.Background(), []*modelstore.Tensor{scalar(c.in[0]), scalar(c.in[1]), scalar(c.in[2])})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Range %v: %v, want an error with %q", c.in, err, c.want)
		}
	}
}
