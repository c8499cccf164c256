package modelstore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// A few helpers to write protobuf by hand, as the tests below spell out
// ONNX messages field by field (numbers from onnx.proto).

func pbVarint(v uint64) []byte { return binary.AppendUvarint(nil, v) }

// pbTag encodes a field header.
func pbTag(num, wire int) []byte { return pbVarint(uint64(num)<<3 | uint64(wire)) }

// pbMsg is a length-delimited field whose payload is the parts concatenated.
func pbMsg(num int, parts ...[]byte) []byte {
	payload := bytes.Join(parts, nil)
	return append(append(pbTag(num, wireBytes), pbVarint(uint64(len(payload)))...), payload...)
}

func pbStr(num int, s string) []byte { return pbMsg(num, []byte(s)) }

func pbInt(num int, v int64) []byte { return append(pbTag(num, wireVarint), pbVarint(uint64(v))...) }

func pbPacked(num int, vals ...int64) []byte {
	var payload []byte
	for _, v := range vals {
		payload = append(payload, pbVarint(uint64(v))...)
	}
	return pbMsg(num, payload)
}

// ONNX messages.

func model(graph ...[]byte) []byte {
	return bytes.Join([][]byte{pbInt(1, 8), pbMsg(8, pbInt(2, 13)), pbMsg(7, graph...)}, nil)
}

// tensor is a TensorProto with unpacked dims.
func tensor(name string, dataType int64, dims []int64, extra ...[]byte) []byte {
	parts := [][]byte{pbStr(8, name), pbInt(2, dataType)}
	for _, d := range dims {
		parts = append(parts, pbInt(1, d))
	}
	return bytes.Join(append(parts, extra...), nil)
}

func raw(n int) []byte { return pbMsg(9, make([]byte, n)) }

func initializer(t []byte) []byte { return pbMsg(5, t) }

// constantNode is a Constant node whose value attribute holds t.
func constantNode(t []byte) []byte {
	return pbMsg(1, pbStr(2, "c"), pbStr(4, "Constant"), pbMsg(5, pbStr(1, "value"), pbInt(20, 4), pbMsg(5, t)))
}

// loopNode is a node whose attribute "body" is the graph made of parts.
func loopNode(body ...[]byte) []byte {
	return pbMsg(1, pbStr(4, "Loop"), pbMsg(5, pbStr(1, "body"), pbInt(20, 5), pbMsg(6, body...)))
}

var externalEntry = pbMsg(13, pbStr(1, "location"), pbStr(2, "/etc/passwd"))

func TestCheckModelBlobTestdata(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.onnx")
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		err = CheckModelBlob(b)
		switch filepath.Base(f) {
		case "external_data.onnx":
			if err != ErrModelExternalData {
				t.Errorf("%s: %v", f, err)
			}
		case "bad_size.onnx":
			if !errors.Is(err, ErrModelTensorSize) {
				t.Errorf("%s: %v", f, err)
			}
		default:
			if err != nil {
				t.Errorf("%s: %v", f, err)
			}
		}
	}
}

func TestCheckModelBlob(t *testing.T) {
	float22 := func(extra ...[]byte) []byte { return tensor("W", onnxFloat, []int64{2, 2}, extra...) }
	for _, tc := range []struct {
		name string
		blob []byte
		want error // nil, or the sentinel
	}{
		{"empty", nil, ErrModelEmpty},
		{"empty model", model(), nil},
		{"initializer ok", model(initializer(float22(raw(16)))), nil},
		{"initializer short", model(initializer(float22(raw(15)))), ErrModelTensorSize},
		{"initializer long", model(initializer(float22(raw(17)))), ErrModelTensorSize},
		{"packed dims ok", model(initializer(bytes.Join([][]byte{pbInt(2, onnxInt64), pbPacked(1, 3, 5), raw(120)}, nil))), nil},
		{"packed dims wrong", model(initializer(bytes.Join([][]byte{pbInt(2, onnxInt64), pbPacked(1, 3, 5), raw(112)}, nil))), ErrModelTensorSize},
		{"packed and unpacked dims", model(initializer(bytes.Join([][]byte{pbInt(2, onnxInt8), pbPacked(1, 3), pbInt(1, 5), raw(15)}, nil))), nil},
		{"scalar ok", model(initializer(tensor("s", onnxDouble, nil, raw(8)))), nil},
		{"scalar wrong", model(initializer(tensor("s", onnxDouble, nil, raw(4)))), ErrModelTensorSize},
		{"zero elements", model(initializer(tensor("z", onnxFloat, []int64{0, 7}, raw(0)))), nil},
		{"int4 packs two per byte", model(initializer(tensor("q", onnxInt4, []int64{3}, raw(2)))), nil},
		{"int4 wrong", model(initializer(tensor("q", onnxInt4, []int64{3}, raw(3)))), ErrModelTensorSize},
		{"complex128", model(initializer(tensor("c", onnxComplex128, []int64{2}, raw(32)))), nil},
		{"bool", model(initializer(tensor("b", onnxBool, []int64{5}, raw(4)))), ErrModelTensorSize},
		{"string raw_data is left to ORT", model(initializer(tensor("s", onnxString, []int64{2}, raw(3)))), nil},
		{"unknown type is left to ORT", model(initializer(tensor("u", 99, []int64{2}, raw(3)))), nil},
		{"typed data, no raw_data", model(initializer(tensor("f", onnxFloat, []int64{2}, pbMsg(4, make([]byte, 8))))), nil},
		{"negative dim", model(initializer(tensor("n", onnxFloat, []int64{-1, 4}, raw(16)))), ErrModelTensorSize},
		{"dims overflow", model(initializer(tensor("o", onnxFloat, []int64{1 << 40, 1 << 40}, raw(16)))), ErrModelTensorSize},
		{"size overflow", model(initializer(tensor("o", onnxDouble, []int64{1 << 62}, raw(16)))), ErrModelTensorSize},
		{"last raw_data wins", model(initializer(float22(raw(3), raw(16)))), nil},

		{"external by location", model(initializer(float22(pbInt(14, 1)))), ErrModelExternalData},
		{"external by entries", model(initializer(float22(externalEntry))), ErrModelExternalData},
		{"default location", model(initializer(float22(pbInt(14, 0), raw(16)))), nil},
		{"external in a Constant", model(constantNode(float22(externalEntry))), ErrModelExternalData},
		{"external in a Loop body", model(loopNode(loopNode(initializer(float22(pbInt(14, 1)))))), ErrModelExternalData},
		{"external in tensors attribute", model(pbMsg(1, pbMsg(5, pbMsg(10, float22(pbInt(14, 1)))))), ErrModelExternalData},
		{"external in graphs attribute", model(pbMsg(1, pbMsg(5, pbMsg(11, constantNode(float22(externalEntry)))))), ErrModelExternalData},
		{"external sparse values", model(pbMsg(15, pbMsg(1, float22(externalEntry)))), ErrModelExternalData},
		{"external sparse indices", model(pbMsg(15, pbMsg(2, tensor("i", onnxInt64, []int64{2}, pbInt(14, 1))))), ErrModelExternalData},
		{"external sparse attribute", model(pbMsg(1, pbMsg(5, pbMsg(22, pbMsg(1, float22(externalEntry)))))), ErrModelExternalData},
		{"external in a function", append(model(), pbMsg(25, pbStr(1, "f"), pbMsg(7, pbStr(4, "Constant"), pbMsg(5, pbMsg(5, float22(externalEntry)))))...), ErrModelExternalData},
		{"external in function attribute default", append(model(), pbMsg(25, pbMsg(11, pbMsg(5, float22(externalEntry))))...), ErrModelExternalData},
		{"external in training info", append(model(), pbMsg(20, pbMsg(2, initializer(float22(externalEntry))))...), ErrModelExternalData},
		{"wrong size in a subgraph", model(loopNode(constantNode(float22(raw(12))))), ErrModelTensorSize},

		{"unknown fields of every wire type", model(
			pbInt(99, 1), append(pbTag(98, wireFixed32), 1, 2, 3, 4), append(pbTag(97, wireFixed64), make([]byte, 8)...),
			pbStr(96, "x"), initializer(float22(raw(16), pbInt(1000, 5)))), nil},
		{"graph with a wrong wire type is an unknown field", append(pbInt(7, 3), model()...), nil},
		{"repeated graph fields", append(model(initializer(float22(raw(16)))), pbMsg(7, initializer(float22(raw(1))))...), ErrModelTensorSize},

		{"field number 0", []byte{0x00, 0x01}, ErrModelMalformed},
		{"group start", append(model(), pbTag(3, wireStart)...), ErrModelMalformed},
		{"group end (HTML's '<')", []byte("<html>"), ErrModelMalformed},
		{"wire type 6", append(model(), pbTag(3, 6)...), ErrModelMalformed},
		{"truncated tag", append(model(), 0x80), ErrModelMalformed},
		{"truncated varint", append(model(), pbTag(1, wireVarint)[0], 0xff), ErrModelMalformed},
		{"11-byte varint", append(append(model(), pbTag(1, wireVarint)...), bytes.Repeat([]byte{0xff}, 10)...), ErrModelMalformed},
		{"truncated fixed32", append(model(), append(pbTag(5, wireFixed32), 1, 2)...), ErrModelMalformed},
		{"truncated fixed64", append(model(), append(pbTag(5, wireFixed64), 1, 2)...), ErrModelMalformed},
		{"length past the end", append(model(), 0x3a, 0x05, 'a'), ErrModelMalformed},
		{"huge length", append(model(), append([]byte{0x3a}, pbVarint(1<<62)...)...), ErrModelMalformed},
		{"nested length past its parent", model(pbMsg(1, []byte{0x22, 0x10, 'a'})), ErrModelMalformed},
		{"truncated packed dims", model(initializer(bytes.Join([][]byte{pbInt(2, onnxFloat), pbMsg(1, []byte{0x80}), raw(4)}, nil))), ErrModelMalformed},
		{"field number too big", append(model(), pbVarint(1<<32|wireVarint)...), ErrModelMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckModelBlob(tc.blob)
			if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("CheckModelBlob = %v, want %v", err, tc.want)
			}
		})
	}
}

func TestCheckModelBlobMessages(t *testing.T) {
	err := CheckModelBlob(model(initializer(tensor("W", onnxFloat, []int64{4, 3}, raw(40)))))
	want := `model has a tensor whose raw_data size does not match its dims and type: tensor "W" has 40 bytes of raw_data, but dims [4 3] of float need 48`
	if err == nil || err.Error() != want {
		t.Errorf("got %q\nwant %q", err, want)
	}
	err = CheckModelBlob(model(initializer(tensor(strings.Repeat("n", 200), onnxFloat, []int64{-2}, raw(40)))))
	if err == nil || !strings.Contains(err.Error(), "has invalid dims [-2]") || strings.Count(err.Error(), "n") > 100 {
		t.Errorf("got %q", err)
	}
	err = CheckModelBlob([]byte("<html>"))
	if want := "Failed to load model because protobuf parsing failed. (group in field 7 at byte 0)"; err == nil || err.Error() != want {
		t.Errorf("got %q, want %q", err, want)
	}
	if err := CheckModelBlob(model(initializer(tensor("W", onnxFloat, nil, externalEntry)))); err == nil ||
		err.Error() != "Initializer tensors with external data is not allowed." {
		t.Errorf("got %q", err)
	}
}

// nestedGraphs is a model with n nested Loop bodies: depth 1 + 3n + 1.
func nestedGraphs(n int, innermost []byte) []byte {
	g := innermost
	for i := 0; i < n; i++ {
		g = loopNode(g)
	}
	return model(g)
}

func TestCheckModelBlobDepth(t *testing.T) {
	// model(1) graph(2) [node(3) attribute(4) graph(5)]... : 21 loops put
	// the innermost graph at depth 2+3*21 = 65 — one too many; an empty
	// innermost graph at 62 (20 loops) plus node+attribute is exactly 64.
	if err := CheckModelBlob(nestedGraphs(20, pbMsg(1, pbMsg(5)))); err != nil {
		t.Errorf("depth 64: %v", err)
	}
	if err := CheckModelBlob(nestedGraphs(20, pbMsg(1, pbMsg(5, pbMsg(6))))); !errors.Is(err, ErrModelTooDeep) {
		t.Errorf("depth 65: %v", err)
	}
	// Nested types count too: ValueInfo.type = seq(seq(seq(...))).
	typ := pbMsg(1, pbInt(1, onnxFloat))
	for i := 0; i < 40; i++ {
		typ = pbMsg(4, pbMsg(1, typ))
	}
	if err := CheckModelBlob(model(pbMsg(11, pbStr(1, "x"), pbMsg(2, typ)))); !errors.Is(err, ErrModelTooDeep) {
		t.Errorf("deep type: %v", err)
	}
	// A protobuf bomb is refused quickly, without exhausting the stack.
	bomb := deepModel(1_000_000)
	start := time.Now()
	if err := CheckModelBlob(bomb); !errors.Is(err, ErrModelTooDeep) {
		t.Errorf("bomb: %v", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("bomb took %v", d)
	}
}

func TestCheckModelBlobTruncations(t *testing.T) {
	b := readModel(t, "slow.onnx") // has a subgraph and initializers
	for n := 0; n < len(b); n++ {
		err := CheckModelBlob(b[:n])
		if err != nil && !errors.Is(err, ErrModelEmpty) && !errors.Is(err, ErrModelMalformed) {
			t.Fatalf("prefix %d: unexpected error %v", n, err)
		}
		if n == len(b)/2 && err == nil {
			t.Fatalf("the first half passed")
		}
	}
}

func TestCheckModelBlobAllocs(t *testing.T) {
	for _, name := range []string{"linear.onnx", "slow.onnx", "identity_all.onnx"} {
		b := readModel(t, name)
		if n := testing.AllocsPerRun(100, func() { CheckModelBlob(b) }); n != 0 {
			t.Errorf("%s: %v allocations per check", name, n)
		}
	}
}

func TestReadGraphIO(t *testing.T) {
	vi := func(name string, typ []byte) []byte { return pbMsg(11, pbStr(1, name), pbMsg(2, typ)) }
	out := func(name string, typ []byte) []byte { return pbMsg(12, pbStr(1, name), pbMsg(2, typ)) }
	tensorType := func(elem int64, shape ...[]byte) []byte {
		parts := [][]byte{pbInt(1, elem)}
		if shape != nil {
			parts = append(parts, pbMsg(2, shape...))
		}
		return pbMsg(1, parts...)
	}
	dimV := func(v int64) []byte { return pbMsg(1, pbInt(1, v)) }
	dimP := func(p string) []byte { return pbMsg(1, pbStr(2, p)) }
	blob := model(
		vi("a", tensorType(onnxFloat, dimP("N"), dimV(3), pbMsg(1))),
		vi("w", tensorType(onnxFloat, dimV(3))), // also an initializer
		initializer(tensor("w", onnxFloat, []int64{3}, raw(12))),
		vi("sp", tensorType(onnxFloat)), // also a sparse initializer
		pbMsg(15, pbMsg(1, tensor("sp", onnxFloat, []int64{1}, raw(4)))),
		vi("scalar", tensorType(onnxInt64, nil...)),
		vi("s0", tensorType(onnxBool, []byte{})),
		out("m", pbMsg(5, pbInt(1, onnxInt64), pbMsg(2, tensorType(onnxFloat)))),
		out("o", pbMsg(9, pbMsg(1, tensorType(onnxString, dimV(2))))),
		out("sq", pbMsg(4, pbMsg(1, pbMsg(4, pbMsg(1, tensorType(onnxUint8)))))),
		out("st", pbMsg(8, pbInt(1, onnxFloat), pbMsg(2, dimV(10)))),
		out("h", tensorType(onnxFloat16, dimV(2))),
		out("untyped", nil),
	)
	// A second occurrence of ModelProto.graph is merged into the first.
	blob = append(blob, pbMsg(7, vi("late", tensorType(onnxUint64, dimV(1))))...)
	if err := CheckModelBlob(blob); err != nil {
		t.Fatal(err)
	}
	ins, outs, err := readGraphIO(blob)
	if err != nil {
		t.Fatal(err)
	}
	wantIns := []IOInfo{
		{Name: "a", DType: Float, ElemType: "tensor(float)", Shape: []int64{-1, 3, -1}},
		{Name: "scalar", DType: Int64, ElemType: "tensor(int64)"},
		{Name: "s0", DType: Bool, ElemType: "tensor(bool)", Shape: []int64{}},
		{Name: "late", DType: Uint64, ElemType: "tensor(uint64)", Shape: []int64{1}},
	}
	wantOuts := []IOInfo{
		{Name: "m", ElemType: "map(int64,tensor(float))"},
		{Name: "o", ElemType: "optional(tensor(string))"},
		{Name: "sq", ElemType: "seq(seq(tensor(uint8)))"},
		{Name: "st", ElemType: "sparse_tensor(float)"},
		{Name: "h", ElemType: "tensor(float16)", Shape: []int64{2}},
		{Name: "untyped"},
	}
	if !reflect.DeepEqual(ins, wantIns) {
		t.Errorf("inputs\n got %+v\nwant %+v", ins, wantIns)
	}
	if !reflect.DeepEqual(outs, wantOuts) {
		t.Errorf("outputs\n got %+v\nwant %+v", outs, wantOuts)
	}
}

// FuzzCheckModelBlob: CheckModelBlob and readGraphIO never panic, and
// only ever fail with the package's sentinel errors.
func FuzzCheckModelBlob(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.onnx")
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		f.Add(b[:len(b)/2])
	}
	f.Add([]byte("<!DOCTYPE html><html></html>"))
	f.Add(deepModel(100))
	f.Add(nestedGraphs(3, constantNode(tensor("W", onnxFloat, []int64{2}, raw(8)))))
	// ErrModelUnsafe: a tensor whose values are not what its dims need, an
	// attribute without its message (review of 2026-12-07).
	sentinels := []error{ErrModelEmpty, ErrModelMalformed, ErrModelTooDeep, ErrModelExternalData, ErrModelTensorSize, ErrModelUnsafe}
	known := func(err error) bool {
		for _, s := range sentinels {
			if errors.Is(err, s) {
				return true
			}
		}
		return false
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		err := CheckModelBlob(b)
		if err != nil {
			if !known(err) {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		if _, _, err := readGraphIO(b); err != nil && !known(err) {
			t.Fatalf("readGraphIO: unexpected error %v", err)
		}
	})
}

// deepModel nests GraphProto.node -> NodeProto.attribute -> AttributeProto.g
// -> GraphProto... levels messages deep, inside one ModelProto.graph.
func deepModel(levels int) []byte {
	tags := []byte{1<<3 | 2, 5<<3 | 2, 6<<3 | 2}
	// size[i] is the payload size of the message at depth i+2 (the graph
	// is at depth 2); the innermost message is empty.
	size := make([]int, levels)
	for i := levels - 2; i >= 0; i-- {
		size[i] = 1 + len(binary.AppendUvarint(nil, uint64(size[i+1]))) + size[i+1]
	}
	b := appendTagLen([]byte{1 << 3, 8}, 7<<3|2, size[0])
	for i := 1; i < levels; i++ {
		b = appendTagLen(b, tags[(i-1)%3], size[i])
	}
	return b
}

func appendTagLen(b []byte, tag byte, n int) []byte {
	return binary.AppendUvarint(append(b, tag), uint64(n))
}

func readModel(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A tensor's values must be what its dims and type need, in whichever
// field they are (review, 2026-12-07): gonnx and gorgonia allocate the
// dims' element count for a tensor without values (a 77-byte model asked
// for 64 GiB), and gorgonia's element count wraps past 2^64 (dims [3,
// 0x5555555555555556] count 2, the two values of float_data).
func TestCheckModelBlobTensorValues(t *testing.T) {
	floats := func(n int) []byte { return pbMsg(4, make([]byte, 4*n)) }
	fixed32 := append(pbTag(4, wireFixed32), 0, 0, 0x80, 0x3f)
	for _, tc := range []struct {
		name string
		blob []byte
		want error // nil, or the sentinel
	}{
		{"no values", model(initializer(tensor("w", onnxFloat, []int64{1 << 18, 1 << 16}))), ErrModelUnsafe},
		{"no values in a Constant", model(constantNode(tensor("w", onnxFloat, []int64{1 << 18, 1 << 16}))), ErrModelUnsafe},
		{"no values, unknown type", model(initializer(tensor("u", 0, []int64{1 << 30}))), ErrModelUnsafe},
		{"no values, string", model(initializer(tensor("s", onnxString, []int64{1 << 30}))), ErrModelUnsafe},
		{"no values, no elements", model(initializer(tensor("z", onnxFloat, []int64{0, 1 << 40}))), nil},
		{"no values, sparse values", model(pbMsg(15, pbMsg(1, tensor("v", onnxFloat, []int64{1 << 30})))), ErrModelUnsafe},
		{"no values in a Loop body", model(loopNode(initializer(tensor("w", onnxFloat, []int64{4})))), ErrModelUnsafe},
		{"float_data wraps", model(initializer(tensor("w", onnxFloat, []int64{3, 0x5555555555555556}, floats(2)))), ErrModelTensorSize},
		{"float_data wraps in a Constant", model(constantNode(tensor("w", onnxFloat, []int64{3, 0x5555555555555556}, floats(2)))), ErrModelTensorSize},
		{"int64_data wraps", model(initializer(tensor("w", onnxInt64, []int64{3, 0x5555555555555556}, pbPacked(7, 1, 2)))), ErrModelTensorSize},
		{"past 2^63 beside a 0", model(initializer(tensor("w", onnxFloat, []int64{0, 1 << 62, 4}))), ErrModelTensorSize},
		{"float_data ok", model(initializer(tensor("w", onnxFloat, []int64{2, 3}, floats(6)))), nil},
		{"float_data unpacked", model(initializer(tensor("w", onnxFloat, []int64{2}, fixed32, fixed32))), nil},
		{"float_data short", model(initializer(tensor("w", onnxFloat, []int64{2, 3}, floats(5)))), ErrModelUnsafe},
		{"float_data long", model(initializer(tensor("w", onnxFloat, []int64{2, 3}, floats(7)))), ErrModelUnsafe},
		{"float_data cut", model(initializer(tensor("w", onnxFloat, []int64{1}, pbMsg(4, make([]byte, 5))))), ErrModelMalformed},
		{"complex64 takes two floats", model(initializer(tensor("c", onnxComplex64, []int64{3}, floats(6)))), nil},
		{"int32_data ok", model(initializer(tensor("i", onnxInt8, []int64{3}, pbPacked(5, 1, 300, -1)))), nil},
		{"int32_data short", model(initializer(tensor("i", onnxInt32, []int64{4}, pbPacked(5, 1, 2)))), ErrModelUnsafe},
		{"int4 packs two per int32", model(initializer(tensor("q", onnxInt4, []int64{3}, pbPacked(5, 1, 2)))), nil},
		{"int64_data ok", model(initializer(tensor("s", onnxInt64, []int64{3}, pbPacked(7, 0, 3, -1)))), nil},
		{"int64_data unpacked", model(initializer(tensor("s", onnxInt64, []int64{2}, pbInt(7, 5), pbInt(7, 6)))), nil},
		{"int64_data short", model(initializer(tensor("s", onnxInt64, []int64{1 << 20}, pbPacked(7, 1)))), ErrModelUnsafe},
		{"double_data ok", model(initializer(tensor("d", onnxDouble, []int64{2}, pbMsg(10, make([]byte, 16))))), nil},
		{"double_data short", model(initializer(tensor("d", onnxDouble, []int64{3}, pbMsg(10, make([]byte, 16))))), ErrModelUnsafe},
		{"uint64_data for uint32", model(initializer(tensor("u", onnxUint32, []int64{2}, pbPacked(11, 1, 2)))), nil},
		{"uint64_data short", model(initializer(tensor("u", onnxUint64, []int64{3}, pbPacked(11, 1, 2)))), ErrModelUnsafe},
		{"string_data ok", model(initializer(tensor("s", onnxString, []int64{2}, pbStr(6, "a"), pbStr(6, "")))), nil},
		{"string_data short", model(initializer(tensor("s", onnxString, []int64{3}, pbStr(6, "a")))), ErrModelUnsafe},
		{"values in another type's field", model(initializer(tensor("w", onnxFloat, []int64{2}, pbPacked(7, 1, 2)))), ErrModelUnsafe},
		{"values in two fields", model(initializer(tensor("w", onnxFloat, []int64{2}, floats(2), pbPacked(7, 1, 2)))), ErrModelUnsafe},
		{"raw_data and float_data", model(initializer(tensor("w", onnxFloat, []int64{2}, raw(8), floats(2)))), ErrModelUnsafe},
		{"unknown type, one value per element", model(initializer(tensor("u", 0, []int64{2}, floats(2)))), nil},
		{"unknown type, too few values", model(initializer(tensor("u", 0, []int64{1 << 30}, floats(2)))), ErrModelUnsafe},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckModelBlob(tc.blob)
			if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("CheckModelBlob = %v, want %v", err, tc.want)
			}
		})
	}
}

// An attribute's value is what it carries: ref_attr_name (a function
// caller's attribute) only in a function body, where the sanitizer skips
// it, and a message-typed attribute carries its message (review,
// 2026-12-07: Conv strides [0] beside an empty ref_attr_name passed every
// rule; a Constant's TENSOR value without t is a nil dereference in gonnx).
func TestCheckModelBlobAttributes(t *testing.T) {
	ref := pbStr(21, "s")
	emptyRef := pbMsg(21)
	conv := func(attr ...[]byte) []byte {
		return pbMsg(1, pbStr(3, "c1"), pbStr(4, "Conv"), pbStr(1, "x"), pbStr(1, "w"), pbStr(2, "y"), pbMsg(5, attr...))
	}
	function := func(node []byte) []byte {
		return append(model(), pbMsg(25, pbStr(1, "f"), pbStr(10, "local"), node)...)
	}
	fnNode := func(node []byte) []byte { return append(pbTag(7, wireBytes), node[1:]...) } // a FunctionProto's node is field 7
	for _, tc := range []struct {
		name string
		blob []byte
		want string // "" passes
	}{
		{"ref in a graph node", model(conv(pbStr(1, "strides"), pbInt(20, attrInts), pbPacked(8, 0), emptyRef)), `node "c1" (Conv): attribute "strides" has ref_attr_name`},
		{"named ref in a graph node", model(conv(pbStr(1, "strides"), pbInt(20, attrInts), ref)), "has ref_attr_name"},
		{"ref in a Loop body", model(loopNode(conv(pbStr(1, "strides"), pbInt(20, attrInts), ref))), "has ref_attr_name"},
		{"ref in a function body", function(fnNode(conv(pbStr(1, "strides"), pbInt(20, attrInts), ref))), ""},
		{"ref in a subgraph of a function body", function(fnNode(loopNode(conv(pbStr(1, "strides"), pbInt(20, attrInts), ref)))), ""},
		{"TENSOR without t", model(pbMsg(1, pbStr(4, "Constant"), pbStr(2, "y"), pbMsg(5, pbStr(1, "value"), pbInt(20, attrTensor)))), `(Constant): attribute "value" is of type TENSOR but carries no tensor (t)`},
		{"TENSOR with t", model(constantNode(tensor("v", onnxFloat, []int64{1}, raw(4)))), ""},
		{"GRAPH without g", model(pbMsg(1, pbStr(4, "If"), pbMsg(5, pbStr(1, "then_branch"), pbInt(20, attrGraph)))), "is of type GRAPH but carries no graph (g)"},
		{"SPARSE_TENSOR without sparse_tensor", model(pbMsg(1, pbStr(4, "Constant"), pbMsg(5, pbStr(1, "sparse_value"), pbInt(20, 11 /* SPARSE_TENSOR */)))), "is of type SPARSE_TENSOR"},
		{"TYPE_PROTO without tp", model(pbMsg(1, pbStr(4, "X"), pbMsg(5, pbStr(1, "t"), pbInt(20, 13 /* TYPE_PROTO */)))), "is of type TYPE_PROTO"},
		{"INTS without ints (an empty list)", model(conv(pbStr(1, "strides"), pbInt(20, attrInts))), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckModelBlob(tc.blob)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (!errors.Is(err, ErrModelUnsafe) || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("CheckModelBlob = %v, want %q", err, tc.want)
			}
		})
	}
}
