//go:build cgo && !noort

package modelstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	ort "github.com/yalue/onnxruntime_go"
)

// The tests run the real ONNX Runtime on the models in testdata/, written by
// `/usr/bin/python3 redis_tests/models/gen_models.py --testdata modelstore/testdata`.
// `make test` fetches the library first, so a missing library is a failure.

var testRuntime struct {
	sync.Once
	err error
}

func requireRuntime(t testing.TB) {
	t.Helper()
	testRuntime.Do(func() {
		path, err := FindRuntimeLibrary("")
		if err != nil {
			// `go test` runs in the package directory; the Makefile's
			// cache is in the repository root.
			alt := filepath.Join("..", ".cache", "onnxruntime", RuntimeVersionWanted, runtimeLibName)
			if p, err2 := FindRuntimeLibrary(alt); err2 == nil {
				path, err = p, nil
			}
		}
		if err == nil {
			err = InitRuntime(path)
		}
		testRuntime.err = err
	})
	if testRuntime.err != nil {
		t.Fatalf("ONNX Runtime is required (run `make ort`): %v", testRuntime.err)
	}
}

func openSession(t testing.TB, name string, opts SessionOptions) *Session {
	t.Helper()
	requireRuntime(t)
	s, err := NewSession(readModel(t, name), opts)
	if err != nil {
		t.Fatalf("NewSession(%s): %v", name, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func floats(shape []int64, vals ...float32) *Tensor {
	b := make([]byte, 4*len(vals))
	for i, v := range vals {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	return &Tensor{DType: Float, Shape: shape, Data: b}
}

func int32s(shape []int64, vals ...int32) *Tensor {
	b := make([]byte, 4*len(vals))
	for i, v := range vals {
		binary.LittleEndian.PutUint32(b[4*i:], uint32(v))
	}
	return &Tensor{DType: Int32, Shape: shape, Data: b}
}

func stringsTensor(shape []int64, vals ...string) *Tensor {
	var b []byte
	for _, v := range vals {
		b = append(append(b, v...), 0)
	}
	return &Tensor{DType: String, Shape: shape, Data: b}
}

func tensorFloats(t *Tensor) []float64 {
	out := make([]float64, t.Len())
	for i := range out {
		out[i] = t.Float(i)
	}
	return out
}

// linearWant computes linear.onnx in Go: y = x @ (0.1*arange(12)).reshape(4,3) + [1,2,3].
func linearWant(x []float32) []float64 {
	var y []float64
	for r := 0; r+4 <= len(x); r += 4 {
		for c := 0; c < 3; c++ {
			v := float64(c + 1)
			for k := 0; k < 4; k++ {
				v += float64(x[r+k]) * float64(float32(0.1*float64(k*3+c)))
			}
			y = append(y, v)
		}
	}
	return y
}

func closeTo(got, want []float64, tol float64) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if math.Abs(got[i]-want[i]) > tol*math.Max(1, math.Abs(want[i])) {
			return false
		}
	}
	return true
}

func wantORTError(t *testing.T, err error, substr string) {
	t.Helper()
	var oe *ORTError
	if !errors.As(err, &oe) {
		t.Fatalf("error %v (%T) is not an *ORTError", err, err)
	}
	if !strings.Contains(oe.Msg, substr) {
		t.Fatalf("ORT error %q does not contain %q", oe.Msg, substr)
	}
}

// TestNewSessionBeforeInit comes first so that it runs before any test
// initializes the runtime (unless another file's tests did).
func TestNewSessionBeforeInit(t *testing.T) {
	if runtimeState.ready.Load() {
		t.Skip("the runtime is already initialized in this process")
	}
	if _, err := NewSession(readModel(t, "linear.onnx"), SessionOptions{}); !errors.Is(err, ErrRuntimeNotInitialized) {
		t.Errorf("got %v", err)
	}
}

func TestFindRuntimeLibrary(t *testing.T) {
	dir := t.TempDir()
	lib := filepath.Join(dir, "lib", runtimeLibName)
	if err := os.MkdirAll(filepath.Dir(lib), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(lib, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "nope.so")

	t.Run("explicit", func(t *testing.T) {
		t.Setenv(RuntimeLibraryEnv, missing) // the explicit path wins
		if got, err := FindRuntimeLibrary(lib); err != nil || got != lib {
			t.Fatalf("FindRuntimeLibrary(%s) = %q, %v", lib, got, err)
		}
		_, err := FindRuntimeLibrary(missing)
		if !errors.Is(err, ErrRuntimeNotFound) || !strings.Contains(err.Error(), missing) {
			t.Fatalf("missing explicit path: %v", err)
		}
		if _, err := FindRuntimeLibrary(dir); !errors.Is(err, ErrRuntimeNotFound) {
			t.Fatalf("a directory is not a library: %v", err)
		}
	})
	t.Run("env", func(t *testing.T) {
		t.Setenv(RuntimeLibraryEnv, lib)
		if got, err := FindRuntimeLibrary(""); err != nil || got != lib {
			t.Fatalf("with $%s: %q, %v", RuntimeLibraryEnv, got, err)
		}
		t.Setenv(RuntimeLibraryEnv, missing)
		_, err := FindRuntimeLibrary("")
		if !errors.Is(err, ErrRuntimeNotFound) || !strings.Contains(err.Error(), "$"+RuntimeLibraryEnv) {
			t.Fatalf("missing $%s file: %v", RuntimeLibraryEnv, err)
		}
	})
	t.Run("working directory", func(t *testing.T) {
		t.Setenv(RuntimeLibraryEnv, "")
		wd := t.TempDir()
		cached := filepath.Join(wd, ".cache", "onnxruntime", RuntimeVersionWanted, runtimeLibName)
		if err := os.MkdirAll(filepath.Dir(cached), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(cached, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Chdir(wd)
		got, err := FindRuntimeLibrary("")
		if err != nil || !sameFile(got, cached) {
			t.Fatalf("FindRuntimeLibrary in %s = %q, %v", wd, got, err)
		}
	})
	t.Run("nothing found", func(t *testing.T) {
		t.Setenv(RuntimeLibraryEnv, "")
		wd := t.TempDir()
		t.Chdir(wd)
		_, err := FindRuntimeLibrary("")
		if !errors.Is(err, ErrRuntimeNotFound) {
			t.Fatalf("got %v", err)
		}
		// Beside the executable, under the working directory, under the
		// executable's parent's parent.
		exe, _ := os.Executable()
		exe, _ = filepath.EvalSymlinks(exe)
		for _, want := range []string{
			filepath.Join(filepath.Dir(exe), runtimeLibName),
			filepath.Join(".cache", "onnxruntime", RuntimeVersionWanted, runtimeLibName),
			filepath.Join(filepath.Dir(filepath.Dir(exe)), ".cache"),
		} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not list %s", err, want)
			}
		}
	})
}

func TestInitRuntime(t *testing.T) {
	requireRuntime(t)
	if v := RuntimeVersion(); v != RuntimeVersionWanted {
		t.Errorf("RuntimeVersion() = %q, want %q", v, RuntimeVersionWanted)
	}
	runtimeState.mu.Lock()
	lib := runtimeState.libPath
	runtimeState.mu.Unlock()
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = InitRuntime(lib)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("concurrent InitRuntime #%d: %v", i, err)
		}
	}
	if err := InitRuntime(""); err != nil {
		t.Errorf("InitRuntime(\"\") after success: %v", err)
	}
	other := filepath.Join(t.TempDir(), runtimeLibName)
	os.WriteFile(other, nil, 0o644)
	if err := InitRuntime(other); err == nil || !strings.Contains(err.Error(), "already initialized") {
		t.Errorf("InitRuntime(another library): %v", err)
	}
}

func TestSessionMetadata(t *testing.T) {
	s := openSession(t, "linear.onnx", SessionOptions{})
	wantIn := []IOInfo{{Name: "x", DType: Float, ElemType: "tensor(float)", Shape: []int64{-1, 4}}}
	wantOut := []IOInfo{{Name: "y", DType: Float, ElemType: "tensor(float)", Shape: []int64{-1, 3}}}
	if !reflect.DeepEqual(s.Inputs(), wantIn) || !reflect.DeepEqual(s.Outputs(), wantOut) {
		t.Errorf("linear: inputs %+v outputs %+v", s.Inputs(), s.Outputs())
	}

	s = openSession(t, "mixed_outputs.onnx", SessionOptions{})
	wantOut = []IOInfo{
		{Name: "r", DType: Float, ElemType: "tensor(float)", Shape: []int64{-1, 2}},
		{Name: "seq", DType: DTypeInvalid, ElemType: "seq(tensor(float))"},
		{Name: "total", DType: Float, ElemType: "tensor(float)", Shape: []int64{}},
		{Name: "neg", DType: Float, ElemType: "tensor(float)", Shape: []int64{-1, 2}},
	}
	if !reflect.DeepEqual(s.Outputs(), wantOut) {
		t.Errorf("mixed_outputs: outputs %+v", s.Outputs())
	}

	// No declared shape: nil, not a scalar.
	s = openSession(t, "identity_all.onnx", SessionOptions{})
	if in := s.Inputs(); len(in) != 12 || in[0].Shape != nil || in[9].DType != String || in[10].DType != Uint32 {
		t.Errorf("identity_all: inputs %+v", in)
	}

	// Initializers listed as graph inputs are not inputs.
	s = openSession(t, "init_as_input.onnx", SessionOptions{})
	if in := s.Inputs(); len(in) != 1 || in[0].Name != "x" {
		t.Errorf("init_as_input: inputs %+v", in)
	}

	s = openSession(t, "half_output.onnx", SessionOptions{})
	if out := s.Outputs(); out[0].DType != DTypeInvalid || out[0].ElemType != "tensor(float16)" || !out[0].IsTensor() {
		t.Errorf("half_output: outputs %+v", out)
	}
}

// TestIOInfoMatchesRuntime checks that the inputs and outputs read from
// the protobuf are the ones ORT itself reports, for every test model.
func TestIOInfoMatchesRuntime(t *testing.T) {
	requireRuntime(t)
	files, _ := filepath.Glob("testdata/*.onnx")
	if len(files) < 10 {
		t.Fatalf("only %d models in testdata", len(files))
	}
	for _, f := range files {
		name := filepath.Base(f)
		switch name {
		case "external_data.onnx", "bad_size.onnx", "no_nodes.onnx", "unknown_op.onnx":
			continue // ORT refuses these
		}
		t.Run(name, func(t *testing.T) {
			b := readModel(t, name)
			ortIn, ortOut, err := ort.GetInputOutputInfoWithONNXData(b)
			if err != nil {
				t.Fatal(err)
			}
			in, out, err := readGraphIO(b)
			if err != nil {
				t.Fatal(err)
			}
			compare := func(what string, mine []IOInfo, theirs []ort.InputOutputInfo) {
				if len(mine) != len(theirs) {
					t.Fatalf("%s: %d vs ORT's %d", what, len(mine), len(theirs))
				}
				for i, o := range theirs {
					m := mine[i]
					if m.Name != o.Name {
						t.Errorf("%s %d: name %q, ORT %q", what, i, m.Name, o.Name)
					}
					switch o.OrtValueType {
					case ort.ONNXTypeTensor:
						want := "tensor(" + onnxTypeName(uint64(o.DataType)) + ")"
						shape := m.Shape
						if shape == nil {
							shape = []int64{} // ORT reports an unknown rank as rank 0
						}
						if m.ElemType != want || !reflect.DeepEqual(shape, []int64(o.Dimensions)) {
							t.Errorf("%s %s: %s %v, ORT %s %v", what, m.Name, m.ElemType, m.Shape, want, o.Dimensions)
						}
					case ort.ONNXTypeSequence:
						if !strings.HasPrefix(m.ElemType, "seq(") {
							t.Errorf("%s %s: %s, ORT a sequence", what, m.Name, m.ElemType)
						}
					default:
						t.Errorf("%s %s: ORT type %v not covered by this test", what, m.Name, o.OrtValueType)
					}
				}
			}
			compare("input", in, ortIn)
			compare("output", out, ortOut)
		})
	}
}

func TestRunLinearReference(t *testing.T) {
	var ref map[string]struct {
		Inputs, Outputs map[string]struct {
			DType string
			Shape []int64
			Data  []float64
		}
	}
	if err := json.Unmarshal(readModel(t, "reference.json"), &ref); err != nil {
		t.Fatal(err)
	}
	lin := ref["linear"]
	xin := lin.Inputs["x"]
	var x []float32
	for _, v := range xin.Data {
		x = append(x, float32(v))
	}
	for _, opts := range []SessionOptions{{}, {Optimize: true}, {Optimize: true, IntraOpThreads: 1, InterOpThreads: 2}} {
		t.Run(fmt.Sprintf("%+v", opts), func(t *testing.T) {
			s := openSession(t, "linear.onnx", opts)
			out, err := s.Run(context.Background(), []*Tensor{floats(xin.Shape, x...)})
			if err != nil {
				t.Fatal(err)
			}
			want := lin.Outputs["y"]
			y := out[0]
			if len(out) != 1 || y.DType != Float || !reflect.DeepEqual(y.Shape, want.Shape) {
				t.Fatalf("got %+v", out)
			}
			if got := tensorFloats(y); !closeTo(got, want.Data, 1e-6) {
				t.Errorf("y = %v, numpy %v", got, want.Data)
			}
			// REDISAI.md section 10: x = [1 2 3 4] gives 7 9 11.
			if got := tensorFloats(y)[:3]; !reflect.DeepEqual(got, []float64{7, 9, 11}) {
				t.Errorf("first row %v", got)
			}
		})
	}
}

func TestRunIntAndString(t *testing.T) {
	s := openSession(t, "add_int.onnx", SessionOptions{})
	out, err := s.Run(context.Background(), []*Tensor{int32s([]int64{3}, 1, -2, 3), int32s([]int64{3}, 10, 20, math.MaxInt32)})
	if err != nil {
		t.Fatal(err)
	}
	if want := int32s([]int64{3}, 11, 18, math.MinInt32+2); !reflect.DeepEqual(out[0], want) {
		t.Errorf("add_int: %+v, want %+v", out[0], want)
	}

	s = openSession(t, "string_identity.onnx", SessionOptions{})
	in := stringsTensor([]int64{4}, "hello", "", "wörld", "\xff\x01")
	out, err = s.Run(context.Background(), []*Tensor{in})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(out[0], in) {
		t.Errorf("string_identity: %q, want %q", out[0].Data, in.Data)
	}
}

// TestRunAllTypes round-trips every element type through Identity,
// including zero-element tensors.
func TestRunAllTypes(t *testing.T) {
	s := openSession(t, "identity_all.onnx", SessionOptions{})
	rng := rand.New(rand.NewSource(1))
	build := func(shape []int64) []*Tensor {
		var ins []*Tensor
		n := int(ShapeLen(shape))
		for _, info := range s.Inputs() {
			if info.DType == String {
				vals := make([]string, n)
				for i := range vals {
					vals[i] = strings.Repeat("ab", i%3)
				}
				ins = append(ins, stringsTensor(shape, vals...))
				continue
			}
			data := make([]byte, n*info.DType.Size())
			rng.Read(data)
			if info.DType == Bool {
				for i := range data {
					data[i] &= 1
				}
			}
			ins = append(ins, &Tensor{DType: info.DType, Shape: shape, Data: data})
		}
		return ins
	}
	for _, shape := range [][]int64{{2, 3}, {5}, {0}, {2, 0, 3}} {
		t.Run(fmt.Sprint(shape), func(t *testing.T) {
			ins := build(shape)
			out, err := s.Run(context.Background(), ins)
			if err != nil {
				t.Fatal(err)
			}
			for i, o := range out {
				if o == nil || o.DType != ins[i].DType || !reflect.DeepEqual(o.Shape, ins[i].Shape) || !bytes.Equal(o.Data, ins[i].Data) {
					t.Errorf("%s: got %+v, want %+v", s.Outputs()[i].Name, o, ins[i])
				}
			}
		})
	}
	t.Run("scalars", func(t *testing.T) {
		// Rank-0 inputs are passed, but the binding cannot return an
		// ORT-allocated rank-0 output the model did not declare as one.
		ins := build([]int64{})
		ins[9] = stringsTensor([]int64{1}, "s")
		_, err := s.Run(context.Background(), ins)
		if !errors.Is(err, ErrUnsupportedShape) {
			t.Errorf("got %v", err)
		}
		ins[9] = stringsTensor([]int64{}, "s")
		if _, err := s.Run(context.Background(), ins); !errors.Is(err, ErrUnsupportedShape) {
			t.Errorf("rank-0 STRING input: %v", err)
		}
	})
}

func TestRunScalarsAndNonTensorOutputs(t *testing.T) {
	s := openSession(t, "scalar_io.onnx", SessionOptions{})
	out, err := s.Run(context.Background(), []*Tensor{floats([]int64{}, 1.25), stringsTensor([]int64{1}, "hi")})
	if err != nil {
		t.Fatal(err)
	}
	if want := floats([]int64{}, 2.5); !reflect.DeepEqual(out[0], want) {
		t.Errorf("y = %+v, want %+v", out[0], want)
	}
	if want := stringsTensor([]int64{}, "hi"); !reflect.DeepEqual(out[1], want) {
		t.Errorf("t = %+v, want %+v", out[1], want)
	}

	s = openSession(t, "mixed_outputs.onnx", SessionOptions{})
	out, err = s.Run(context.Background(), []*Tensor{floats([]int64{2, 2}, 1, -2, 3, -4)})
	if err != nil {
		t.Fatal(err)
	}
	want := []*Tensor{
		floats([]int64{2, 2}, 1, 0, 3, 0),
		nil, // the sequence
		floats([]int64{}, -2),
		floats([]int64{2, 2}, -1, 2, -3, 4),
	}
	if !reflect.DeepEqual(out, want) {
		t.Errorf("mixed_outputs: %+v", out)
	}

	s = openSession(t, "half_output.onnx", SessionOptions{})
	_, err = s.Run(context.Background(), []*Tensor{floats([]int64{2}, 1, 2)})
	if !errors.Is(err, ErrUnsupportedDType) || !strings.Contains(err.Error(), "float16") {
		t.Errorf("half_output: %v", err)
	}

	s = openSession(t, "no_inputs.onnx", SessionOptions{})
	if _, err := s.Run(context.Background(), nil); !errors.Is(err, ErrInputCount) {
		t.Errorf("no_inputs: %v", err)
	}
}

func TestRunErrors(t *testing.T) {
	s := openSession(t, "linear.onnx", SessionOptions{})
	ok := floats([]int64{1, 4}, 1, 2, 3, 4)
	for _, tc := range []struct {
		name   string
		inputs []*Tensor
		ort    string // the ORT message, exactly
		is     error
	}{
		{"wrong dims", []*Tensor{NewZeroTensor(Float, []int64{2, 5})},
			"Got invalid dimensions for input: x for the following indices index: 1 Got: 5 Expected: 4 Please fix either the inputs/outputs or the model.", nil},
		{"wrong rank", []*Tensor{NewZeroTensor(Float, []int64{4})},
			"Invalid rank for input: x Got: 1 Expected: 2 Please fix either the inputs/outputs or the model.", nil},
		{"wrong dtype", []*Tensor{NewZeroTensor(Int32, []int64{1, 4})},
			"Unexpected input data type. Actual: (tensor(int32)) , expected: (tensor(float))", nil},
		{"string for float", []*Tensor{stringsTensor([]int64{1, 4}, "a", "b", "c", "d")},
			"Unexpected input data type. Actual: (tensor(string)) , expected: (tensor(float))", nil},
		{"no inputs", nil, "", ErrInputCount},
		{"two inputs", []*Tensor{ok, ok}, "", ErrInputCount},
		{"nil tensor", []*Tensor{nil}, "", nil},
		{"short data", []*Tensor{{DType: Float, Shape: []int64{1, 4}, Data: make([]byte, 15)}}, "", ErrDataLength},
		{"negative dim", []*Tensor{{DType: Float, Shape: []int64{-1, 4}, Data: make([]byte, 16)}}, "", ErrDataLength},
		{"bad string data", []*Tensor{{DType: String, Shape: []int64{1, 4}, Data: []byte("a\x00b\x00")}}, "", ErrStringElements},
		{"invalid dtype", []*Tensor{{DType: DTypeInvalid, Shape: []int64{1, 4}, Data: make([]byte, 16)}}, "", ErrUnsupportedDType},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := s.Run(context.Background(), tc.inputs)
			if err == nil {
				t.Fatalf("no error; outputs %+v", out)
			}
			if tc.ort != "" {
				var oe *ORTError
				if !errors.As(err, &oe) || oe.Msg != tc.ort {
					t.Fatalf("got %q (%T), want ORT's %q", err, err, tc.ort)
				}
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Fatalf("got %v, want %v", err, tc.is)
			}
		})
	}
	if n := len(s.Inputs()); n != 1 {
		t.Fatal(n)
	}
	// The session still works.
	if _, err := s.Run(context.Background(), []*Tensor{ok}); err != nil {
		t.Fatal(err)
	}
}

func TestNewSessionErrors(t *testing.T) {
	requireRuntime(t)
	linear := readModel(t, "linear.onnx")
	for _, tc := range []struct {
		name  string
		model []byte
		is    error  // a sentinel, or
		ort   string // a substring of ORT's message
		exact string // the whole error text
	}{
		{name: "empty", model: nil, is: ErrModelEmpty, exact: "No graph was found in the protobuf."},
		{name: "html", model: []byte("<!DOCTYPE html>\n<html><body><h1>Not Found</h1></body></html>\n"), is: ErrModelMalformed},
		{name: "truncated", model: linear[:len(linear)/2], is: ErrModelMalformed},
		{name: "protobuf bomb", model: deepModel(100_000), is: ErrModelTooDeep},
		{name: "external data", model: readModel(t, "external_data.onnx"), is: ErrModelExternalData,
			exact: "Initializer tensors with external data is not allowed."},
		{name: "bad size", model: readModel(t, "bad_size.onnx"), is: ErrModelTensorSize,
			exact: `model has a tensor whose raw_data size does not match its dims and type: tensor "W" has 40 bytes of raw_data, but dims [4 3] of float need 48`},
		{name: "unknown op", model: readModel(t, "unknown_op.onnx"), ort: "No Op registered for NoSuchOperator with domain_version of 13"},
		{name: "no nodes", model: readModel(t, "no_nodes.onnx"),
			exact: "This is an invalid model. Graph output (y) does not exist in the graph."},
		{name: "no graph", model: []byte{1 << 3, 8, 2<<3 | 2, 1, 'x'}, exact: "No graph was found in the protobuf."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := NewSession(tc.model, SessionOptions{})
			if err == nil {
				s.Close()
				t.Fatal("no error")
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("got %v, want %v", err, tc.is)
			}
			if tc.ort != "" {
				wantORTError(t, err, tc.ort)
			}
			if tc.exact != "" && err.Error() != tc.exact {
				t.Errorf("got %q, want %q", err, tc.exact)
			}
		})
	}
	t.Run("random bytes", func(t *testing.T) {
		rng := rand.New(rand.NewSource(42))
		for i := 0; i < 300; i++ {
			b := make([]byte, 1+rng.Intn(512))
			rng.Read(b)
			if s, err := NewSession(b, SessionOptions{}); err == nil {
				s.Close()
				t.Fatalf("random blob %x loaded", b)
			}
		}
	})
	t.Run("options", func(t *testing.T) {
		if _, err := NewSession(linear, SessionOptions{IntraOpThreads: -1}); err == nil {
			t.Error("negative thread count accepted")
		}
	})
}

// TestCheckedErrorsMatchRuntime shows that what CheckModelBlob refuses
// with ErrModelMalformed, ORT refuses with the same text.
func TestCheckedErrorsMatchRuntime(t *testing.T) {
	requireRuntime(t)
	linear := readModel(t, "linear.onnx")
	for name, b := range map[string][]byte{
		"html":      []byte("<html><body>hi</body></html>"),
		"truncated": linear[:len(linear)/2],
		"bomb":      deepModel(1000),
	} {
		if err := CheckModelBlob(b); err == nil {
			t.Errorf("%s: CheckModelBlob passed it", name)
		}
		_, err := ort.NewDynamicAdvancedSessionWithONNXData(b, []string{"x"}, []string{"y"}, nil)
		if err == nil || newORTError(err).Msg != ErrModelMalformed.Error() {
			t.Errorf("%s: ORT says %v", name, err)
		}
	}
}

func TestRunTerminatesOnContext(t *testing.T) {
	s := openSession(t, "slow.onnx", SessionOptions{Optimize: true})
	x := floats([]int64{1, 1}, 0.5)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Run(ctx, []*Tensor{x}); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled before the run: %v", err)
	}

	// The full run takes seconds (gen_models.py: SLOW_ITERATIONS); each
	// loop iteration takes milliseconds, and ORT checks the flag between
	// nodes, so a terminated run ends soon after the deadline.
	for i := 0; i < 2; i++ { // a terminated run leaves the session usable
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		out, err := s.Run(ctx, []*Tensor{x})
		cancel()
		elapsed := time.Since(start)
		if out != nil {
			t.Fatalf("run %d finished in %v: slow.onnx is too fast for this test", i, elapsed)
		}
		wantORTError(t, err, "Exiting due to terminate flag being set to true")
		if elapsed > 3*time.Second {
			t.Errorf("run %d: terminated after %v", i, elapsed)
		}
		t.Logf("run %d: deadline 200ms, returned after %v: %v", i, elapsed, err)
	}

	// Cancellation from another goroutine works too.
	ctx, cancel = context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	_, err := s.Run(ctx, []*Tensor{x})
	wantORTError(t, err, "Exiting due to terminate flag being set to true")
}

func TestConcurrentRun(t *testing.T) {
	s := openSession(t, "linear.onnx", SessionOptions{Optimize: true})
	const workers, runs = 8, 100
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewSource(int64(w)))
			for r := 0; r < runs; r++ {
				batch := 1 + rng.Intn(4)
				x := make([]float32, batch*4)
				for i := range x {
					x[i] = float32(rng.Intn(200)-100) / 8
				}
				in := floats([]int64{int64(batch), 4}, x...)
				if w == 0 {
					// Data not aligned to 4 bytes: copied before ORT sees it.
					buf := make([]byte, len(in.Data)+1)
					copy(buf[1:], in.Data)
					in.Data = buf[1:]
				}
				out, err := s.Run(context.Background(), []*Tensor{in})
				if err != nil {
					errs <- err
					return
				}
				if got, want := tensorFloats(out[0]), linearWant(x); !closeTo(got, want, 1e-5) {
					errs <- fmt.Errorf("worker %d run %d: x %v: y %v, want %v", w, r, x, got, want)
					return
				}
				if !reflect.DeepEqual(out[0].Shape, []int64{int64(batch), 3}) {
					errs <- fmt.Errorf("shape %v", out[0].Shape)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestCloseWhileRunning(t *testing.T) {
	s := openSession(t, "slow.onnx", SessionOptions{Optimize: true})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := s.Run(ctx, []*Tensor{floats([]int64{1, 1}, 1)})
		done <- err
	}()
	for { // wait for the run to start
		s.mu.Lock()
		active := s.active
		s.mu.Unlock()
		if active == 1 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	start := time.Now()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 100*time.Millisecond {
		t.Errorf("Close waited %v for the run", d)
	}
	if _, err := s.Run(context.Background(), []*Tensor{floats([]int64{1, 1}, 1)}); !errors.Is(err, ErrSessionClosed) {
		t.Errorf("Run after Close: %v", err)
	}
	s.mu.Lock()
	stillThere := s.sess != nil
	s.mu.Unlock()
	if !stillThere {
		t.Fatal("session freed while a run was in flight")
	}
	cancel()
	wantORTError(t, <-done, "Exiting due to terminate flag being set to true")
	s.mu.Lock()
	sess, active := s.sess, s.active
	s.mu.Unlock()
	if sess != nil || active != 0 {
		t.Errorf("after the last run: sess %v, active %d", sess, active)
	}
	if err := s.Close(); err != nil { // again
		t.Error(err)
	}
}

func TestErrorMessageCleanup(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"  plain message \n", "plain message"},
		{"Got invalid dimensions for input: x for the following indices\n index: 1 Got: 5 Expected: 4\n Please fix either the inputs/outputs or the model.",
			"Got invalid dimensions for input: x for the following indices index: 1 Got: 5 Expected: 4 Please fix either the inputs/outputs or the model."},
		{"Unexpected input data type. Actual: (tensor(int32)) , expected: (tensor(float))",
			"Unexpected input data type. Actual: (tensor(int32)) , expected: (tensor(float))"},
		{"/onnxruntime_src/onnxruntime/core/graph/graph.cc:1494 void onnxruntime::Graph::InitializeStateFromModelFileGraphProto() This is an invalid model. Graph output (y) does not exist in the graph.",
			"This is an invalid model. Graph output (y) does not exist in the graph."},
		{"/src/a/b.h:12 onnxruntime::common::Status onnxruntime::F(const T*, int) [with T = float; U = int] Something failed.",
			"Something failed."},
		{"/src/a/b.cc:12 void f() const Bad.", "Bad."},
		{"Deserialize tensor W failed.endian_utils.cc:66 CopyLittleEndian source and destination buffer size mismatch",
			"Deserialize tensor W failed.endian_utils.cc:66 CopyLittleEndian source and destination buffer size mismatch"},
		{"/src/a/b.cc:12 no function here", "/src/a/b.cc:12 no function here"},
		{"/src/a/b.cc:12 void f()", "/src/a/b.cc:12 void f()"},
		{"file.txt:12 void f() x", "file.txt:12 void f() x"},
	} {
		if got := newORTError(fmt.Errorf("Error running network: %w", errors.New(tc.in))).Msg; got != tc.want {
			t.Errorf("%q:\n got %q\nwant %q", tc.in, got, tc.want)
		}
	}
}

// Runs under a deadline reuse their ORT run options, and a terminated run
// leaves no terminate flag behind: the next run on the same options runs
// until its own deadline, not a moment. The watchdog stops a run bounded by
// a context.WithTimeout and one bounded by a RunContext alike.
func TestRunOptionsReused(t *testing.T) {
	s := openSession(t, "slow.onnx", SessionOptions{Optimize: true})
	x := floats([]int64{1, 1}, 0.5)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	_, err := s.Run(ctx, []*Tensor{x})
	cancel()
	wantORTError(t, err, "Exiting due to terminate flag being set to true")
	s.mu.Lock()
	pooled := slices.Clone(s.pool)
	s.mu.Unlock()
	if len(pooled) != 1 || pooled[0].w.ctx != nil {
		t.Fatalf("pool after a terminated run: %+v", pooled)
	}
	// The second run is bounded by a RunContext, as the run queue's are.
	start := time.Now()
	rc := NewRunContext(600 * time.Millisecond)
	_, err = s.Run(rc, []*Tensor{x})
	rc.Release()
	wantORTError(t, err, "Exiting due to terminate flag being set to true")
	if e := time.Since(start); e < 500*time.Millisecond {
		t.Errorf("the second run ended after %v, before its deadline: a stale terminate flag", e)
	}
	s.mu.Lock()
	again := slices.Clone(s.pool)
	s.mu.Unlock()
	if len(again) != 1 || again[0] != pooled[0] {
		t.Errorf("the run options were not reused: %v then %v", pooled, again)
	}
}

// A run gets one thread by default below manyCPUs CPUs, two from it.
func TestIntraOpDefault(t *testing.T) {
	for cpus, want := range map[int]int{1: 1, 2: 1, 7: 1, 8: 2, 16: 2, 64: 2} {
		if got := intraOpDefault(cpus); got != want {
			t.Errorf("intraOpDefault(%d) = %d, want %d", cpus, got, want)
		}
	}
}
