package goengine

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"math"
	"math/big"
	"math/rand"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	gonnxproto "github.com/advancedclimatesystems/gonnx/onnx"
	"github.com/advancedclimatesystems/gonnx/ops"
	"github.com/advancedclimatesystems/gonnx/ops/opset13"
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

// A Constant whose value attribute carries no tensor, declared a TENSOR
// or of another type (which passes CheckModelBlob), would make gonnx
// dereference nil, as it reads the attribute's tensor by its name: the
// engine refuses both.
func TestConstantWithoutTensorRefused(t *testing.T) {
	for _, c := range []struct {
		op   string
		ty   gonnxproto.AttributeProto_AttributeType
		want string
	}{
		{"Constant", gonnxproto.AttributeProto_INT, "attribute value is INT, where ONNX defines it as TENSOR"},
		{"ConstantOfShape", gonnxproto.AttributeProto_INT, "attribute value is INT, where ONNX defines it as TENSOR"},
		{"Constant", gonnxproto.AttributeProto_TENSOR, `attribute "value" is of type TENSOR but carries no tensor`},
		{"ConstantOfShape", gonnxproto.AttributeProto_TENSOR, `attribute "value" is of type TENSOR but carries no tensor`},
	} {
		op := c.op
		var in []string
		if op == "ConstantOfShape" {
			in = []string{"x"}
		}
		m := &gonnxproto.ModelProto{IrVersion: 8, OpsetImport: []*gonnxproto.OperatorSetIdProto{{Version: 13}},
			Graph: &gonnxproto.GraphProto{Name: "g",
				Node: []*gonnxproto.NodeProto{{Name: "c", OpType: op, Input: in, Output: []string{"y"},
					Attribute: []*gonnxproto.AttributeProto{{Name: "value", Type: c.ty, I: 3}}}},
				Input:  []*gonnxproto.ValueInfoProto{valueInfo("x", gonnxproto.TensorProto_INT64)},
				Output: []*gonnxproto.ValueInfoProto{valueInfo("y", gonnxproto.TensorProto_FLOAT)}}}
		b, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		_, err = Engine{}.Compile(modelstore.ModelSource{Data: b}, modelstore.SessionOptions{})
		if err == nil || !strings.Contains(err.Error(), `node "c" (`+op+`): `+c.want) {
			t.Errorf("%s, %s: %v, want %q", op, c.ty, err, c.want)
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
	s := compileGraph(t, g)
	_, err := s.Run(context.Background(), []*modelstore.Tensor{floatT(1, 2), int64s(3, 0x5555555555555556)})
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

// seq is a FLOAT tensor of this shape holding 1, 2, 3, ... (mod 7).
func seq(shape ...int64) *modelstore.Tensor {
	t := floatT(shape...)
	for i := range len(t.Data) / 4 {
		binary.LittleEndian.PutUint32(t.Data[4*i:], math.Float32bits(float32(1+i%7)))
	}
	return t
}

// float32s is a FLOAT tensor's values.
func float32s(t *modelstore.Tensor) []float32 {
	out := make([]float32, len(t.Data)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(t.Data[4*i:]))
	}
	return out
}

// MatMul broadcasts batch dimensions by index, not by a copy: gonnx
// repeated A [1, M, K] to [Bt, M, K] for B [Bt, K, 1], 4 GiB for [1, 1024,
// 1024] x [1024, 1024, 1], whose output is 4 MiB (review). Here the copy
// would be 8 MiB; the run makes its 64 KiB output and little else.
func TestMatMulBroadcastWithoutCopy(t *testing.T) {
	s, err := Engine{MaxTensorBytes: func() int64 { return 16 << 20 }}.Compile(modelstore.ModelSource{Data: twoFloatInputs(t, "MatMul")}, modelstore.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const m, k, bt = 128, 128, 128
	a, b := seq(1, m, k), seq(bt, k, 1)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	out, err := s.Run(context.Background(), []*modelstore.Tensor{a, b})
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n >= 4<<20 {
		t.Errorf("allocated %d bytes for a 64 KiB output", n)
	}
	if !slices.Equal(out[0].Shape, []int64{bt, m, 1}) {
		t.Fatalf("shape %v", out[0].Shape)
	}
	af, bf, got := float32s(a), float32s(b), float32s(out[0])
	for i := range bt {
		for r := range m {
			var want float32
			for j := range k {
				want += af[r*k+j] * bf[i*k+j]
			}
			if g := got[i*m+r]; g != want {
				t.Fatalf("out[%d, %d] = %v, want %v", i, r, g, want)
			}
		}
	}
}

// matMuls is gonnx's MatMul and ours.
func matMuls(t *testing.T) (gonnxOp, ours ops.Operator) {
	t.Helper()
	gonnxOp, err := opset13.GetOperator("MatMul")
	if err != nil {
		t.Fatal(err)
	}
	if ours, err = newMatMul(); err != nil {
		t.Fatal(err)
	}
	return gonnxOp, ours
}

// Where gonnx's MatMul works, ours gives what it gives, FLOAT and DOUBLE
// (gorgonia multiplies no integers: TestMatMulIntegers), broadcasting
// either operand's batch dimensions; it also
// takes matrices of one row and column, which gonnx slices to vectors and
// refuses.
func TestMatMulMatchesGonnx(t *testing.T) {
	gonnxOp, ours := matMuls(t)
	filled := func(dt tensor.Dtype, shape ...int) *tensor.Dense {
		x := tensor.New(tensor.WithShape(shape...), tensor.Of(dt))
		for i := range x.Shape().TotalSize() {
			var v any = float32(1 + i%5)
			if dt == tensor.Float64 {
				v = float64(1+i%5) / 3
			}
			if err := x.SetAt(v, unravel(i, shape)...); err != nil {
				t.Fatal(err)
			}
		}
		return x
	}
	for _, c := range [][2][]int{
		{{2, 3, 4}, {2, 4, 5}},
		{{1, 3, 4}, {6, 4, 2}},
		{{6, 3, 4}, {1, 4, 2}},
		{{2, 1, 3, 4}, {5, 4, 2}},
		{{3, 4}, {2, 4, 5}},
		{{2, 3, 4}, {4, 5}},
		{{2, 1, 2, 3}, {1, 3, 3, 2}},
		{{4}, {2, 4, 3}},
	} {
		for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Float64} {
			in := []tensor.Tensor{filled(dt, c[0]...), filled(dt, c[1]...)}
			want, err := gonnxOp.Apply(in)
			if err != nil {
				t.Fatalf("%v %v: gonnx: %v", c, dt, err)
			}
			got, err := ours.Apply(in)
			if err != nil {
				t.Fatalf("%v %v: %v", c, dt, err)
			}
			if !got[0].Shape().Eq(want[0].Shape()) || !reflect.DeepEqual(got[0].Data(), want[0].Data()) {
				t.Errorf("%v %v: %v %v, gonnx %v %v", c, dt, got[0].Shape(), got[0].Data(), want[0].Shape(), want[0].Data())
			}
		}
	}
	got, err := ours.Apply([]tensor.Tensor{filled(tensor.Float32, 3, 1, 1), filled(tensor.Float32, 1, 1, 2)})
	if err != nil || !got[0].Shape().Eq(tensor.Shape{3, 1, 2}) || !reflect.DeepEqual(got[0].Data(), []float32{1, 2, 2, 4, 3, 6}) {
		t.Errorf("[3, 1, 1] x [1, 1, 2]: %v %v", got, err)
	}
	if _, err := ours.Apply([]tensor.Tensor{filled(tensor.Float32, 2, 3, 4), filled(tensor.Float32, 3, 4, 5)}); err == nil || !strings.Contains(err.Error(), "do not broadcast") {
		t.Errorf("batches 2 and 3: %v", err)
	}
	if _, err := ours.Apply([]tensor.Tensor{filled(tensor.Float32, 2, 3, 4), filled(tensor.Float32, 2, 3, 5)}); err == nil || !strings.Contains(err.Error(), "do not multiply") {
		t.Errorf("K 4 and 3: %v", err)
	}
}

// An integer MatMul (INT32, INT64, UINT32, UINT64), which gorgonia does
// not multiply (every run failed with its "getFloatDense only handles
// floats"), gives what gonnx's DOUBLE MatMul gives on the same small
// values, at every rank: vectors, batches, broadcasting; and wraps around
// on overflow, as ONNX Runtime's does (ort_test.go compares them).
func TestMatMulIntegers(t *testing.T) {
	gonnxOp, ours := matMuls(t)
	filled := func(dt tensor.Dtype, seed int, shape ...int) *tensor.Dense {
		x := tensor.New(tensor.WithShape(shape...), tensor.Of(dt))
		for i := range x.Shape().TotalSize() {
			v := (i*7 + seed) % 11
			var e any
			switch dt {
			case tensor.Int32:
				e = int32(v)
			case tensor.Int64:
				e = int64(v)
			case tensor.Uint32:
				e = uint32(v)
			case tensor.Uint64:
				e = uint64(v)
			case tensor.Float64:
				e = float64(v)
			}
			if err := x.SetAt(e, unravel(i, shape)...); err != nil {
				t.Fatal(err)
			}
		}
		return x
	}
	for _, c := range [][2][]int{
		{{3, 4}, {4, 5}},
		{{2, 3, 4}, {2, 4, 5}},
		{{1, 3, 4}, {6, 4, 2}},
		{{2, 1, 3, 4}, {5, 4, 2}},
		{{2, 3, 4}, {4, 5}},
		{{2, 1, 2, 3}, {1, 3, 3, 2}},
		{{4}, {2, 4, 3}},
		{{2, 3, 4}, {4}},
		{{4}, {4, 3}},
		{{3, 4}, {4}},
		{{4}, {4}},
	} {
		want, err := gonnxOp.Apply([]tensor.Tensor{filled(tensor.Float64, 1, c[0]...), filled(tensor.Float64, 2, c[1]...)})
		if err != nil {
			t.Fatalf("%v: gonnx: %v", c, err)
		}
		for _, dt := range []tensor.Dtype{tensor.Int32, tensor.Int64, tensor.Uint32, tensor.Uint64} {
			got, err := ours.Apply([]tensor.Tensor{filled(dt, 1, c[0]...), filled(dt, 2, c[1]...)})
			if err != nil {
				t.Fatalf("%v %v: %v", c, dt, err)
			}
			if got[0].Dtype() != dt || !got[0].Shape().Eq(want[0].Shape()) {
				t.Fatalf("%v %v: %v %v, gonnx %v", c, dt, got[0].Dtype(), got[0].Shape(), want[0].Shape())
			}
			if g, w := asFloat64s(got[0]), asFloat64s(want[0]); !slices.Equal(g, w) {
				t.Errorf("%v %v: %v, gonnx %v", c, dt, g, w)
			}
		}
	}
	// Products past the type's range wrap around.
	wrap := []struct {
		a, b any
		want any
	}{
		{[]int32{1 << 16, 3}, []int32{1 << 16, -1 << 31}, int32(-1 << 31)},
		{[]int64{1 << 32, 1}, []int64{1 << 32, -1}, int64(-1)},
		{[]uint32{1<<32 - 1, 2}, []uint32{2, 1}, uint32(0)},
		{[]uint64{1<<63 + 1, 1}, []uint64{2, 1<<64 - 1}, uint64(1)},
	}
	for _, c := range wrap {
		got, err := ours.Apply([]tensor.Tensor{tensor.New(tensor.WithShape(1, 2), tensor.WithBacking(c.a)), tensor.New(tensor.WithShape(2, 1), tensor.WithBacking(c.b))})
		if err != nil {
			t.Fatal(err)
		}
		if v := reflect.ValueOf(got[0].Data()).Index(0).Interface(); v != c.want {
			t.Errorf("%v x %v: %v, want %v", c.a, c.b, v, c.want)
		}
	}
	if _, err := ours.Apply([]tensor.Tensor{filled(tensor.Int32, 0, 3), filled(tensor.Int64, 0, 3)}); err == nil || !strings.Contains(err.Error(), "operands of types int32 and int64") {
		t.Errorf("INT32 x INT64: %v", err)
	}
	if _, err := ours.Apply([]tensor.Tensor{filled(tensor.Int32, 0, 3), filled(tensor.Int32, 0, 4)}); err == nil || !strings.Contains(err.Error(), "do not multiply") {
		t.Errorf("[3] x [4]: %v", err)
	}
	// Two vectors make a scalar, which a run hands back as an INT32 of
	// no dimensions (it was an unsupported type: fromGonnx).
	s := compileGraph(t, &gonnxproto.GraphProto{Name: "g", Node: []*gonnxproto.NodeProto{{OpType: "MatMul", Input: []string{"a", "b"}, Output: []string{"y"}}},
		Input:  []*gonnxproto.ValueInfoProto{valueInfo("a", gonnxproto.TensorProto_INT32), valueInfo("b", gonnxproto.TensorProto_INT32)},
		Output: []*gonnxproto.ValueInfoProto{valueInfo("y", gonnxproto.TensorProto_INT32)}})
	v := &modelstore.Tensor{DType: modelstore.Int32, Shape: []int64{3}, Data: asBytes([]int32{1, 2, -3})}
	out, err := s.Run(context.Background(), []*modelstore.Tensor{v, v})
	if err != nil || out[0].DType != modelstore.Int32 || len(out[0].Shape) != 0 || !slices.Equal(fromBytes[int32](out[0].Data), []int32{14}) {
		t.Errorf("[3] x [3]: %v %v", out, err)
	}
}

// asFloat64s is a tensor's elements, or a scalar's element, as float64s.
func asFloat64s(x tensor.Tensor) []float64 {
	v := reflect.ValueOf(x.Data())
	if v.Kind() != reflect.Slice {
		v = reflect.Append(reflect.MakeSlice(reflect.SliceOf(v.Type()), 0, 1), v)
	}
	out := make([]float64, v.Len())
	for i := range out {
		switch e := v.Index(i); e.Kind() {
		case reflect.Int32, reflect.Int64:
			out[i] = float64(e.Int())
		case reflect.Uint32, reflect.Uint64:
			out[i] = float64(e.Uint())
		default:
			out[i] = e.Float()
		}
	}
	return out
}

// unravel is the coordinates of element i of a tensor of this shape.
func unravel(i int, shape []int) []int {
	c := make([]int, len(shape))
	for j := len(shape) - 1; j >= 0; j-- {
		c[j] = i % shape[j]
		i /= shape[j]
	}
	return c
}

// gonnx's binary operators repeat each input to the output's shape before
// they compute: Add of [5000, 1] and [1, 5000] made 300 MB for a 100 MB
// output (review). The copies count against the bound with the output:
// [1024, 1] + [1, 1024] makes 4 MiB and two copies of 4 MiB, refused
// under 8 MiB before anything is made, run under 16 MiB.
func TestBroadcastCopiesBound(t *testing.T) {
	add := func(bound int64) modelstore.EngineSession {
		s, err := Engine{MaxTensorBytes: func() int64 { return bound }}.Compile(modelstore.ModelSource{Data: twoFloatInputs(t, "Add")}, modelstore.SessionOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	in := []*modelstore.Tensor{floatT(1024, 1), floatT(1, 1024)}
	small := add(8 << 20)
	defer small.Close()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := small.Run(context.Background(), in)
	runtime.ReadMemStats(&after)
	if err == nil || !strings.Contains(err.Error(), "Add would make a tensor of 1048576 elements and copies of its inputs broadcast to its shape, 3145728 elements in all, past the engine's bound of 8388608 bytes") {
		t.Errorf("under 8 MiB: %v", err)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n >= 4<<20 {
		t.Errorf("refused after allocating %d bytes", n)
	}
	big := add(16 << 20)
	defer big.Close()
	if out, err := big.Run(context.Background(), in); err != nil || !slices.Equal(out[0].Shape, []int64{1024, 1024}) {
		t.Errorf("under 16 MiB: %v %v", out, err)
	}

	f32 := func(shape ...int) tensor.Tensor {
		return tensor.New(tensor.WithShape(shape...), tensor.Of(tensor.Float32))
	}
	gemm := func(transB int64) *gonnxproto.NodeProto {
		return &gonnxproto.NodeProto{Attribute: []*gonnxproto.AttributeProto{intAttr("transB", transB)}}
	}
	for _, c := range []struct {
		op   string
		node *gonnxproto.NodeProto
		in   []tensor.Tensor
		want int64
	}{
		{"Add", nil, []tensor.Tensor{f32(3, 4), f32(3, 4)}, 0},
		{"Mul", nil, []tensor.Tensor{f32(2, 3, 4), f32(4)}, 24},
		{"Sub", nil, []tensor.Tensor{f32(5, 1), f32(1, 6)}, 60},
		{"PRelu", nil, []tensor.Tensor{f32(8, 10), f32(10)}, 80},
		{"PRelu", nil, []tensor.Tensor{f32(8, 10), f32(8, 10)}, 0},
		{"Gemm", gemm(0), []tensor.Tensor{f32(7, 3), f32(3, 5), f32(5)}, 35},
		{"Gemm", gemm(1), []tensor.Tensor{f32(7, 3), f32(5, 3), f32(7, 5)}, 0},
		{"Gemm", gemm(0), []tensor.Tensor{f32(7, 3), f32(3, 5)}, 0},
		{"Relu", nil, []tensor.Tensor{f32(7, 3)}, 0},
	} {
		if n := broadcastCopies(c.op, c.node, c.in); n != c.want {
			var shapes []tensor.Shape
			for _, x := range c.in {
				shapes = append(shapes, x.Shape())
			}
			t.Errorf("%s %v: %d, want %d", c.op, shapes, n, c.want)
		}
	}
}

// No operator is given or makes a tensor of rank past maxRank (255, what
// a snapshot holds): an Unsqueeze of a client's 400,000 axes, then Squeeze
// (quadratic in the rank in gonnx), took 28 s past a 5 s deadline
// (review). The Unsqueeze is refused before it runs, as is a
// ConstantOfShape of rank 300, whose output broke the log and snapshots.
func TestRankBound(t *testing.T) {
	g := &gonnxproto.GraphProto{Name: "g",
		Node: []*gonnxproto.NodeProto{
			{OpType: "Unsqueeze", Input: []string{"x", "axes"}, Output: []string{"u"}},
			{OpType: "Squeeze", Input: []string{"u"}, Output: []string{"y"}}},
		Input:  []*gonnxproto.ValueInfoProto{valueInfo("x", gonnxproto.TensorProto_FLOAT), valueInfo("axes", gonnxproto.TensorProto_INT64)},
		Output: []*gonnxproto.ValueInfoProto{valueInfo("y", gonnxproto.TensorProto_FLOAT)}}
	s := compileGraph(t, g)
	axes := func(n int) *modelstore.Tensor {
		v := make([]int64, n)
		for i := range v {
			v[i] = int64(i)
		}
		return int64s(v...)
	}
	start := time.Now()
	_, err := s.Run(context.Background(), []*modelstore.Tensor{floatT(1), axes(300)})
	if err == nil || !strings.Contains(err.Error(), "Unsqueeze would make a tensor of rank 301, past the engine's bound of 255 dimensions") {
		t.Errorf("300 axes: %v", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("refused after %v", d)
	}
	if out, err := s.Run(context.Background(), []*modelstore.Tensor{floatT(1), axes(254)}); err != nil || len(out[0].Shape) != 0 {
		t.Errorf("254 axes: %v %v", out, err)
	}

	cos, err := compile(t, oneInt64Input(t, "ConstantOfShape"))
	if err != nil {
		t.Fatal(err)
	}
	defer cos.Close()
	ones := make([]int64, 300)
	for i := range ones {
		ones[i] = 1
	}
	if _, err := cos.Run(context.Background(), []*modelstore.Tensor{int64s(ones...)}); err == nil ||
		!strings.Contains(err.Error(), "ConstantOfShape would make a tensor of rank 300, past the engine's bound of 255 dimensions") {
		t.Errorf("ConstantOfShape of rank 300: %v", err)
	}
	// Made some other way (an initializer's dims, say): refused as an input.
	shape := make([]int, 256)
	for i := range shape {
		shape[i] = 1
	}
	if why := badShape(tensor.New(tensor.WithShape(shape...), tensor.Of(tensor.Float32))); why != "has rank 256, past the engine's bound of 255 dimensions" {
		t.Errorf("badShape of rank 256: %q", why)
	}
}

// Gather copies a block per index: gonnx's sliced and assigned per index,
// about 1.6 µs each, and made a []int of the indices, so 40M indices from
// a ConstantOfShape of 8 bytes took 34 s past a 5 s deadline and 1 GB
// under a maxmemory of 512 MB (review). Here 1M indices from the same
// model make a few allocations, not millions.
func TestGatherCost(t *testing.T) {
	g := &gonnxproto.GraphProto{Name: "g",
		Node: []*gonnxproto.NodeProto{
			{OpType: "ConstantOfShape", Input: []string{"s"}, Output: []string{"i"}, Attribute: []*gonnxproto.AttributeProto{{
				Name: "value", Type: gonnxproto.AttributeProto_TENSOR,
				T: &gonnxproto.TensorProto{Dims: []int64{1}, DataType: int32(gonnxproto.TensorProto_INT32), Int32Data: []int32{0}}}}},
			{OpType: "Gather", Input: []string{"x", "i"}, Output: []string{"y"}, Attribute: []*gonnxproto.AttributeProto{intAttr("axis", 0)}}},
		Input:  []*gonnxproto.ValueInfoProto{valueInfo("x", gonnxproto.TensorProto_FLOAT), valueInfo("s", gonnxproto.TensorProto_INT64)},
		Output: []*gonnxproto.ValueInfoProto{valueInfo("y", gonnxproto.TensorProto_FLOAT)}}
	s := compileGraph(t, g)
	const n = 1 << 20
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	out, err := s.Run(context.Background(), []*modelstore.Tensor{seq(4), int64s(n)})
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	if allocs := after.Mallocs - before.Mallocs; allocs > 10000 {
		t.Errorf("%d allocations for %d indices", allocs, n)
	}
	if got := float32s(out[0]); len(got) != n || got[0] != 1 || got[n-1] != 1 {
		t.Errorf("got %d values, first %v", len(got), got[:1])
	}
}

// Ours gives what gonnx's Gather gives, for data of several types and
// ranks, along each axis, with INT32 and INT64 indices of rank 0 to 2,
// negative ones among them; both refuse an index out of range.
func TestGatherMatchesGonnx(t *testing.T) {
	gonnxOp, err := opset13.GetOperator("Gather")
	if err != nil {
		t.Fatal(err)
	}
	fill := func(dt tensor.Dtype, shape ...int) *tensor.Dense {
		x := tensor.New(tensor.WithShape(shape...), tensor.Of(dt))
		for i := range x.Shape().TotalSize() {
			var v any
			switch dt {
			case tensor.Float32:
				v = float32(i) + 0.5
			case tensor.Int64:
				v = int64(i * 3)
			case tensor.Bool:
				v = i%3 == 0
			case tensor.Uint8:
				v = uint8(i)
			}
			if err := x.SetAt(v, unravel(i, shape)...); err != nil {
				t.Fatal(err)
			}
		}
		return x
	}
	indices := []tensor.Tensor{
		tensor.New(tensor.FromScalar(int64(1))),
		tensor.New(tensor.FromScalar(int32(-1))),
		tensor.New(tensor.WithShape(3), tensor.WithBacking([]int32{0, -1, 1})),
		tensor.New(tensor.WithShape(2, 2), tensor.WithBacking([]int64{1, 0, -2, 1})),
	}
	for _, dt := range []tensor.Dtype{tensor.Float32, tensor.Int64, tensor.Bool, tensor.Uint8} {
		for _, shape := range [][]int{{4}, {2, 3}, {3, 2, 4}} {
			for axis := -len(shape); axis < len(shape); axis++ {
				for _, ix := range indices {
					node := &gonnxproto.NodeProto{Attribute: []*gonnxproto.AttributeProto{intAttr("axis", int64(axis))}}
					if err := gonnxOp.Init(node); err != nil {
						t.Fatal(err)
					}
					ours, err := newGather()
					if err != nil {
						t.Fatal(err)
					}
					if err := ours.Init(node); err != nil {
						t.Fatal(err)
					}
					in := []tensor.Tensor{fill(dt, shape...), ix}
					want, err := gonnxOp.Apply(in)
					if err != nil {
						t.Fatalf("%v %v axis %d indices %v: gonnx: %v", dt, shape, axis, ix, err)
					}
					got, err := ours.Apply(in)
					if err != nil {
						t.Fatalf("%v %v axis %d indices %v: %v", dt, shape, axis, ix, err)
					}
					if !got[0].Shape().Eq(want[0].Shape()) || !reflect.DeepEqual(got[0].Data(), want[0].Data()) {
						t.Errorf("%v %v axis %d indices %v: %v %v, gonnx %v %v", dt, shape, axis, ix, got[0].Shape(), got[0].Data(), want[0].Shape(), want[0].Data())
					}
				}
			}
		}
	}
	ours, _ := newGather()
	if err := ours.Init(&gonnxproto.NodeProto{}); err != nil {
		t.Fatal(err)
	}
	for _, k := range []int64{2, -3} {
		in := []tensor.Tensor{fill(tensor.Float32, 2, 3), tensor.New(tensor.WithShape(2), tensor.WithBacking([]int64{0, k}))}
		if _, err := gonnxOp.Apply(in); err == nil {
			t.Errorf("index %d: gonnx took it", k)
		}
		if _, err := ours.Apply(in); err == nil || !strings.Contains(err.Error(), "out of range for a dimension of 2") {
			t.Errorf("index %d: %v", k, err)
		}
	}
}

// RNN, GRU and LSTM cost gonnx stepWork a step beyond their
// multiply-adds: an LSTM of hidden size 2 over 1M steps counted 3.2e7
// multiply-adds and took 340 s past a 5 s deadline (review). 200,000 steps
// with 500 ms left are refused before the first; 10 run.
func TestRecurrentStepWork(t *testing.T) {
	workRate()
	f32 := func(shape ...int) tensor.Tensor {
		return tensor.New(tensor.WithShape(shape...), tensor.Of(tensor.Float32))
	}
	for op, gates := range map[string]int{"RNN": 1, "GRU": 3, "LSTM": 4} {
		w, ok := opWork(op, nil, []tensor.Tensor{f32(1000, 1, 2), f32(1, gates*2, 2), f32(1, gates*2, 2)})
		if want := 1000*int64(gates*8) + 1000*stepWork[op]; !ok || w != want {
			t.Errorf("%s: work %d %v, want %d", op, w, ok, want)
		}
	}
	m := oneNode(t, "LSTM", nil, []*modelstore.Tensor{floatT(1, 8, 2), floatT(1, 8, 2)}, intAttr("hidden_size", 2))
	s, err := Engine{}.Compile(modelstore.ModelSource{Data: m}, modelstore.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	run := func(steps int64) error {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		_, err := s.Run(ctx, []*modelstore.Tensor{floatT(steps, 1, 2)})
		return err
	}
	start := time.Now()
	if err := run(200000); err == nil || !strings.Contains(err.Error(), "LSTM would do 50006400000 multiply-adds: more than this engine can do") {
		t.Errorf("200,000 steps: %v", err)
	}
	// Run, it would take minutes; the refusal took 110 ms once under
	// -race on a loaded machine (make test beside three builds).
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("refused after %v: it should not have started", d)
	}
	if err := run(10); err != nil {
		t.Errorf("10 steps: %v", err)
	}
}

// gonnx's RNN, GRU and LSTM reshape initial_h (and LSTM's initial_c) in
// place, from [1, batch, hidden] to [batch, hidden]: an initializer is
// shared by all runs of a model, and the second run of each failed ("MatMul
// requires both operands to be matrices"). Each run gives the first's
// outputs.
func TestRecurrentInitialStateReused(t *testing.T) {
	for op, gates := range map[string]int64{"RNN": 1, "GRU": 3, "LSTM": 4} {
		t.Run(op, func(t *testing.T) {
			s, err := compile(t, recurrentWithState(t, op, gates, "Y", "Y_h"))
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			x := seq(4, 1, 3)
			first, err := s.Run(context.Background(), []*modelstore.Tensor{x})
			if err != nil {
				t.Fatal(err)
			}
			for run := 1; run < 3; run++ {
				out, err := s.Run(context.Background(), []*modelstore.Tensor{x})
				if err != nil {
					t.Fatalf("run %d: %v", run, err)
				}
				for i := range out {
					if out[i] == nil || first[i] == nil {
						t.Fatalf("run %d output %d: none", run, i)
					}
					if !slices.Equal(out[i].Shape, first[i].Shape) || !slices.Equal(out[i].Data, first[i].Data) {
						t.Errorf("run %d output %d: %v %v, first run %v %v", run, i, out[i].Shape, float32s(out[i]), first[i].Shape, float32s(first[i]))
					}
				}
			}
		})
	}
}

// recurrentWithState is op (RNN, GRU or LSTM, of gates gates) of hidden
// size 2 over x [seq, 1, 3], its weights and initial state initializers,
// with outputs y and yh (named so).
func recurrentWithState(t *testing.T, op string, gates int64, y, yh string) []byte {
	t.Helper()
	init := func(name string, shape ...int64) *gonnxproto.TensorProto {
		f := make([]float32, modelstore.ShapeLen(shape))
		for i := range f {
			f[i] = 0.1 * float32(1+i%5)
		}
		return &gonnxproto.TensorProto{Name: name, Dims: shape, DataType: int32(gonnxproto.TensorProto_FLOAT), FloatData: f}
	}
	inits := []*gonnxproto.TensorProto{init("W", 1, 2*gates, 3), init("R", 1, 2*gates, 2), init("h0", 1, 1, 2)}
	in := []string{"x", "W", "R", "", "", "h0"}
	if op == "LSTM" {
		inits, in = append(inits, init("c0", 1, 1, 2)), append(in, "c0")
	}
	g := &gonnxproto.GraphProto{Name: "g", Initializer: inits,
		Node: []*gonnxproto.NodeProto{{OpType: op, Input: in, Output: []string{y, yh},
			Attribute: []*gonnxproto.AttributeProto{intAttr("hidden_size", 2)}}},
		Input:  []*gonnxproto.ValueInfoProto{valueInfo("x", gonnxproto.TensorProto_FLOAT)},
		Output: []*gonnxproto.ValueInfoProto{valueInfo(y, gonnxproto.TensorProto_FLOAT), valueInfo(yh, gonnxproto.TensorProto_FLOAT)}}
	m, err := proto.Marshal(&gonnxproto.ModelProto{IrVersion: 8, OpsetImport: []*gonnxproto.OperatorSetIdProto{{Version: 13}}, Graph: g})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// An LSTM's outputs may have any names: gonnx's looked its results up by
// the names Y, Y_h and Y_c, and under others the run's outputs were
// missing, without an error.
func TestLSTMOutputNames(t *testing.T) {
	run := func(y, yh string) []*modelstore.Tensor {
		t.Helper()
		s, err := compile(t, recurrentWithState(t, "LSTM", 4, y, yh))
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		out, err := s.Run(context.Background(), []*modelstore.Tensor{seq(4, 1, 3)})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	want, got := run("Y", "Y_h"), run("y", "h")
	for i := range want {
		if got[i] == nil || want[i] == nil || !slices.Equal(got[i].Shape, want[i].Shape) || !slices.Equal(got[i].Data, want[i].Data) {
			t.Errorf("output %d named otherwise: %v, named Y: %v", i, got[i], want[i])
		}
	}
}

// MatMul costs batchWork a matrix of its batch beyond its multiply-adds:
// [N, 1, 1] by itself counted N and took about 2 us each. [2048, 1, 1, 1]
// by [1, 2048, 1, 1], 4M batches (8 s here) from 16 KiB, with 300 ms
// left, is refused before the first; 16 batches run.
func TestMatMulBatchWork(t *testing.T) {
	workRate()
	s, err := compile(t, twoFloatInputs(t, "MatMul"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	run := func(n int64) error {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		_, err := s.Run(ctx, []*modelstore.Tensor{floatT(n, 1, 1, 1), floatT(1, n, 1, 1)})
		return err
	}
	start := time.Now()
	if err := run(2048); err == nil || !strings.Contains(err.Error(), "MatMul would do 33558626304 multiply-adds: more than this engine can do") {
		t.Errorf("4M batches: %v", err)
	}
	if d := time.Since(start); d > 300*time.Millisecond {
		t.Errorf("refused after %v: it should not have started", d)
	}
	if err := run(4); err != nil {
		t.Errorf("16 batches: %v", err)
	}
}

// compileGraph compiles a model of opset 13 around g; the session closes
// with the test.
func compileGraph(t *testing.T, g *gonnxproto.GraphProto) modelstore.EngineSession {
	t.Helper()
	b, err := proto.Marshal(&gonnxproto.ModelProto{IrVersion: 8, OpsetImport: []*gonnxproto.OperatorSetIdProto{{Version: 13}}, Graph: g})
	if err != nil {
		t.Fatal(err)
	}
	s, err := compile(t, b)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// An operator given an input of a type it does not take is refused at
// Compile, where the model declares the type or it follows from the
// declarations (a Cast's output): an INT32 Gemm, which gorgonia does not
// multiply and ONNX Runtime refuses, was taken and failed every run with
// "getFloatDense only handles floats"; the float-only operators (Relu,
// Softmax, Conv, ...) were taken and failed every run too. A run checks
// the types Compile could not know, with the same error.
func TestRefusesWrongInputTypes(t *testing.T) {
	type node struct {
		op    string
		elem  gonnxproto.TensorProto_DataType
		n     int // inputs
		attrs []*gonnxproto.AttributeProto
	}
	for _, c := range []node{
		{"Gemm", gonnxproto.TensorProto_INT32, 2, nil},
		{"Gemm", gonnxproto.TensorProto_INT64, 3, nil},
		{"Gemm", gonnxproto.TensorProto_UINT32, 2, nil},
		{"Gemm", gonnxproto.TensorProto_UINT64, 2, nil},
		{"Relu", gonnxproto.TensorProto_INT32, 1, nil},
		{"Sigmoid", gonnxproto.TensorProto_INT64, 1, nil},
		{"Tanh", gonnxproto.TensorProto_INT32, 1, nil},
		{"Sqrt", gonnxproto.TensorProto_INT64, 1, nil},
		{"Softmax", gonnxproto.TensorProto_INT32, 1, nil},
		{"ReduceMean", gonnxproto.TensorProto_UINT8, 1, nil},
		{"MaxPool", gonnxproto.TensorProto_INT32, 1, []*gonnxproto.AttributeProto{ints("kernel_shape", 2, 2)}},
		{"Neg", gonnxproto.TensorProto_UINT8, 1, nil},
		{"Conv", gonnxproto.TensorProto_INT32, 2, nil},
	} {
		names := []string{"a", "b", "c"}[:c.n]
		var in []*gonnxproto.ValueInfoProto
		for _, n := range names {
			in = append(in, valueInfo(n, c.elem))
		}
		g := &gonnxproto.GraphProto{Name: "g", Node: []*gonnxproto.NodeProto{{Name: "n", OpType: c.op, Input: names, Output: []string{"y"}, Attribute: c.attrs}},
			Input: in, Output: []*gonnxproto.ValueInfoProto{valueInfo("y", c.elem)}}
		b, err := proto.Marshal(&gonnxproto.ModelProto{IrVersion: 8, OpsetImport: []*gonnxproto.OperatorSetIdProto{{Version: 13}}, Graph: g})
		if err != nil {
			t.Fatal(err)
		}
		ty := gonnxproto.TensorProto_DataType_name[int32(c.elem)]
		// The types ONNX Runtime's CPU provider has each for.
		types := map[string]string{"ReduceMean": "FLOAT, DOUBLE, INT32, INT64", "MaxPool": "FLOAT, DOUBLE, INT8, UINT8",
			"Neg": "FLOAT, DOUBLE, INT8, INT16, INT32, INT64"}[c.op]
		if types == "" {
			types = "FLOAT, DOUBLE"
		}
		want := `pure-Go engine: node "n" (` + c.op + `): input 0 (a) is ` + ty + `, which this engine's ` + c.op + ` does not take (` + types + `)`
		if _, err := compile(t, b); err == nil || err.Error() != want {
			t.Errorf("%s %s: %v, want %s", c.op, ty, err, want)
		}
	}

	// The type follows from a Cast: the Gemm's inputs are declared nowhere.
	g := &gonnxproto.GraphProto{Name: "g", Node: []*gonnxproto.NodeProto{
		{Name: "cast", OpType: "Cast", Input: []string{"x"}, Output: []string{"i"}, Attribute: []*gonnxproto.AttributeProto{intAttr("to", int64(gonnxproto.TensorProto_INT64))}},
		{Name: "gemm", OpType: "Gemm", Input: []string{"i", "i"}, Output: []string{"y"}}},
		Input:  []*gonnxproto.ValueInfoProto{valueInfo("x", gonnxproto.TensorProto_FLOAT)},
		Output: []*gonnxproto.ValueInfoProto{valueInfo("y", gonnxproto.TensorProto_INT64)}}
	b, err := proto.Marshal(&gonnxproto.ModelProto{IrVersion: 8, OpsetImport: []*gonnxproto.OperatorSetIdProto{{Version: 13}}, Graph: g})
	if err != nil {
		t.Fatal(err)
	}
	want := `pure-Go engine: node "gemm" (Gemm): input 0 (i) is INT64, which this engine's Gemm does not take (FLOAT, DOUBLE)`
	if _, err := compile(t, b); err == nil || err.Error() != want {
		t.Errorf("Gemm after a Cast: %v, want %s", err, want)
	}

	// At run time, before gorgonia.
	op, err := getOperator("Gemm")
	if err != nil {
		t.Fatal(err)
	}
	if err := op.Init(g.Node[1]); err != nil {
		t.Fatal(err)
	}
	i := tensor.New(tensor.WithShape(2, 2), tensor.WithBacking([]int64{1, 2, 3, 4}))
	want = `node "gemm" (Gemm): input 0 (i) is INT64, which this engine's Gemm does not take (FLOAT, DOUBLE)`
	if _, err := op.ValidateInputs([]tensor.Tensor{i, i}); err == nil || err.Error() != want {
		t.Errorf("a run: %v, want %s", err, want)
	}
	f := tensor.New(tensor.WithShape(2, 2), tensor.WithBacking([]float32{1, 2, 3, 4}))
	if _, err := op.ValidateInputs([]tensor.Tensor{f, f}); err != nil {
		t.Errorf("a FLOAT run: %v", err)
	}
}

// An integer Div runs: the sanitizer's guard (modelstore's divguard.go)
// needs Where, and such a model was refused at Compile ("unsupported
// operator Where"). A zero divisor gives the dividend and the signed
// minimum divided by -1 gives itself, as the guard makes ONNX Runtime's
// do (ort_test.go compares them); every other quotient is Go's (and C's),
// truncated toward zero.
func TestIntegerDiv(t *testing.T) {
	a := []int64{7, -7, 7, -7, 0, 5, math.MinInt32, math.MinInt32, 9, math.MinInt64}
	b := []int64{2, 2, -2, -2, 3, 0, -1, 0, 1, -1}
	for _, ty := range []struct {
		elem gonnxproto.TensorProto_DataType
		dt   modelstore.DType
	}{
		{gonnxproto.TensorProto_INT32, modelstore.Int32}, {gonnxproto.TensorProto_INT64, modelstore.Int64},
		{gonnxproto.TensorProto_UINT32, modelstore.Uint32}, {gonnxproto.TensorProto_UINT64, modelstore.Uint64},
	} {
		s := compileGraph(t, &gonnxproto.GraphProto{Name: "g", Node: []*gonnxproto.NodeProto{{OpType: "Div", Input: []string{"a", "b"}, Output: []string{"y"}}},
			Input: []*gonnxproto.ValueInfoProto{valueInfo("a", ty.elem), valueInfo("b", ty.elem)}, Output: []*gonnxproto.ValueInfoProto{valueInfo("y", ty.elem)}})
		enc := func(v []int64) *modelstore.Tensor {
			out := &modelstore.Tensor{DType: ty.dt, Shape: []int64{int64(len(v))}}
			for _, x := range v {
				if ty.dt.Size() == 4 {
					out.Data = binary.LittleEndian.AppendUint32(out.Data, uint32(x))
				} else {
					out.Data = binary.LittleEndian.AppendUint64(out.Data, uint64(x))
				}
			}
			return out
		}
		// One run with every element, one broadcasting a divisor of
		// [2, 1] over [1, 10], 0 in its second row, and a scalar 0 (the
		// guard casts an unsigned divisor, and gonnx's Cast panicked on
		// an unsigned scalar).
		for _, c := range [][2]*modelstore.Tensor{
			{enc(a), enc(b)},
			{{DType: ty.dt, Shape: []int64{1, 10}, Data: enc(a).Data}, {DType: ty.dt, Shape: []int64{2, 1}, Data: enc([]int64{3, 0}).Data}},
			{enc(a), {DType: ty.dt, Shape: []int64{}, Data: enc([]int64{0}).Data}},
		} {
			out, err := s.Run(context.Background(), c[:])
			if err != nil {
				t.Fatalf("%s: %v", ty.dt, err)
			}
			divisors := b
			switch len(c[1].Shape) {
			case 0:
				divisors = make([]int64, len(a))
			case 2:
				divisors = append(slices.Repeat([]int64{3}, 10), slices.Repeat([]int64{0}, 10)...)
			}
			if want := int64(len(divisors)) * int64(ty.dt.Size()); int64(len(out[0].Data)) != want {
				t.Fatalf("%s: %d bytes, want %d", ty.dt, len(out[0].Data), want)
			}
			for i, d := range divisors {
				x := a[i%len(a)]
				var got, want int64
				switch ty.dt {
				case modelstore.Int32:
					got = int64(int32(binary.LittleEndian.Uint32(out[0].Data[4*i:])))
					want = int64(guardedDiv(int32(x), int32(d)))
				case modelstore.Int64:
					got = int64(binary.LittleEndian.Uint64(out[0].Data[8*i:]))
					want = guardedDiv(x, d)
				case modelstore.Uint32:
					got = int64(binary.LittleEndian.Uint32(out[0].Data[4*i:]))
					want = int64(guardedDiv(uint32(x), uint32(d)))
				case modelstore.Uint64:
					got = int64(binary.LittleEndian.Uint64(out[0].Data[8*i:]))
					want = int64(guardedDiv(uint64(x), uint64(d)))
				}
				if got != want {
					t.Errorf("%s %v: %d / %d = %d, want %d", ty.dt, c[1].Shape, x, d, got, want)
				}
			}
		}
	}
}

// guardedDiv is the sanitizer's integer division: a / 0 = a, and Go's
// MIN / -1 is MIN.
func guardedDiv[T int32 | int64 | uint32 | uint64](a, b T) T {
	if b == 0 {
		return a
	}
	return a / b
}

// Where picks X or Y by the condition, the three broadcast together, of
// any type, a scalar too.
func TestWhere(t *testing.T) {
	op := &where{}
	cond := tensor.New(tensor.WithShape(2, 1), tensor.WithBacking([]bool{true, false}))
	x := tensor.New(tensor.WithShape(3), tensor.WithBacking([]int64{1, 2, 3}))
	y := tensor.New(tensor.FromScalar(int64(-1)))
	out, err := op.Apply([]tensor.Tensor{cond, x, y})
	if err != nil {
		t.Fatal(err)
	}
	if !out[0].Shape().Eq(tensor.Shape{2, 3}) || !slices.Equal(out[0].Data().([]int64), []int64{1, 2, 3, -1, -1, -1}) {
		t.Errorf("got %v %v", out[0].Shape(), out[0].Data())
	}
	yf := tensor.New(tensor.WithShape(2, 1, 1), tensor.WithBacking([]float32{10, 20}))
	xf := tensor.New(tensor.WithShape(1, 2), tensor.WithBacking([]float32{1, 2}))
	c := tensor.New(tensor.WithShape(2), tensor.WithBacking([]bool{false, true}))
	out, err = op.Apply([]tensor.Tensor{c, xf, yf})
	if err != nil {
		t.Fatal(err)
	}
	if !out[0].Shape().Eq(tensor.Shape{2, 1, 2}) || !slices.Equal(out[0].Data().([]float32), []float32{10, 2, 20, 2}) {
		t.Errorf("got %v %v", out[0].Shape(), out[0].Data())
	}
	out, err = op.Apply([]tensor.Tensor{tensor.New(tensor.FromScalar(false)), tensor.New(tensor.FromScalar(int32(1))), tensor.New(tensor.FromScalar(int32(2)))})
	if err != nil {
		t.Fatal(err)
	}
	if !out[0].IsScalar() || out[0].Data() != int32(2) {
		t.Errorf("scalars: %v %v", out[0].Shape(), out[0].Data())
	}
	if _, err := op.Apply([]tensor.Tensor{cond, x, tensor.New(tensor.FromScalar(int32(1)))}); err == nil {
		t.Error("X INT64 and Y INT32 taken")
	}
	if _, err := op.Apply([]tensor.Tensor{tensor.New(tensor.WithShape(2), tensor.WithBacking([]bool{true, false})), x, x}); err == nil {
		t.Error("shapes [2] and [3] taken")
	}
}

// runOne compiles a one-node graph of op over inputs a, b, ... of elems'
// types, output y of elems[0]'s, and runs it on in.
func runOne(t *testing.T, op string, attrs []*gonnxproto.AttributeProto, elems []gonnxproto.TensorProto_DataType, in ...*modelstore.Tensor) (*modelstore.Tensor, error) {
	t.Helper()
	names := []string{"a", "b"}[:len(elems)]
	g := &gonnxproto.GraphProto{Name: "g", Node: []*gonnxproto.NodeProto{{OpType: op, Input: names, Output: []string{"y"}, Attribute: attrs}},
		Output: []*gonnxproto.ValueInfoProto{valueInfo("y", elems[0])}}
	for i, n := range names {
		g.Input = append(g.Input, valueInfo(n, elems[i]))
	}
	out, err := compileGraph(t, g).Run(context.Background(), in)
	if err != nil {
		return nil, err
	}
	return out[0], nil
}

// le is v as a tensor of shape of little-endian elements of dt.
func le(dt modelstore.DType, shape []int64, v ...int64) *modelstore.Tensor {
	out := &modelstore.Tensor{DType: dt, Shape: shape}
	for _, x := range v {
		out.Data = binary.LittleEndian.AppendUint64(out.Data, uint64(x))[:len(out.Data)+dt.Size()]
	}
	return out
}

// Neg, an integer ReduceMean and an INT8 or UINT8 MaxPool run in the
// pure-Go engine (ort_test.go compares them with ONNX Runtime), where
// models of them were refused: the signed minimum negates to itself, a
// scalar too; an integer mean wraps its sum around and truncates toward
// zero; a window's padding is the type's least value. An empty axis is
// refused, not a division by zero.
func TestNegIntegerMeanInt8Pool(t *testing.T) {
	I8, I32, U8 := gonnxproto.TensorProto_INT8, gonnxproto.TensorProto_INT32, gonnxproto.TensorProto_UINT8
	for _, c := range []struct {
		op    string
		attrs []*gonnxproto.AttributeProto
		elem  gonnxproto.TensorProto_DataType
		in    *modelstore.Tensor
		want  *modelstore.Tensor
	}{
		{"Neg", nil, I8, le(modelstore.Int8, []int64{4}, -128, 127, 0, -5), le(modelstore.Int8, []int64{4}, -128, -127, 0, 5)},
		{"Neg", nil, I8, le(modelstore.Int8, []int64{}, -128), le(modelstore.Int8, []int64{}, -128)},
		{"Neg", nil, I32, le(modelstore.Int32, []int64{2}, math.MinInt32, 7), le(modelstore.Int32, []int64{2}, math.MinInt32, -7)},
		{"ReduceMean", []*gonnxproto.AttributeProto{ints("axes", 1), intAttr("keepdims", 0)}, I32,
			le(modelstore.Int32, []int64{2, 3}, math.MaxInt32, math.MaxInt32, 2, -7, 1, -1), le(modelstore.Int32, []int64{2}, 0, -2)},
		{"ReduceMean", nil, I32, le(modelstore.Int32, []int64{2, 2}, 1, 2, 3, 5), le(modelstore.Int32, []int64{1, 1}, 2)},
		// Every axis, keepdims 0: a scalar, as ONNX defines it (it was [1]).
		{"ReduceMean", []*gonnxproto.AttributeProto{intAttr("keepdims", 0)}, I32, le(modelstore.Int32, []int64{2, 2}, 1, 2, 3, 5), le(modelstore.Int32, []int64{}, 2)},
		{"MaxPool", []*gonnxproto.AttributeProto{ints("kernel_shape", 2, 2), ints("pads", 1, 1, 1, 1)}, I8,
			le(modelstore.Int8, []int64{1, 1, 2, 2}, -128, -100, -3, -4),
			le(modelstore.Int8, []int64{1, 1, 3, 3}, -128, -100, -100, -3, -3, -4, -3, -3, -4)},
		{"MaxPool", []*gonnxproto.AttributeProto{ints("kernel_shape", 2, 2), ints("pads", 1, 1, 1, 1)}, U8,
			le(modelstore.Uint8, []int64{1, 1, 2, 2}, 0, 200, 3, 4),
			le(modelstore.Uint8, []int64{1, 1, 3, 3}, 0, 200, 200, 3, 200, 200, 3, 4, 4)},
	} {
		got, err := runOne(t, c.op, c.attrs, []gonnxproto.TensorProto_DataType{c.elem}, c.in)
		if err != nil || got.DType != c.want.DType || !slices.Equal(got.Shape, c.want.Shape) || string(got.Data) != string(c.want.Data) {
			t.Errorf("%s of %v: %v %v, want %v", c.op, c.in, got, err, c.want)
		}
	}

	// An empty axis: refused before the operator runs, and by the
	// operator itself.
	empty := &modelstore.Tensor{DType: modelstore.Int64, Shape: []int64{2, 0}}
	if _, err := runOne(t, "ReduceMean", nil, []gonnxproto.TensorProto_DataType{gonnxproto.TensorProto_INT64}, empty); err == nil ||
		!strings.Contains(err.Error(), "does not run empty tensors") {
		t.Errorf("an empty INT64 ReduceMean: %v", err)
	}
	rm := &reduce{op: "mean", types: sumTypes, keepDims: true}
	if _, err := rm.Apply([]tensor.Tensor{tensor.New(tensor.WithShape(2, 0), tensor.Of(tensor.Int64))}); err == nil ||
		!strings.Contains(err.Error(), "a mean over 0 elements") {
		t.Errorf("ReduceMean's Apply over an empty axis: %v", err)
	}
}

// cPow rounds x^n correctly, n an integer, against math/big's exact
// power (its reciprocal for n < 0, to 4096 bits), but where it is exactly
// halfway between two doubles; ln2 is ln 2 to 106 bits.
func TestPow(t *testing.T) {
	const ln2Digits = "0.69314718055994530941723212145817656807550013436025525412068000949339362196969471560586332699641868754200148102057068573368552023575813055703267075163507596193072757082837143519030703862389167347112335"
	want, _, err := big.ParseFloat(ln2Digits, 10, 300, big.ToNearestEven)
	if err != nil {
		t.Fatal(err)
	}
	got := new(big.Float).SetPrec(300).SetFloat64(ln2.hi)
	got.Add(got, big.NewFloat(ln2.lo))
	if d, _ := new(big.Float).Sub(got, want).Float64(); math.Abs(d) > 0x1p-106 {
		t.Errorf("ln2 is %g off", d)
	}

	r := rand.New(rand.NewSource(12))
	for i := range 20000 {
		x := r.NormFloat64() * 8
		if i%2 == 0 {
			x = float64(r.Intn(200) - 100)
		}
		if x == 0 {
			continue // special cases, C's and math.Pow's
		}
		n := r.Intn(61) - 30
		exact := new(big.Float).SetPrec(4096).SetFloat64(1)
		for range max(n, -n) {
			exact.Mul(exact, big.NewFloat(x))
		}
		if n < 0 {
			exact.Quo(new(big.Float).SetPrec(4096).SetFloat64(1), exact)
		}
		want, _ := exact.Float64()
		// Exactly halfway (9^17) it may round either way, as glibc's pow.
		if half := new(big.Float).Sub(exact, big.NewFloat(want)); half.Abs(half).Cmp(big.NewFloat(ulp(want)/2)) == 0 {
			continue
		}
		if cPow(x, float64(n)) != want {
			t.Fatalf("cPow(%v, %d) = %v, want %v", x, n, cPow(x, float64(n)), want)
		}
	}
}

// An integer Pow casts C's pow to the base's type as ONNX Runtime does
// (ort_test.go compares them): a result past the type, or NaN, is its
// minimum; a negative exponent truncates to 0 but for 1 and -1; x^2 and
// x^3 wrap around where ONNX Runtime multiplies (the exponent broadcast
// along x's last dimension), and pow's rounding elsewhere is glibc's,
// not Go's (8^(1/3.) is 2, where math.Pow gives 1.9999999999999998). A
// huge exponent costs no more than a small one, and the work is counted
// against the run's deadline.
func TestIntegerPow(t *testing.T) {
	I32, I64, F64 := gonnxproto.TensorProto_INT32, gonnxproto.TensorProto_INT64, gonnxproto.TensorProto_DOUBLE
	third := math.Float64bits(1.0 / 3)
	for _, c := range []struct {
		elems []gonnxproto.TensorProto_DataType
		x, y  *modelstore.Tensor
		want  *modelstore.Tensor
	}{
		{[]gonnxproto.TensorProto_DataType{I32, F64}, le(modelstore.Int32, []int64{3}, 8, 27, 1000),
			le(modelstore.Double, []int64{1}, int64(third)), le(modelstore.Int32, []int64{3}, 2, 3, 9)},
		{[]gonnxproto.TensorProto_DataType{I32, I32}, le(modelstore.Int32, []int64{6}, 0, 2, -1, 1, 2, 46341),
			le(modelstore.Int32, []int64{6}, -1, -1, -3, -5, 31, 2), le(modelstore.Int32, []int64{6}, math.MinInt32, 0, -1, 1, math.MinInt32, math.MinInt32)},
		{[]gonnxproto.TensorProto_DataType{I32, I32}, le(modelstore.Int32, []int64{3}, 46341, 65536, -3),
			le(modelstore.Int32, []int64{}, 2), le(modelstore.Int32, []int64{3}, -2147479015, 0, 9)},
		{[]gonnxproto.TensorProto_DataType{I32, I32}, le(modelstore.Int32, []int64{2, 1}, 46341, 1000),
			le(modelstore.Int32, []int64{1}, 3), le(modelstore.Int32, []int64{2, 1}, math.MinInt32, 1e9)},
		{[]gonnxproto.TensorProto_DataType{I64, I64}, le(modelstore.Int64, []int64{4}, 2, 1, -1, 3),
			le(modelstore.Int64, []int64{4}, math.MaxInt64, math.MaxInt64, math.MaxInt64, math.MinInt64),
			le(modelstore.Int64, []int64{4}, math.MinInt64, 1, 1, 0)},
	} {
		got, err := runOne(t, "Pow", nil, c.elems, c.x, c.y)
		if err != nil || got.DType != c.want.DType || !slices.Equal(got.Shape, c.want.Shape) || string(got.Data) != string(c.want.Data) {
			t.Errorf("%v ^ %v: %v %v, want %v", c.x, c.y, got, err, c.want)
		}
	}

	// Its work is counted (powWork): a deadline refuses a large one.
	x := tensor.New(tensor.WithShape(1000, 1000), tensor.Of(tensor.Int64))
	if w, ok := opWork("Pow", &pow{}, []tensor.Tensor{x, tensor.New(tensor.FromScalar(int64(2)))}); !ok || w != 1e6*powWork {
		t.Errorf("Pow's work: %d, %v", w, ok)
	}

	// The types ONNX Runtime has no Pow of are refused at Compile.
	for _, elems := range [][]gonnxproto.TensorProto_DataType{{gonnxproto.TensorProto_UINT8, I32}, {I32, gonnxproto.TensorProto_UINT8}} {
		g := &gonnxproto.GraphProto{Name: "g", Node: []*gonnxproto.NodeProto{{Name: "n", OpType: "Pow", Input: []string{"a", "b"}, Output: []string{"y"}}},
			Input:  []*gonnxproto.ValueInfoProto{valueInfo("a", elems[0]), valueInfo("b", elems[1])},
			Output: []*gonnxproto.ValueInfoProto{valueInfo("y", elems[0])}}
		b, err := proto.Marshal(&gonnxproto.ModelProto{IrVersion: 8, OpsetImport: []*gonnxproto.OperatorSetIdProto{{Version: 13}}, Graph: g})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := compile(t, b); err == nil || !strings.Contains(err.Error(), "is UINT8, which this engine's Pow does not take (INT32, INT64, FLOAT, DOUBLE)") {
			t.Errorf("Pow of %v: %v", elems, err)
		}
	}
}

// ulp is the gap between |v| and the next double away from 0.
func ulp(v float64) float64 {
	v = math.Abs(v)
	return math.Nextafter(v, math.Inf(1)) - v
}
