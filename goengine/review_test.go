package goengine

import (
	"context"
	"encoding/base64"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	gonnxproto "github.com/advancedclimatesystems/gonnx/onnx"
	"google.golang.org/protobuf/proto"
	"gorgonia.org/tensor"

	"github.com/enclaveai/enclaveai/modelstore"
)

// The holes a review found in the cgo-free server (2026-12-07), each a
// model that ended the process: a panic in a goroutine gorgonia starts, a
// fatal out-of-memory, or a nil dereference (fatal inside an enclave,
// recovered outside it). docs/MODEL_VALIDATION.md lists them.

// reviewModels are the reviewer's models, as sent (base64 of the ONNX).
var reviewModels = map[string]string{
	// Reshape of x [1, 2] to the constant [0, 3, 0x5555555555555556], whose
	// product wraps to 2, then Softmax: its goroutines index out of range.
	"f2_reshape_wrap_softmax": "CAg6igEKEgoBeAoBcxIBciIHUmVzaGFwZQolCgFyEgF5IgdTb2Z0bWF4KhQKBGF4aXMY////////////AaABAhIXZjJfcmVzaGFwZV93cmFwX3NvZnRtYXgqFAgDEAc6CwAD1qrVqtWq1apVQgFzWhMKAXgSDgoMCAESCAoCCAEKAggCYgkKAXkSBAoCCAFCBAoAEA0=",
	// An initializer [3, 0x5555555555555556] of two float_data values.
	"f2c_init_wrap_softmax": "CAg6dwolCgF3EgF5IgdTb2Z0bWF4KhQKBGF4aXMY////////////AaABAhIVZjJjX2luaXRfd3JhcF9zb2Z0bWF4KhsIAwjWqtWq1arVqlUQASIIAACAPwAAAEBCAXdaDwoBeBIKCggIARIECgIIAWIJCgF5EgQKAggBQgQKABAN",
	// An initializer [262144, 65536] without data: gorgonia allocates 64 GiB.
	"f1_init_nodata": "CAg6SwoOCgF4CgF3EgF5IgNBZGQSDmYxX2luaXRfbm9kYXRhKg0IgIAQCICABBABQgF3Wg8KAXgSCgoICAESBAoCCAFiCQoBeRIECgIIAUIECgAQDQ==",
	// ConstantOfShape whose value is a TENSOR attribute without t.
	"f6b_constantofshape_nil_t": "CAg6aAojCgFzEgF5Ig9Db25zdGFudE9mU2hhcGUqCgoFdmFsdWWgAQQSGWY2Yl9jb25zdGFudG9mc2hhcGVfbmlsX3QqCggBEAc6AQJCAXNaDwoBeBIKCggIARIECgIIAWIJCgF5EgQKAggBQgQKABAN",
	// Conv strides [0] beside an empty ref_attr_name, which the sanitizer skipped.
	"f7_conv_strides0_ref": "CAg6bAojCgF4CgF3EgF5IgRDb252KhIKB3N0cmlkZXNAAKABB6oBAXMSFGY3X2NvbnZfc3RyaWRlczBfcmVmKhkIAQgBCAMQASIMAACAPwAAgD8AAIA/QgF3WgkKAXgSBAoCCAFiCQoBeRIECgIIAWIJCgF5EgQKAggBQgQKABAN",
}

// Each is refused at Compile, before gonnx decodes it.
func TestReviewModelsRefused(t *testing.T) {
	for name, b64 := range reviewModels {
		b, err := base64.StdEncoding.DecodeString(b64)
		if err != nil {
			t.Fatal(err)
		}
		_, err = Engine{}.Compile(modelstore.ModelSource{Data: b}, modelstore.SessionOptions{})
		if !errors.Is(err, modelstore.ErrModelUnsafe) && !errors.Is(err, modelstore.ErrModelTensorSize) {
			t.Errorf("%s: %v, want a refusal by the model checks", name, err)
		}
	}
}

// A Constant whose value attribute is not declared a TENSOR and carries
// none passes CheckModelBlob, but gonnx reads the attribute's tensor by
// its name and dereferences nil: the engine refuses it.
func TestConstantWithoutTensorRefused(t *testing.T) {
	for _, op := range []string{"Constant", "ConstantOfShape"} {
		var in []string
		if op == "ConstantOfShape" {
			in = []string{"x"}
		}
		m := &gonnxproto.ModelProto{IrVersion: 8, OpsetImport: []*gonnxproto.OperatorSetIdProto{{Version: 13}},
			Graph: &gonnxproto.GraphProto{Name: "g",
				Node: []*gonnxproto.NodeProto{{Name: "c", OpType: op, Input: in, Output: []string{"y"},
					Attribute: []*gonnxproto.AttributeProto{{Name: "value", Type: gonnxproto.AttributeProto_INT, I: 3}}}},
				Input:  []*gonnxproto.ValueInfoProto{valueInfo("x", gonnxproto.TensorProto_INT64)},
				Output: []*gonnxproto.ValueInfoProto{valueInfo("y", gonnxproto.TensorProto_FLOAT)}}}
		b, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		_, err = compile(t, b)
		if err == nil || !strings.Contains(err.Error(), `node "c" (`+op+`): attribute value carries no tensor`) {
			t.Errorf("%s: %v", op, err)
		}
	}
}

// A shape fed by a client whose product wraps past 2^64 to the input's
// size passes gorgonia's Reshape; the engine refuses the tensor it makes
// before the next operator indexes by its dims.
func TestWrappedShapeRefused(t *testing.T) {
	g := &gonnxproto.GraphProto{Name: "g",
		Node: []*gonnxproto.NodeProto{
			{OpType: "Reshape", Input: []string{"x", "s"}, Output: []string{"r"}},
			{OpType: "Relu", Input: []string{"r"}, Output: []string{"y"}}},
		Input:  []*gonnxproto.ValueInfoProto{valueInfo("x", gonnxproto.TensorProto_FLOAT), valueInfo("s", gonnxproto.TensorProto_INT64)},
		Output: []*gonnxproto.ValueInfoProto{valueInfo("y", gonnxproto.TensorProto_FLOAT)}}
	b, err := proto.Marshal(&gonnxproto.ModelProto{IrVersion: 8, OpsetImport: []*gonnxproto.OperatorSetIdProto{{Version: 13}}, Graph: g})
	if err != nil {
		t.Fatal(err)
	}
	s, err := compile(t, b)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_, err = s.Run(context.Background(), []*modelstore.Tensor{floatT(1, 2), int64s(3, 0x5555555555555556)})
	if err == nil || !strings.Contains(err.Error(), "output 0 has shape (3, 6148914691236517206), more than 2^63 elements") {
		t.Fatalf("got %v", err)
	}
	// The same tensor made directly, as gonnx makes an initializer's.
	wrapped := tensor.New(tensor.WithShape(3, 0x5555555555555556), tensor.WithBacking([]float32{1, 2}))
	if why := badShape(wrapped); !strings.Contains(why, "more than 2^63 elements") {
		t.Errorf("badShape of a wrapped shape: %q", why)
	}
	if why := badShape(tensor.New(tensor.FromScalar(float32(1)))); why != "" {
		t.Errorf("badShape of a scalar: %q", why)
	}
}

// Gather's output (a row of the data per index) is bounded: 8192 indices
// into a [1, 1048576] tensor asked for 32 GiB. Here 1024 indices into [1,
// 1024], 4 MiB, against a bound of 1 MiB.
func TestGatherBound(t *testing.T) {
	m := graphModel(t, "Gather", gonnxproto.TensorProto_FLOAT, "x", "i")
	g := &gonnxproto.ModelProto{}
	if err := proto.Unmarshal(m, g); err != nil {
		t.Fatal(err)
	}
	g.Graph.Input[1] = valueInfo("i", gonnxproto.TensorProto_INT64)
	m, _ = proto.Marshal(g)
	s, err := Engine{MaxTensorBytes: func() int64 { return 1 << 20 }}.Compile(modelstore.ModelSource{Data: m}, modelstore.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_, err = s.Run(context.Background(), []*modelstore.Tensor{floatT(1, 1024), int64s(make([]int64, 1024)...)})
	if err == nil || !strings.Contains(err.Error(), "Gather would make a tensor of 1048576 elements") {
		t.Fatalf("got %v", err)
	}
	if out, err := s.Run(context.Background(), []*modelstore.Tensor{floatT(1, 1024), int64s(0, 0)}); err != nil || len(out[0].Shape) != 2 || out[0].Shape[1] != 1024 {
		t.Fatalf("2 indices: %v %v", out, err)
	}
}

// Cast can make 4 times the bytes it is given (INT16 to DOUBLE): 200 MB
// from a client made 800 MB before the run's budget refused it, past
// maxmemory (review). Here 4 Mi INT16s (8 MiB) cast to 32 MiB under a
// bound of 16 MiB are refused before gonnx allocates the output; 1 Mi of
// them (8 MiB as DOUBLE) run.
func TestCastBound(t *testing.T) {
	cast := func(to gonnxproto.TensorProto_DataType) modelstore.EngineSession {
		t.Helper()
		g := &gonnxproto.GraphProto{Name: "g",
			Node: []*gonnxproto.NodeProto{{OpType: "Cast", Input: []string{"x"}, Output: []string{"y"},
				Attribute: []*gonnxproto.AttributeProto{intAttr("to", int64(to))}}},
			Input:  []*gonnxproto.ValueInfoProto{valueInfo("x", gonnxproto.TensorProto_INT16)},
			Output: []*gonnxproto.ValueInfoProto{valueInfo("y", to)}}
		m, err := proto.Marshal(&gonnxproto.ModelProto{IrVersion: 8, OpsetImport: []*gonnxproto.OperatorSetIdProto{{Version: 13}}, Graph: g})
		if err != nil {
			t.Fatal(err)
		}
		s, err := Engine{MaxTensorBytes: func() int64 { return 16 << 20 }}.Compile(modelstore.ModelSource{Data: m}, modelstore.SessionOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	int16s := func(n int64) *modelstore.Tensor {
		return &modelstore.Tensor{DType: modelstore.Int16, Shape: []int64{n}, Data: make([]byte, 2*n)}
	}
	toDouble := cast(gonnxproto.TensorProto_DOUBLE)
	defer toDouble.Close()
	x := int16s(4 << 20)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := toDouble.Run(context.Background(), []*modelstore.Tensor{x})
	runtime.ReadMemStats(&after)
	if err == nil || !strings.Contains(err.Error(), "Cast would make a tensor of 4194304 elements, past the engine's bound of 16777216 bytes") {
		t.Errorf("4 Mi INT16s to DOUBLE: %v", err)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n >= 16<<20 {
		t.Errorf("refused after allocating %d bytes, the output's 32 MiB among them", n)
	}
	if out, err := toDouble.Run(context.Background(), []*modelstore.Tensor{int16s(1 << 20)}); err != nil || out[0].DType != modelstore.Double {
		t.Errorf("1 Mi INT16s to DOUBLE: %v %v", out, err)
	}
}

// gonnx's Conv (1-D here) dilates the kernel and pads the input before it
// checks them: both count against the bound, and a dilated kernel longer
// than the padded input is refused before gonnx sees it.
func TestConvScratchBound(t *testing.T) {
	run := func(bound int64, x []int64, attrs ...*gonnxproto.AttributeProto) error {
		t.Helper()
		m := oneNode(t, "Conv", x, []*modelstore.Tensor{floatT(1, 1, 9)}, attrs...)
		s, err := Engine{MaxTensorBytes: func() int64 { return bound }}.Compile(modelstore.ModelSource{Data: m}, modelstore.SessionOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		_, err = s.Run(context.Background(), []*modelstore.Tensor{floatT(x...)})
		return err
	}
	// A kernel of 9 dilated by 2^17: 1 MiB floats (4 MiB) against 1 MiB.
	if err := run(1<<20, []int64{1, 1, 8}, ints("dilations", 1<<17)); err == nil || !strings.Contains(err.Error(), "Conv would make a tensor of 1048577 elements") {
		t.Errorf("dilated kernel: %v", err)
	}
	// Pads of 2^19 on each side: a padded copy of 2^20 floats.
	if err := run(1<<20, []int64{1, 1, 8}, ints("pads", 1<<19, 1<<19), ints("strides", 1<<20)); err == nil || !strings.Contains(err.Error(), "Conv would make a tensor of 1048584 elements") {
		t.Errorf("padded input: %v", err)
	}
	// Within the bound, a dilated kernel longer than the input.
	if err := run(1<<30, []int64{1, 1, 8}, ints("dilations", 2)); err == nil || !strings.Contains(err.Error(), "kernel larger than the padded input") {
		t.Errorf("dilated past the input: %v", err)
	}
	if err := run(1<<30, []int64{1, 1, 17}, ints("dilations", 2)); err != nil {
		t.Errorf("dilated to the input's length: %v", err)
	}
}

// MaxPool's loops visit only the taps inside the input, and its work
// (output elements times the window clipped to the input) is bounded by
// the run's deadline. A kernel of 2^31 with pads of 2^30 and strides of
// 2^31 on a 1x1 input (the sanitizer's limits) walked its whole window:
// 7 s a channel.
func TestMaxPoolWork(t *testing.T) {
	workRate()
	big := oneNode(t, "MaxPool", []int64{1, 4, 1, 1}, nil, ints("kernel_shape", 1<<31, 1<<31),
		ints("pads", 1<<30, 1<<30, 1<<30, 1<<30), ints("strides", 1<<31, 1<<31))
	s, err := compile(t, big)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	in := floatT(1, 4, 1, 1)
	in.Data = []byte{0, 0, 0x80, 0x3f, 0, 0, 0, 0x40, 0, 0, 0x40, 0x40, 0, 0, 0x80, 0x40} // 1, 2, 3, 4
	start := time.Now()
	out, err := s.Run(ctx, []*modelstore.Tensor{in})
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("a 1x1 output took %v", d)
	}
	if string(out[0].Data) != string(in.Data) {
		t.Errorf("got % x, want % x", out[0].Data, in.Data)
	}

	f32 := func(shape ...int) tensor.Tensor {
		return tensor.New(tensor.WithShape(shape...), tensor.Of(tensor.Float32))
	}
	p := &maxPool{kernel: []int{32, 32}, strides: []int{1, 1}, pads: []int{0, 0, 0, 0}, dilations: []int{1, 1}}
	in4 := []tensor.Tensor{f32(1, 8, 256, 256)}
	if w, ok := opWork("MaxPool", p, in4); !ok || w != 8*225*225*32*32 {
		t.Errorf("work %d %v", w, ok)
	}
	if err := checkWork("MaxPool", p, in4, 10*time.Millisecond, rates{matMul: 1e6, conv: 1e6}); err == nil ||
		!strings.Contains(err.Error(), "MaxPool would do 414720000 multiply-adds") {
		t.Errorf("checkWork: %v", err)
	}
	// The window clipped to the input: a kernel of 2^31 over 4x4.
	p = &maxPool{kernel: []int{1 << 31, 1 << 31}, strides: []int{1 << 31, 1 << 31}, pads: []int{1 << 30, 1 << 30, 1 << 30, 1 << 30}, dilations: []int{1, 1}}
	if w, ok := opWork("MaxPool", p, []tensor.Tensor{f32(1, 2, 4, 4)}); !ok || w != 2*16 {
		t.Errorf("clipped work %d %v", w, ok)
	}
}

// taps finds the taps of a window inside [0, size).
func TestTaps(t *testing.T) {
	for _, c := range []struct{ start, size, k, d, lo, hi int }{
		{0, 5, 3, 1, 0, 3},
		{-2, 5, 3, 1, 2, 3},
		{-3, 5, 3, 2, 2, 3},
		{3, 5, 3, 1, 0, 2},
		{-10, 5, 3, 1, 3, 3},
		{6, 5, 3, 1, 0, 0},
		{-(1 << 30), 1, 1 << 31, 1, 1 << 30, 1<<30 + 1},
	} {
		if lo, hi := taps(c.start, c.size, c.k, c.d); lo != c.lo || hi != c.hi {
			t.Errorf("taps(%d, %d, %d, %d) = %d, %d; want %d, %d", c.start, c.size, c.k, c.d, lo, hi, c.lo, c.hi)
		}
	}
}
