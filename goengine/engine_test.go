package goengine

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	gonnxproto "github.com/advancedclimatesystems/gonnx/onnx"
	"google.golang.org/protobuf/proto"
	"gorgonia.org/tensor"

	"github.com/enclaveai/enclaveai/modelstore"
)

// readTestModel reads a model that `make models` generates.
func readTestModel(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "redis_tests", "models", name))
	if err != nil {
		t.Fatalf("%v (run `make models`)", err)
	}
	return b
}

func compile(t *testing.T, model []byte) (modelstore.EngineSession, error) {
	t.Helper()
	if err := modelstore.CheckModelBlob(model); err != nil {
		t.Fatal(err)
	}
	return Engine{}.Compile(modelstore.ModelSource{Data: model}, modelstore.SessionOptions{})
}

// A model with an operator the engine lacks is refused at Compile, with
// the operator named.
func TestRefusesUnknownOperator(t *testing.T) {
	_, err := compile(t, readTestModel(t, "unknown_op.onnx"))
	var ee *modelstore.EngineError
	if !errors.As(err, &ee) || !strings.Contains(ee.Msg, "unsupported operator NoSuchOperator") {
		t.Fatalf("got %v", err)
	}
}

// Each benchmark model compiles; linear gives its reference output.
func TestRunsLinear(t *testing.T) {
	for _, m := range []string{"linear.onnx", "mlp.onnx", "cnn.onnx", "transformer.onnx"} {
		s, err := compile(t, readTestModel(t, m))
		if err != nil {
			t.Fatalf("%s: %v", m, err)
		}
		s.Close()
	}
	s, err := compile(t, readTestModel(t, "linear.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// linear.onnx is y = x W + b with W = [[1..4]...]; see gen_models.py:
	// its reference input/output pair is checked by the black-box tests;
	// here, the shape and the error paths.
	x := &modelstore.Tensor{DType: modelstore.Float, Shape: []int64{2, 4}, Data: make([]byte, 32)}
	out, err := s.Run(context.Background(), []*modelstore.Tensor{x})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 1 || out[0].DType != modelstore.Float || len(out[0].Shape) != 2 || out[0].Shape[0] != 2 {
		t.Fatalf("got %+v", out[0])
	}
	if _, err := s.Run(context.Background(), nil); !errors.Is(err, modelstore.ErrInputCount) {
		t.Fatalf("no inputs: %v", err)
	}
	d := &modelstore.Tensor{DType: modelstore.Double, Shape: []int64{2, 4}, Data: make([]byte, 64)}
	if _, err := s.Run(context.Background(), []*modelstore.Tensor{d}); err == nil || !strings.Contains(err.Error(), "DOUBLE") {
		t.Fatalf("double input: %v", err)
	}
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	if _, err := s.Run(ctx, []*modelstore.Tensor{x}); err == nil || !strings.Contains(err.Error(), "terminated") {
		t.Fatalf("expired context: %v", err)
	}
	s.Close()
	if _, err := s.Run(context.Background(), []*modelstore.Tensor{x}); !errors.Is(err, modelstore.ErrSessionClosed) {
		t.Fatalf("closed: %v", err)
	}
}

// A run that panics inside gonnx (RNN fed inputs of rank 1 indexes past
// their shape; found by FuzzGoEngineOps) is an error, not the end of the
// process, and the model is quarantined: its operators may have left
// shared tensors half-written, so later runs are refused until it is
// stored again.
func TestPanicIsContained(t *testing.T) {
	model, inputs := fuzzModel("RNN", []byte("000"), []byte("0"), []byte("0"))
	s, err := Engine{}.Compile(modelstore.ModelSource{Data: model}, modelstore.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_, err = s.Run(context.Background(), inputs)
	var ee *modelstore.EngineError
	if !errors.As(err, &ee) || !strings.Contains(ee.Msg, "the run failed inside the engine: runtime error: index out of range") {
		t.Fatalf("first run: %v", err)
	}
	q, ok := s.(modelstore.Quarantiner)
	if !ok || q.Quarantined() == nil {
		t.Fatal("the session is not quarantined")
	}
	_, err = s.Run(context.Background(), inputs)
	if err == nil || !strings.Contains(err.Error(), "model execution failed: the model is quarantined: a run failed inside the pure-Go engine") {
		t.Fatalf("second run: %v", err)
	}
}

// An empty tensor is refused before an operator sees it: gorgonia's
// Softmax indexed it in a goroutine of its own, where the panic ended the
// process (FuzzGoEngineOps, testdata/fuzz/FuzzGoEngineOps/9e0ec01b6888b846).
func TestEmptyTensorRefused(t *testing.T) {
	model, inputs := fuzzModel("Softmax", []byte("0"), nil, []byte{2, 0})
	s, err := Engine{}.Compile(modelstore.ModelSource{Data: model}, modelstore.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Run(context.Background(), inputs); err == nil || !strings.Contains(err.Error(), "does not run empty tensors") {
		t.Fatalf("got %v", err)
	}
}

// An empty list is the one empty tensor an operator takes, as left out:
// a ReduceSum given empty axes, an initializer or fed, sums every element
// (as ONNX Runtime does: TestReduceEmptyAxesMatchONNXRuntime), or none
// with noop_with_empty_axes; a Squeeze given empty axes squeezes every
// dimension of 1, an Unsqueeze inserts none, a Split given empty sizes
// cuts equal parts (TestEmptyListsMatchONNXRuntime). An empty tensor the
// operator does not take as one (an empty x, a list of rank 2) is still
// refused. The engine refused every empty list.
func TestEmptyListsTakenAsLeftOut(t *testing.T) {
	i64, f32 := gonnxproto.TensorProto_INT64, gonnxproto.TensorProto_FLOAT
	x := &modelstore.Tensor{DType: modelstore.Int64, Shape: []int64{2, 3}, Data: int64s(1, 2, 3, 4, 5, 60).Data}
	empty := &gonnxproto.TensorProto{Name: "axes", DataType: int32(i64), Dims: []int64{0}}
	for _, c := range []struct {
		what string
		n    node
		in   []*modelstore.Tensor
		want *modelstore.Tensor
	}{
		{"an empty initializer", node{op: "ReduceSum", opset: 13, in: []string{"x", "axes"}, inTypes: []gonnxproto.TensorProto_DataType{i64},
			inits: []*gonnxproto.TensorProto{empty}, out: []gonnxproto.TensorProto_DataType{i64}},
			[]*modelstore.Tensor{x}, &modelstore.Tensor{DType: modelstore.Int64, Shape: []int64{1, 1}, Data: int64s(75).Data}},
		{"fed empty", node{op: "ReduceMax", opset: 18, in: []string{"x", "axes"}, inTypes: []gonnxproto.TensorProto_DataType{i64, i64},
			attrs: []*gonnxproto.AttributeProto{intAttr("keepdims", 1)}, out: []gonnxproto.TensorProto_DataType{i64}},
			[]*modelstore.Tensor{x, int64s()}, &modelstore.Tensor{DType: modelstore.Int64, Shape: []int64{1, 1}, Data: int64s(60).Data}},
		{"fed empty, noop_with_empty_axes", node{op: "ReduceMean", opset: 18, in: []string{"x", "axes"}, inTypes: []gonnxproto.TensorProto_DataType{i64, i64},
			attrs: []*gonnxproto.AttributeProto{intAttr("noop_with_empty_axes", 1)}, out: []gonnxproto.TensorProto_DataType{i64}},
			[]*modelstore.Tensor{x, int64s()}, x},
		{"Squeeze", node{op: "Squeeze", opset: 13, in: []string{"x", "axes"}, inTypes: []gonnxproto.TensorProto_DataType{i64, i64},
			out: []gonnxproto.TensorProto_DataType{i64}},
			[]*modelstore.Tensor{{DType: modelstore.Int64, Shape: []int64{1, 2, 1, 3}, Data: x.Data}, int64s()}, x},
		{"Split", node{op: "Split", opset: 13, in: []string{"x", "axes"}, inTypes: []gonnxproto.TensorProto_DataType{i64, i64},
			out: []gonnxproto.TensorProto_DataType{i64, i64}},
			[]*modelstore.Tensor{x, int64s()}, &modelstore.Tensor{DType: modelstore.Int64, Shape: []int64{1, 3}, Data: int64s(1, 2, 3).Data}},
		{"Unsqueeze", node{op: "Unsqueeze", opset: 13, in: []string{"x", "axes"}, inTypes: []gonnxproto.TensorProto_DataType{i64, i64},
			out: []gonnxproto.TensorProto_DataType{i64}}, []*modelstore.Tensor{x, int64s()}, x},
	} {
		out, err := compileGo(t, c.n.model(t)).Run(context.Background(), c.in)
		if err != nil || !slices.Equal(out[0].Shape, c.want.Shape) || !bytes.Equal(out[0].Data, c.want.Data) {
			t.Errorf("%s: %v %v, want %v", c.what, out, err, c.want)
		}
	}
	n := node{op: "ReduceSum", opset: 13, in: []string{"x", "axes"}, inTypes: []gonnxproto.TensorProto_DataType{f32, i64}, out: []gonnxproto.TensorProto_DataType{f32}}
	s := compileGo(t, n.model(t))
	for _, in := range [][]*modelstore.Tensor{
		{{DType: modelstore.Float, Shape: []int64{2, 0}}, int64s()},
		{{DType: modelstore.Float, Shape: []int64{2, 1}, Data: make([]byte, 8)}, {DType: modelstore.Int64, Shape: []int64{1, 0}}},
	} {
		if _, err := s.Run(context.Background(), in); err == nil || !strings.Contains(err.Error(), "does not run empty tensors") {
			t.Errorf("%v %v: %v", in[0].Shape, in[1].Shape, err)
		}
	}
}

// Tensors an operator would make past the bound are refused before the
// operator allocates them: a Go allocation that cannot be satisfied ends
// the process (in the enclave build, the server).
// Tensors each under the bound still add up past it over a run: 8 Relus of
// a 1 MB input hold 8 MB, refused under a 4 MB bound, run under 16 MB.
func TestRunBound(t *testing.T) {
	m := chain(t, "Relu", []int64{1, 250000}, 8)
	x := floatT(1, 250000)
	for _, c := range []struct {
		bound int64
		err   string
	}{
		{4 << 20, "Relu: the run's tensors would total 5000000 bytes, 5000000 with the other runs under way, past the engine's bound of 4194304 bytes"},
		{16 << 20, ""},
	} {
		s, err := Engine{MaxTensorBytes: func() int64 { return c.bound }}.Compile(modelstore.ModelSource{Data: m}, modelstore.SessionOptions{})
		if err != nil {
			t.Fatal(err)
		}
		out, err := s.Run(context.Background(), []*modelstore.Tensor{x})
		switch {
		case c.err == "" && (err != nil || len(out) != 1 || out[0] == nil):
			t.Errorf("bound %d: %v", c.bound, err)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("bound %d: %v, want %q", c.bound, err, c.err)
		}
		s.Close()
	}
}

// The bound holds for the runs under way together: a run that fits alone
// is refused while others hold most of it, and a run gives back what it
// made when it ends, refused or not.
func TestRunBoundSharedAcrossRuns(t *testing.T) {
	m := chain(t, "Relu", []int64{1, 250000}, 8) // makes 5,000,000 bytes
	x := floatT(1, 250000)
	s, err := Engine{MaxTensorBytes: func() int64 { return 16 << 20 }}.Compile(modelstore.ModelSource{Data: m}, modelstore.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	inFlight.Add(12 << 20) // other runs under way
	_, err = s.Run(context.Background(), []*modelstore.Tensor{x})
	inFlight.Add(-12 << 20)
	if err == nil || !strings.Contains(err.Error(), "with the other runs under way, past the engine's bound of 16777216 bytes") {
		t.Errorf("beside 12 MiB of other runs: %v", err)
	}
	if _, err := s.Run(context.Background(), []*modelstore.Tensor{x}); err != nil {
		t.Errorf("alone: %v", err)
	}
	if n := inFlight.Load(); n != 0 {
		t.Errorf("%d bytes still counted after the runs ended", n)
	}
}

func TestOutputBound(t *testing.T) {
	cases := []struct {
		name   string
		model  []byte
		inputs []*modelstore.Tensor
	}{
		{"ConstantOfShape", oneInt64Input(t, "ConstantOfShape"), []*modelstore.Tensor{int64s(100000, 100000)}},
		{"MatMul", twoFloatInputs(t, "MatMul"), []*modelstore.Tensor{floatT(100000, 1), floatT(1, 100000)}},
		{"Add", twoFloatInputs(t, "Add"), []*modelstore.Tensor{floatT(100000, 1), floatT(1, 100000)}},
	}
	for _, c := range cases {
		s, err := Engine{MaxTensorBytes: func() int64 { return 1 << 30 }}.Compile(modelstore.ModelSource{Data: c.model}, modelstore.SessionOptions{})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		_, err = s.Run(context.Background(), c.inputs)
		if err == nil || !strings.Contains(err.Error(), "would make a tensor of 10000000000 elements") || !strings.Contains(err.Error(), "past the engine's bound of 1073741824 bytes") {
			t.Errorf("%s: %v", c.name, err)
		}
		s.Close()
	}
	// Padding by attributes: Conv and MaxPool with pads of 100000 on a 2x2 input.
	for _, op := range []string{"Conv", "MaxPool"} {
		var inits []*modelstore.Tensor
		if op == "Conv" {
			inits = []*modelstore.Tensor{floatT(1, 1, 1, 1)}
		}
		m := oneNode(t, op, []int64{1, 1, 2, 2}, inits, ints("kernel_shape", 1, 1), ints("pads", 100000, 100000, 100000, 100000))
		s, err := Engine{}.Compile(modelstore.ModelSource{Data: m}, modelstore.SessionOptions{})
		if err != nil {
			t.Fatalf("%s: %v", op, err)
		}
		if _, err := s.Run(context.Background(), []*modelstore.Tensor{floatT(1, 1, 2, 2)}); err == nil ||
			!strings.Contains(err.Error(), "would make a tensor of 4000") {
			t.Errorf("%s: %v", op, err)
		}
		s.Close()
	}
	// Widening by attributes: an RNN of 2^24 hidden units for a batch of 1000.
	g := &gonnxproto.GraphProto{Name: "g", Node: []*gonnxproto.NodeProto{{OpType: "RNN", Input: []string{"x", "w", "r"}, Output: []string{"y"},
		Attribute: []*gonnxproto.AttributeProto{{Name: "hidden_size", Type: gonnxproto.AttributeProto_INT, I: 1 << 24}}}},
		Output: []*gonnxproto.ValueInfoProto{valueInfo("y", gonnxproto.TensorProto_FLOAT)}}
	for _, n := range []string{"x", "w", "r"} {
		g.Input = append(g.Input, valueInfo(n, gonnxproto.TensorProto_FLOAT))
	}
	rnn, _ := proto.Marshal(&gonnxproto.ModelProto{IrVersion: 8, OpsetImport: []*gonnxproto.OperatorSetIdProto{{Version: 13}}, Graph: g})
	rs, err := Engine{}.Compile(modelstore.ModelSource{Data: rnn}, modelstore.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rs.Run(context.Background(), []*modelstore.Tensor{floatT(1, 1000, 1), floatT(1, 1<<24, 1), floatT(1, 1, 1)}); err == nil ||
		!strings.Contains(err.Error(), "RNN would make a tensor of 16777216000 elements") {
		t.Errorf("RNN: %v", err)
	}
	rs.Close()
	// Under the bound the same model runs.
	s, err := Engine{}.Compile(modelstore.ModelSource{Data: twoFloatInputs(t, "MatMul")}, modelstore.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	out, err := s.Run(context.Background(), []*modelstore.Tensor{floatT(300, 1), floatT(1, 200)})
	if err != nil || len(out) != 1 || out[0].Shape[0] != 300 || out[0].Shape[1] != 200 {
		t.Fatalf("%v %v", out, err)
	}
}

func floatT(shape ...int64) *modelstore.Tensor {
	n := int64(1)
	for _, d := range shape {
		n *= d
	}
	return &modelstore.Tensor{DType: modelstore.Float, Shape: shape, Data: make([]byte, 4*n)}
}

func int64s(v ...int64) *modelstore.Tensor {
	b := make([]byte, 0, 8*len(v))
	for _, x := range v {
		b = binary.LittleEndian.AppendUint64(b, uint64(x))
	}
	return &modelstore.Tensor{DType: modelstore.Int64, Shape: []int64{int64(len(v))}, Data: b}
}

// twoFloatInputs is op(a, b) with FLOAT inputs of any shape; oneInt64Input
// op(s) with an INT64 input.
func twoFloatInputs(t *testing.T, op string) []byte {
	return graphModel(t, op, gonnxproto.TensorProto_FLOAT, "a", "b")
}

func oneInt64Input(t *testing.T, op string) []byte {
	return graphModel(t, op, gonnxproto.TensorProto_INT64, "s")
}

func graphModel(t *testing.T, op string, elem gonnxproto.TensorProto_DataType, names ...string) []byte {
	t.Helper()
	g := &gonnxproto.GraphProto{Name: "g", Node: []*gonnxproto.NodeProto{{OpType: op, Input: names, Output: []string{"y"}}},
		Output: []*gonnxproto.ValueInfoProto{valueInfo("y", gonnxproto.TensorProto_FLOAT)}}
	for _, n := range names {
		g.Input = append(g.Input, valueInfo(n, elem))
	}
	b, err := proto.Marshal(&gonnxproto.ModelProto{IrVersion: 8, OpsetImport: []*gonnxproto.OperatorSetIdProto{{Version: 13}}, Graph: g})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Range's length comes from its scalar inputs, of any numeric type.
func TestRangeBound(t *testing.T) {
	scalar := func(v any) tensor.Tensor { return tensor.New(tensor.FromScalar(v)) }
	for _, c := range []struct {
		in   []tensor.Tensor
		want int64
	}{
		{[]tensor.Tensor{scalar(int64(0)), scalar(int64(1e12)), scalar(int64(1))}, 1e12},
		{[]tensor.Tensor{scalar(float32(0)), scalar(float32(10)), scalar(float32(0.5))}, 20},
		{[]tensor.Tensor{scalar(int32(5)), scalar(int32(1)), scalar(int32(1))}, 0},
	} {
		if n, ok := outputElems("Range", c.in); !ok || n != c.want {
			t.Errorf("Range %v: %d %v, want %d", c.in, n, ok, c.want)
		}
	}
	if n, _ := outputElems("ConstantOfShape", []tensor.Tensor{tensor.New(tensor.WithBacking([]int64{1 << 40, 1 << 40}))}); n != math.MaxInt64 {
		t.Errorf("ConstantOfShape of 2^80 elements: %d, want the saturated bound", n)
	}
}

// An operator that could not finish before the run's deadline, even at
// workFactor times the measured rate, is refused before it starts; a
// small one runs.
func TestWorkBound(t *testing.T) {
	f32 := func(shape ...int) tensor.Tensor {
		return tensor.New(tensor.WithShape(shape...), tensor.Of(tensor.Float32))
	}
	conv := &conv{pads: []int{50, 50, 50, 50}}
	for _, c := range []struct {
		op   string
		impl any
		in   []tensor.Tensor
		work int64 // 0: not counted
	}{
		{"MatMul", nil, []tensor.Tensor{f32(100, 100), f32(100, 100)}, 1e6 + batchWork},
		{"MatMul", nil, []tensor.Tensor{f32(3, 100, 20), f32(20, 50)}, 3*100*20*50 + 3*batchWork},
		{"Gemm", nil, []tensor.Tensor{f32(100, 20), f32(20, 50)}, 100 * 20 * 50},
		{"Conv", conv, []tensor.Tensor{f32(1, 2, 10, 10), f32(8, 2, 3, 3)}, 8 * 111 * 111 * 2 * 9}, // spatialElems: (size + pads) / stride + 1, the kernel left out
		// Each input element times its group's kernels.
		// Each input plane meets each tap of its group's kernels: the
		// tap's cost, and at most its rows' and its elements'.
		{"ConvTranspose", &convTranspose{group: 1}, []tensor.Tensor{f32(1, 2, 100, 100), f32(2, 4, 3, 3)}, 2 * 4 * 9 * (tapWork + 100*rowWork + 100*100)},
		// One element a plane: 8000 multiply-adds, each a tap and a row.
		{"ConvTranspose", &convTranspose{group: 1}, []tensor.Tensor{f32(20, 20, 1), f32(20, 20, 1)}, 20 * 20 * 20 * (tapWork + rowWork + 1)},
		{"LSTM", nil, []tensor.Tensor{f32(5, 2, 10), f32(1, 64, 10), f32(1, 64, 16)}, 5*2*(640+1024) + 5*stepWork["LSTM"]},
		{"Relu", nil, []tensor.Tensor{f32(1000, 1000)}, 0},
	} {
		w, ok := opWork(c.op, c.impl, c.in)
		if ok != (c.work > 0) || w != c.work {
			t.Errorf("%s: work %d, %v; want %d", c.op, w, ok, c.work)
		}
		// At 1e6 a second, 10 ms allow 4e4 multiply-adds (workFactor 4).
		err := checkWork(c.op, c.impl, c.in, 10*time.Millisecond, rates{matMul: 1e6, conv: 1e6})
		if refused := c.work > 4e4; (err != nil) != refused {
			t.Errorf("%s (%d multiply-adds in 10 ms at 1e6/s): %v", c.op, c.work, err)
		}
	}
	// An integer MatMul (plain loops, mulInts) counts at the convolution's
	// rate, a float one at the matrix products'.
	for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Int32, tensor.Int64, tensor.Uint32, tensor.Uint64} {
		in := []tensor.Tensor{tensor.New(tensor.WithShape(100, 100), tensor.Of(dt)), tensor.New(tensor.WithShape(100, 100), tensor.Of(dt))}
		err := checkWork("MatMul", nil, in, 10*time.Millisecond, rates{matMul: 1e9, conv: 1e6})
		if refused := dt != tensor.Float32; (err != nil) != refused {
			t.Errorf("MatMul of %v (1e6 multiply-adds in 10 ms at 1e9/s, 1e6/s in loops): %v", dt, err)
		}
	}

	// Through a run: a Conv of 2e11 multiply-adds (as bounded) from a 40 KB input, with
	// 100 ms left, is refused at once.
	workRate() // measured now, not inside the run
	m := oneNode(t, "Conv", []int64{1, 1, 100, 100}, []*modelstore.Tensor{floatT(512, 1, 99, 99)},
		ints("kernel_shape", 99, 99), ints("pads", 50, 50, 50, 50))
	s, err := Engine{}.Compile(modelstore.ModelSource{Data: m}, modelstore.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = s.Run(ctx, []*modelstore.Tensor{floatT(1, 1, 100, 100)})
	if err == nil || !strings.Contains(err.Error(), "Conv would do 202736742912 multiply-adds: more than this engine can do in the") {
		t.Errorf("Conv in 100 ms: %v", err)
	}
	if d := time.Since(start); d > 100*time.Millisecond {
		t.Errorf("refused after %v: it should not have started", d)
	}
}
