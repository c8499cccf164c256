//go:build cgo && !noort

package modelstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The crash regressions in testdata/crash are written by
// `/usr/bin/python3 fuzzmodels/regressions.py modelstore/testdata/crash`
// (make test runs it); index.json says what each must give.

type crashCase struct {
	Expect string `json:"expect"` // refused, guarded or clean
	Stage  string `json:"stage"`
	Signal string `json:"signal"`
	Feeds  []struct {
		Name   string
		Type   string
		Shape  []int64
		Values []any
	} `json:"feeds"`
	Timeout bool `json:"timeout"`
}

func (c *crashCase) UnmarshalJSON(b []byte) error {
	type plain crashCase
	var p struct {
		plain
		Feeds [][]json.RawMessage `json:"feeds"`
	}
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	*c = crashCase(p.plain)
	c.Feeds = nil
	for _, f := range p.Feeds {
		var e struct {
			Name   string
			Type   string
			Shape  []int64
			Values []any
		}
		if len(f) != 4 {
			return errors.New("a feed has 4 fields")
		}
		for i, dst := range []any{&e.Name, &e.Type, &e.Shape, &e.Values} {
			if err := json.Unmarshal(f[i], dst); err != nil {
				return err
			}
		}
		c.Feeds = append(c.Feeds, e)
	}
	return nil
}

func crashCases(t *testing.T) map[string]crashCase {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "crash", "index.json"))
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]crashCase{}
	if err := json.Unmarshal(b, &cases); err != nil {
		t.Fatal(err)
	}
	return cases
}

// TestSanitizeCrashModels: every model that crashed ONNX Runtime is refused
// with ErrModelUnsafe, or has its division guarded; none reaches ORT as is.
func TestSanitizeCrashModels(t *testing.T) {
	cases := crashCases(t)
	if len(cases) < 30 {
		t.Fatalf("only %d crash cases", len(cases))
	}
	for name, c := range cases {
		b := readModel(t, filepath.Join("crash", name+".onnx"))
		safe, err := SanitizeModel(b)
		switch c.Expect {
		case "refused":
			if !errors.Is(err, ErrModelUnsafe) {
				t.Errorf("%s: got %v, want a refusal", name, err)
			} else if !strings.Contains(err.Error(), "node ") {
				t.Errorf("%s: refusal %q does not name the node", name, err)
			}
		case "guarded":
			if err != nil || safe == nil {
				t.Errorf("%s: got rewrite %v, err %v; want a rewrite", name, safe != nil, err)
				continue
			}
			if err := CheckModelBlob(safe); err != nil {
				t.Errorf("%s: the rewrite is malformed: %v", name, err)
			}
		case "contained": // crashes only at run, in an engine worker
			if err != nil {
				t.Errorf("%s: refused: %v", name, err)
			}
		case "clean":
			if err != nil || safe != nil {
				t.Errorf("%s: got rewrite %v, err %v; want neither", name, safe != nil, err)
			}
		default:
			t.Errorf("%s: unknown expectation %q", name, c.Expect)
		}
	}
}

// TestSanitizePassesTestdata: the ordinary test models pass untouched.
func TestSanitizePassesTestdata(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.onnx")
	for _, f := range files {
		b, _ := os.ReadFile(f)
		if CheckModelBlob(b) != nil {
			continue
		}
		safe, err := SanitizeModel(b)
		if err != nil || safe != nil {
			t.Errorf("%s: rewrite %v, err %v", f, safe != nil, err)
		}
	}
}

// guardedDiv is what a guarded Div or Mod (fmod 0) gives, with Go's
// arithmetic on the type's width (bits, signed).
func guardedDiv(op string, a, b int64, bits int, signed bool) int64 {
	min := int64(-1) << (bits - 1)
	if b == 0 || (signed && a == min && b == -1) {
		b = 1
	}
	if !signed {
		ua, ub := uint64(a), uint64(b)
		if op == "Div" {
			return int64(ua / ub)
		}
		return int64(ua % ub)
	}
	if op == "Div" {
		return a / b
	}
	r := a % b
	if r != 0 && (r < 0) != (b < 0) {
		r += b
	}
	return r
}

var intTypes = map[string]struct {
	dt     DType
	bits   int
	signed bool
}{
	"INT8": {Int8, 8, true}, "INT16": {Int16, 16, true}, "INT32": {Int32, 32, true}, "INT64": {Int64, 64, true},
	"UINT8": {Uint8, 8, false}, "UINT16": {Uint16, 16, false}, "UINT32": {Uint32, 32, false}, "UINT64": {Uint64, 64, false},
}

// intTensor encodes integer values of a type name as a Tensor.
func intTensor(t *testing.T, typ string, shape []int64, vals []int64) *Tensor {
	it, ok := intTypes[typ]
	if !ok {
		t.Fatalf("not an integer type: %s", typ)
	}
	size := it.bits / 8
	b := make([]byte, size*len(vals))
	for i, v := range vals {
		var w [8]byte
		binary.LittleEndian.PutUint64(w[:], uint64(v))
		copy(b[i*size:], w[:size])
	}
	return &Tensor{DType: it.dt, Shape: shape, Data: b}
}

func feedValues(vals []any) []int64 {
	out := make([]int64, len(vals))
	for i, v := range vals {
		f, _ := v.(float64)
		out[i] = int64(f)
		if f >= 1<<63 { // uint64 max
			out[i] = -1
		}
	}
	return out
}

// TestGuardedDivisionRuns runs each guarded integer Div and Mod in ONNX
// Runtime on divisors of zero and INT_MIN / -1 next to ordinary ones: the
// process survives and every element is the documented result.
func TestGuardedDivisionRuns(t *testing.T) {
	requireRuntime(t)
	for name, c := range crashCases(t) {
		if c.Expect != "guarded" || !strings.HasSuffix(name, "_run") {
			continue
		}
		op := "Div"
		if strings.HasPrefix(name, "mod") {
			op = "Mod"
		}
		sess, err := NewSession(readModel(t, filepath.Join("crash", name+".onnx")), SessionOptions{})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		typ := c.Feeds[0].Type
		a, b := feedValues(c.Feeds[0].Values), feedValues(c.Feeds[1].Values)
		if typ == "UINT64" { // JSON floats cannot carry 2^64-1 exactly
			a[3] = -1
		}
		out, err := sess.Run(context.Background(), []*Tensor{intTensor(t, typ, c.Feeds[0].Shape, a), intTensor(t, typ, c.Feeds[1].Shape, b)})
		sess.Close()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		it := intTypes[typ]
		for i := range a {
			av, bv := a[i], b[i]
			if !it.signed && it.bits < 64 {
				av &= 1<<it.bits - 1
				bv &= 1<<it.bits - 1
			}
			want := guardedDiv(op, av, bv, it.bits, it.signed)
			if got := out[0].Int(i); got != want {
				t.Errorf("%s: %d %s %d = %d, want %d", name, av, op, bv, got, want)
			}
		}
	}
}

// TestGuardedDivisionFoldedAndNested: divisions ORT folds at session
// creation, and one two Loops deep, are guarded too.
func TestGuardedDivisionFoldedAndNested(t *testing.T) {
	requireRuntime(t)
	for _, tc := range []struct {
		name string
		opts SessionOptions
		in   []*Tensor
		want []int64
	}{
		{"div_int64_folded", SessionOptions{Optimize: true}, []*Tensor{intTensor(t, "INT64", []int64{2}, []int64{1, 0})}, []int64{6, math.MinInt64}},
		{"mod_int64_folded", SessionOptions{Optimize: true}, []*Tensor{intTensor(t, "INT64", []int64{2}, []int64{1, 0})}, []int64{1, 0}},
		{"div_in_loop", SessionOptions{}, []*Tensor{intTensor(t, "INT32", []int64{2}, []int64{100, math.MinInt32}), intTensor(t, "INT32", []int64{2}, []int64{0, -1})}, []int64{100, math.MinInt32}},
	} {
		sess, err := NewSession(readModel(t, filepath.Join("crash", tc.name+".onnx")), tc.opts)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		out, err := sess.Run(context.Background(), tc.in)
		sess.Close()
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		for i, w := range tc.want {
			if got := out[0].Int(i); got != w {
				t.Errorf("%s: element %d = %d, want %d", tc.name, i, got, w)
			}
		}
	}
}

// TestFloatDivisionUntouched: float Div is not rewritten and keeps IEEE
// results.
func TestFloatDivisionUntouched(t *testing.T) {
	requireRuntime(t)
	sess, err := NewSession(readModel(t, filepath.Join("crash", "div_float.onnx")), SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	out, err := sess.Run(context.Background(), []*Tensor{floats([]int64{3}, 1, -1, 0), floats([]int64{3}, 0, 0, 0)})
	if err != nil {
		t.Fatal(err)
	}
	got := tensorFloats(out[0])
	if !math.IsInf(got[0], 1) || !math.IsInf(got[1], -1) || !math.IsNaN(got[2]) {
		t.Errorf("1/0, -1/0, 0/0 = %v", got)
	}
}

// FuzzSanitizeModel: SanitizeModel never panics on any bytes, and a
// rewrite it returns, or the one ONNX Runtime's sessions get (with Pad's
// guards), is itself a well-formed model whose guards are all it added
// (sanitizing it again refuses nothing).
func FuzzSanitizeModel(f *testing.F) {
	for _, pattern := range []string{"testdata/*.onnx", "testdata/crash/*.onnx"} {
		files, _ := filepath.Glob(pattern)
		for _, file := range files {
			if b, err := os.ReadFile(file); err == nil {
				f.Add(b)
			}
		}
	}
	f.Add(padModel(13, "reflect", []int64{1, -1}, nil))
	f.Add(padModel(9, "reflect", nil, []int64{0, 1, 0, 1}))
	f.Add(padModel(19, "wrap", []int64{-1, 3}, []int64{0, 1}, 1))
	f.Fuzz(func(t *testing.T, b []byte) {
		safe, err := SanitizeModel(b)
		if err != nil {
			return
		}
		guarded, _, err := sanitizeChecked(b, true)
		if err != nil {
			t.Fatalf("refused with Pad's guards only: %v", err)
		}
		for _, m := range [][]byte{safe, guarded} {
			if m == nil {
				continue
			}
			if err := CheckModelBlob(m); err != nil {
				t.Fatalf("rewrite is malformed: %v", err)
			}
			if _, err := SanitizeModel(m); err != nil {
				t.Fatalf("the rewrite is refused: %v", err)
			}
		}
	})
}

// Hand-built models for the rules table: one node over declared inputs.

func intsAttr(name string, vals ...int64) []byte {
	return bytes.Join([][]byte{pbStr(1, name), pbInt(20, attrInts), pbPacked(8, vals...)}, nil)
}

func intAttrPB(name string, v int64) []byte {
	return bytes.Join([][]byte{pbStr(1, name), pbInt(20, attrInt), pbInt(3, v)}, nil)
}

func strAttrPB(name, v string) []byte {
	return bytes.Join([][]byte{pbStr(1, name), pbInt(20, attrString), pbStr(4, v)}, nil)
}

// treeEnsemble is an ai.onnx.ml TreeEnsembleClassifier of one leaf (its
// nodes' lists but nodes_treeids, which extra gives with any others).
func treeEnsemble(extra ...[]byte) []byte {
	parts := [][]byte{pbStr(3, "n1"), pbStr(4, "TreeEnsembleClassifier"), pbStr(7, "ai.onnx.ml"), pbStr(1, "x"), pbStr(2, "y")}
	for _, a := range append([][]byte{intsAttr("nodes_nodeids", 0), intsAttr("nodes_featureids", 0), intsAttr("nodes_truenodeids", 0),
		intsAttr("nodes_falsenodeids", 0), bytes.Join([][]byte{pbStr(1, "nodes_modes"), pbInt(20, attrStrings), pbStr(9, "LEAF")}, nil)}, extra...) {
		parts = append(parts, pbMsg(5, a))
	}
	return model(pbMsg(1, parts...), inputDecl("x", onnxFloat, 1, 2))
}

// inputDecl is a graph input of type float with the given shape.
func inputDecl(name string, elem int64, shape ...int64) []byte {
	var dims [][]byte
	for _, d := range shape {
		dims = append(dims, pbMsg(1, pbInt(1, d)))
	}
	return pbMsg(11, pbStr(1, name), pbMsg(2, pbMsg(1, pbInt(1, elem), pbMsg(2, dims...))))
}

func oneNode(op string, inputs []string, attrs [][]byte, decls ...[]byte) []byte {
	parts := [][]byte{pbStr(3, "n1"), pbStr(4, op), pbStr(2, "y")}
	for _, in := range inputs {
		parts = append(parts, pbStr(1, in))
	}
	for _, a := range attrs {
		parts = append(parts, pbMsg(5, a))
	}
	graph := append([][]byte{pbMsg(1, parts...)}, decls...)
	return model(graph...)
}

// gatherND is GatherND of data (a graph input's declaration, "x") at the
// constant index (i, j).
func gatherND(data []byte, i, j int64) []byte {
	return oneNode("GatherND", []string{"x", "i"}, nil, data, pbMsg(5, tensor("i", 7, []int64{2}, pbPacked(7, i, j))))
}

func TestSanitizeRules(t *testing.T) {
	x4 := inputDecl("x", onnxFloat, 1, 4, 8, 8)
	w4 := inputDecl("w", onnxFloat, 2, 2, 3, 3)
	conv := func(attrs ...[]byte) []byte { return oneNode("Conv", []string{"x", "w"}, attrs, x4, w4) }
	for _, tc := range []struct {
		name  string
		model []byte
		want  string // "" passes
	}{
		{"conv ok", conv(intsAttr("strides", 1, 2), intsAttr("pads", 0, 0, 1, 1), intAttrPB("group", 2)), ""},
		{"strides 0", conv(intsAttr("strides", 1, 0)), `node "n1" (Conv): attribute strides must be >= 1, got [1 0]`},
		{"dilations negative", conv(intsAttr("dilations", -1, 1)), "attribute dilations must be >= 1"},
		{"kernel_shape 0", conv(intsAttr("kernel_shape", 0, 3)), "attribute kernel_shape must be >= 1"},
		{"pads negative", conv(intsAttr("pads", 0, -1, 0, 0)), "attribute pads must be >= 0"},
		{"pads length", conv(intsAttr("pads", 1, 1)), "attribute pads has 2 entries, but the kernel has 2 spatial dimensions (want 4)"},
		{"strides length", conv(intsAttr("strides", 1, 1, 1)), "attribute strides has 3 entries"},
		{"group 0", conv(intAttrPB("group", 0)), "attribute group must be >= 1, got 0"},
		{"group not dividing", conv(intAttrPB("group", 3)), "does not divide the 4 input channels"},
		{"group vs weight", conv(intAttrPB("group", 4)), "does not divide the weight's 2 output channels"},
		{"rank mismatch", oneNode("Conv", []string{"x", "w"}, nil, x4, inputDecl("w", onnxFloat, 2, 4, 3)), "input 1 has rank 3, but input 0 has rank 4"},
		{"pool strides 0", oneNode("MaxPool", []string{"x"}, [][]byte{intsAttr("kernel_shape", 2, 2), intsAttr("strides", 0, 1)}, x4), "(MaxPool): attribute strides must be >= 1"},
		{"pool ok", oneNode("AveragePool", []string{"x"}, [][]byte{intsAttr("kernel_shape", 2, 2), intsAttr("strides", 2, 2)}, x4), ""},
		{"axis out of rank", oneNode("LayerNormalization", []string{"x"}, [][]byte{intAttrPB("axis", 4)}, x4), "attribute axis is 4, outside [-4, 4)"},
		{"axis ok", oneNode("Softmax", []string{"x"}, [][]byte{intAttrPB("axis", -1)}, x4), ""},
		{"blocksize huge", oneNode("DepthToSpace", []string{"x"}, [][]byte{intAttrPB("blocksize", 1<<40)}, x4), "attribute blocksize must be between 1 and 65536"},
		{"zero dim", oneNode("LpNormalization", []string{"x"}, nil, inputDecl("x", onnxFloat, 2, 0)), "input 0 has a dimension of size 0"},
		{"einsum zero dim", oneNode("Einsum", []string{"a", "b"}, [][]byte{strAttrPB("equation", "...,...")}, inputDecl("a", onnxFloat, 1, 3), inputDecl("b", onnxFloat, 0, 3)), "(Einsum): input 1 has a dimension of size 0"},
		{"dft zero dim", oneNode("DFT", []string{"x"}, nil, inputDecl("x", onnxFloat, 0, 4, 2)), "(DFT): input 0 has a dimension of size 0"},
		{"tree ensemble ok", treeEnsemble(intsAttr("nodes_treeids", 0)), ""},
		{"tree ensemble nodes", treeEnsemble(intsAttr("nodes_treeids", 0, 0)), "attribute nodes_nodeids has 1 entries, but nodes_treeids has 2"},
		{"tree ensemble classes", treeEnsemble(intsAttr("nodes_treeids", 0), intsAttr("class_ids", 1, -1, 1, 1)), "attribute class_treeids has 0 entries, but class_ids has 4"},
		{"instancenorm zero dim", oneNode("InstanceNormalization", []string{"x", "s", "b"}, nil, inputDecl("x", onnxFloat, 2, 2, 0)), "(InstanceNormalization): input 0 has a dimension of size 0"},
		{"instancenorm ok", oneNode("InstanceNormalization", []string{"x", "s", "b"}, nil, inputDecl("x", onnxFloat, 2, 2, 3)), ""},
		{"gathernd index out of bounds", gatherND(inputDecl("x", onnxFloat, 2, 3), 1, 3), "(GatherND): index 3 is outside [-3, 2], the data's dimension 1"},
		{"gathernd negative index out of bounds", gatherND(inputDecl("x", onnxFloat, 2, 3), -3, 0), "index -3 is outside [-2, 1], the data's dimension 0"},
		{"gathernd index into size 0", gatherND(inputDecl("x", onnxFloat, 0, 3), 0, 1), "index 0 is into the data's dimension 0, of size 0"},
		{"gathernd indices ok", gatherND(inputDecl("x", onnxFloat, 2, 3), -2, 2), ""},
		{"gathernd unknown dims", gatherND(inputDecl("x", onnxFloat, -1, 3), 7, 2), ""},
		{"scatternd index out of bounds", oneNode("ScatterND", []string{"x", "i", "u"}, nil, inputDecl("x", onnxFloat, 2, 3), pbMsg(5, tensor("i", 7, []int64{1, 2}, pbPacked(7, 2, 0)))), "(ScatterND): index 2 is outside [-2, 1], the data's dimension 0"},
		{"scatternd batch_dims ignored", oneNode("ScatterND", []string{"x", "i", "u"}, [][]byte{intAttrPB("batch_dims", 1<<62)}, inputDecl("x", onnxFloat, 2, 3), pbMsg(5, tensor("i", 7, []int64{1, 2}, pbPacked(7, 1, 2)))), ""},
		{"unknown type division", oneNode("Div", []string{"a", "b"}, nil), "the element type of its inputs cannot be inferred"},
	} {
		safe, err := SanitizeModel(tc.model)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: refused: %v", tc.name, err)
		case tc.want != "" && (err == nil || !errors.Is(err, ErrModelUnsafe) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: got %v, want %q", tc.name, err, tc.want)
		case safe != nil:
			t.Errorf("%s: rewritten", tc.name)
		}
	}
}

// TestSanitizeFunctionDivision: an integer-or-unknown Div in a model-local
// function is refused (its types are the caller's); a Div after a Cast to
// float there passes.
func TestSanitizeFunctionDivision(t *testing.T) {
	fn := func(nodes ...[]byte) []byte {
		parts := [][]byte{pbStr(1, "f"), pbStr(10, "local"), pbStr(4, "a"), pbStr(4, "b"), pbStr(5, "c"), pbMsg(9, pbStr(1, ""), pbInt(2, 13))}
		for _, n := range nodes {
			parts = append(parts, pbMsg(7, n))
		}
		return pbMsg(25, parts...)
	}
	div := bytes.Join([][]byte{pbStr(3, "fdiv"), pbStr(4, "Div"), pbStr(1, "a"), pbStr(1, "b"), pbStr(2, "c")}, nil)
	m := append(model(inputDecl("x", onnxInt32, 1)), fn(div)...)
	if _, err := SanitizeModel(m); err == nil || !strings.Contains(err.Error(), `node "fdiv" (Div)`) {
		t.Errorf("integer-or-unknown Div in a function: %v", err)
	}
	castA := bytes.Join([][]byte{pbStr(4, "Cast"), pbStr(1, "a"), pbStr(2, "af"), pbMsg(5, intAttrPB("to", onnxFloat))}, nil)
	castB := bytes.Join([][]byte{pbStr(4, "Cast"), pbStr(1, "b"), pbStr(2, "bf"), pbMsg(5, intAttrPB("to", onnxFloat))}, nil)
	fdiv := bytes.Join([][]byte{pbStr(3, "fdiv"), pbStr(4, "Div"), pbStr(1, "af"), pbStr(1, "bf"), pbStr(2, "c")}, nil)
	if safe, err := SanitizeModel(append(model(inputDecl("x", onnxInt32, 1)), fn(castA, castB, fdiv)...)); err != nil || safe != nil {
		t.Errorf("float Div in a function: rewrite %v, err %v", safe != nil, err)
	}
}

// BenchmarkSanitizeModel: the sanitizer's cost per model load, on the
// file named by $SANITIZE_BENCH_MODEL (default testdata/linear.onnx).
func BenchmarkSanitizeModel(b *testing.B) {
	path := os.Getenv("SANITIZE_BENCH_MODEL")
	if path == "" {
		path = filepath.Join("testdata", "linear.onnx")
	}
	m, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(m)))
	for b.Loop() {
		if _, err := SanitizeModel(m); err != nil {
			b.Fatal(err)
		}
	}
}

// A constant Reshape shape whose dims' product passes MaxStaticElements is
// refused even after a 0 (copy the input's) or -1: [0, 3,
// 0x5555555555555556] wraps past 2^64 to 2 elements (review, 2026-12-07).
func TestSanitizeStaticSizeSkipsZeros(t *testing.T) {
	reshape := func(shape ...int64) []byte {
		return oneNode("Reshape", []string{"x", "s"}, nil, inputDecl("x", onnxFloat, 1, 2),
			pbMsg(5, tensor("s", onnxInt64, []int64{int64(len(shape))}, pbPacked(7, shape...))))
	}
	for _, tc := range []struct {
		name  string
		model []byte
		want  string
	}{
		{"wrap after a 0", reshape(0, 3, 0x5555555555555556), "(Reshape): output shape [0 3 6148914691236517206] has more than 2147483648 elements"},
		{"wrap after a -1", reshape(-1, 1<<40, 1<<40), "has more than 2147483648 elements"},
		{"0 and -1", reshape(0, -1), ""},
		{"ok", reshape(2, 1), ""},
	} {
		_, err := SanitizeModel(tc.model)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: got %v, want %q", tc.name, err, tc.want)
		}
	}
}
