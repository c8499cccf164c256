//go:build cgo && !noort

package modelstore

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
)

// Models for the shared-weights tests are written field by field (numbers
// from onnx.proto): they need initializers of tens of MiB, and control
// over where their raw_data lands (its alignment).

func xField(num int, payload []byte) []byte {
	b := binary.AppendUvarint(nil, uint64(num)<<3|wireBytes)
	b = binary.AppendUvarint(b, uint64(len(payload)))
	return append(b, payload...)
}

func xInt(num int, v int64) []byte {
	return binary.AppendUvarint(binary.AppendUvarint(nil, uint64(num)<<3|wireVarint), uint64(v))
}

func xJoin(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

// xNode is a NodeProto; attrs are AttributeProtos.
func xNode(op string, in, out []string, attrs ...[]byte) []byte {
	var parts [][]byte
	for _, s := range in {
		parts = append(parts, xField(1, []byte(s)))
	}
	for _, s := range out {
		parts = append(parts, xField(2, []byte(s)))
	}
	parts = append(parts, xField(4, []byte(op)))
	for _, a := range attrs {
		parts = append(parts, xField(5, a))
	}
	return xField(1, xJoin(parts...))
}

func xIntAttr(name string, v int64) []byte {
	return xJoin(xField(1, []byte(name)), xInt(3, v), xInt(20, 2)) // type INT
}

// xValueInfo declares a FLOAT tensor.
func xValueInfo(field int, name string, dims ...int64) []byte {
	var shape []byte
	for _, d := range dims {
		shape = append(shape, xField(1, xInt(1, d))...)
	}
	tt := xJoin(xInt(1, onnxFloat), xField(2, shape))
	return xField(field, xJoin(xField(1, []byte(name)), xField(2, xField(1, tt))))
}

// xInit is a FLOAT initializer with raw_data.
func xInit(name string, w []float32, dims ...int64) []byte {
	var t []byte
	for _, d := range dims {
		t = append(t, xInt(1, d)...)
	}
	t = append(t, xInt(2, onnxFloat)...)
	t = append(t, xField(8, []byte(name))...)
	return xField(5, append(t, xField(9, f32bytes(w))...))
}

// xModel wraps graph fields into a ModelProto (IR 8, opset 13). pad
// lengthens the graph's name, which comes before its initializers, to
// move their raw_data by that many bytes.
func xModel(pad int, graph ...[]byte) []byte {
	name := xField(2, []byte("g"+strings.Repeat("_", pad)))
	g := xJoin(append([][]byte{name}, graph...)...)
	return xJoin(xInt(1, 8), xField(8, xInt(2, 13)), xField(7, g))
}

func f32bytes(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, f := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(f))
	}
	return b
}

func randFloats(r *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = r.Float32() - 0.5
	}
	return v
}

// matmulModel: y[1,n] = x[1,k] @ W[k,n].
func matmulModel(pad, k, n int, w []float32) []byte {
	return xModel(pad,
		xNode("MatMul", []string{"x", "W"}, []string{"y"}),
		xInit("W", w, int64(k), int64(n)),
		xValueInfo(11, "x", 1, int64(k)), xValueInfo(12, "y", 1, int64(n)))
}

func matmulWant(x, w []float32, k, n int) []float64 {
	y := make([]float64, n)
	for i := 0; i < k; i++ {
		for j := 0; j < n; j++ {
			y[j] += float64(x[i]) * float64(w[i*n+j])
		}
	}
	return y
}

// rawDataOffset finds where the named initializer's raw_data starts.
func rawDataOffset(t *testing.T, model []byte, name string) int {
	t.Helper()
	p, err := planSharedWeights(model)
	if err != nil || p == nil {
		t.Fatalf("planSharedWeights: %v, %v", p, err)
	}
	for _, in := range p.inits {
		if in.name == name {
			return in.off
		}
	}
	t.Fatalf("initializer %s not planned", name)
	return 0
}

// smallerSharedMin lets the test share models of 16 MiB of weights.
func smallerSharedMin(t *testing.T) {
	old := sharedMinTotal
	sharedMinTotal = 16 << 20
	t.Cleanup(func() { sharedMinTotal = old })
}

func runOne(t *testing.T, s *Session, in *Tensor) []float64 {
	t.Helper()
	out, err := s.Run(t.Context(), []*Tensor{in})
	if err != nil {
		t.Fatal(err)
	}
	return tensorFloats(out[0])
}

// The plan leaves out exactly the large initializers' raw_data, which the
// small model refers to instead; everything else is kept byte for byte.
func TestPlanSharedWeights(t *testing.T) {
	smallerSharedMin(t)
	r := rand.New(rand.NewSource(1))
	big := randFloats(r, 5<<20) // 20 MiB
	small := randFloats(r, 16)
	m := xModel(0,
		xNode("Add", []string{"x", "S"}, []string{"y"}),
		xInit("S", small, 16), xInit("B", big, 5<<20),
		xValueInfo(11, "x", 16), xValueInfo(12, "y", 16))
	p, err := planSharedWeights(m)
	if err != nil || p == nil {
		t.Fatalf("plan = %v, %v", p, err)
	}
	if len(p.inits) != 1 || p.inits[0].name != "B" || p.bytes != 20<<20 {
		t.Fatalf("planned %+v", p.inits)
	}
	in := p.inits[0]
	if !bytes.Equal(m[in.off:in.off+in.size], f32bytes(big)) {
		t.Error("offset does not point at B's raw_data")
	}
	if len(p.graph) > 4096 {
		t.Errorf("small model is %d bytes", len(p.graph))
	}
	if !bytes.Contains(p.graph, f32bytes(small)) {
		t.Error("the small initializer's data was dropped")
	}
	for _, s := range []string{sharedLocation, "offset", strconv.Itoa(in.off), strconv.Itoa(in.size)} {
		if !bytes.Contains(p.graph, []byte(s)) {
			t.Errorf("small model lacks %q", s)
		}
	}
	if err := checkMessage(p.graph, 0, msgModel, 1); err != ErrModelExternalData {
		t.Errorf("small model check = %v, want it to carry external data", err)
	}

	// Too little to share: nil plan.
	if p, err := planSharedWeights(xModel(0, xInit("S", randFloats(r, 1<<20), 1<<20))); p != nil || err != nil {
		t.Errorf("4 MiB of weights planned %v, %v", p, err)
	}
	// Malformed input is an error, not a panic.
	if _, err := planSharedWeights(m[:len(m)/2]); err == nil {
		t.Error("truncated model planned without error")
	}
}

// A shared session gives the same results as ORT's own copy, for weights
// at every alignment (protobuf does not align raw_data), through the
// kernels large models spend their time in: MatMul, Gemm and Conv. A model
// ORT cannot load with shared weights falls back to ORT's copy.
func TestSharedWeightsMisaligned(t *testing.T) {
	smallerSharedMin(t)
	requireRuntime(t)
	r := rand.New(rand.NewSource(2))
	const k, n = 1024, 4608 // 18 MiB of weights
	w := randFloats(r, k*n)
	x := randFloats(r, k)
	want := matmulWant(x, w, k, n)
	b := randFloats(r, n)
	wantGemm := make([]float64, n) // Gemm with W^T: y = x @ W' + b, W' = W read as [n,k]
	for j := 0; j < n; j++ {
		s := float64(b[j])
		for i := 0; i < k; i++ {
			s += float64(x[i]) * float64(w[j*k+i])
		}
		wantGemm[j] = s
	}
	const c, hw = 700, 5 // Conv: 700x700x3x3 weights (17 MiB) over [1,700,5,5]
	cw := randFloats(r, c*c*9)
	cx := randFloats(r, c*hw*hw)
	wantConv := make([]float64, c*3*3)
	for m := 0; m < c; m++ {
		for oy := 0; oy < 3; oy++ {
			for ox := 0; ox < 3; ox++ {
				s := 0.0
				for ch := 0; ch < c; ch++ {
					for ky := 0; ky < 3; ky++ {
						for kx := 0; kx < 3; kx++ {
							s += float64(cx[(ch*hw+oy+ky)*hw+ox+kx]) * float64(cw[((m*c+ch)*3+ky)*3+kx])
						}
					}
				}
				wantConv[(m*3+oy)*3+ox] = s
			}
		}
	}
	for pad := 0; pad < 4; pad++ {
		models := []struct {
			name  string
			model []byte
			in    *Tensor
			want  []float64
		}{
			{"MatMul", matmulModel(pad, k, n, w), floats([]int64{1, k}, x...), want},
			{"Gemm", xModel(pad,
				xNode("Gemm", []string{"x", "W", "b"}, []string{"y"}, xIntAttr("transB", 1)),
				xInit("W", w, n, k), xInit("b", b, n),
				xValueInfo(11, "x", 1, k), xValueInfo(12, "y", 1, n)), floats([]int64{1, k}, x...), wantGemm},
			{"Conv", xModel(pad,
				xNode("Conv", []string{"x", "W"}, []string{"y"}),
				xInit("W", cw, c, c, 3, 3),
				xValueInfo(11, "x", 1, c, hw, hw), xValueInfo(12, "y", 1, c, 3, 3)), floats([]int64{1, c, hw, hw}, cx...), wantConv},
		}
		for _, tc := range models {
			off := rawDataOffset(t, tc.model, "W")
			for _, optimize := range []bool{false, true} {
				s, err := NewSharedSession(tc.model, nil, SessionOptions{Optimize: optimize})
				if err != nil {
					t.Fatalf("%s (raw_data at %d mod 4): %v", tc.name, off%4, err)
				}
				// At the highest level ORT rewrites Conv weights into its
				// NCHWc layout, which needs them in the graph: ORT's copy.
				wantMode := WeightsShared
				if tc.name == "Conv" && optimize {
					wantMode = WeightsCopied
				}
				if mode, _ := s.Weights(); mode != wantMode {
					t.Errorf("%s, optimize %v: weights %v, want %v", tc.name, optimize, mode, wantMode)
				}
				if got := runOne(t, s, tc.in); !closeTo(got, tc.want, 1e-3) {
					t.Errorf("%s, raw_data at %d mod 4, optimize %v: got %v..., want %v...",
						tc.name, off%4, optimize, got[:3], tc.want[:3])
				}
				s.Close()
			}
		}
	}
}

// Constant folding derives new tensors from shared initializers (here the
// transpose of W): ORT reads the shared value for that, never the
// placeholder reference.
func TestSharedWeightsConstantFolding(t *testing.T) {
	smallerSharedMin(t)
	requireRuntime(t)
	r := rand.New(rand.NewSource(3))
	const k, n = 1024, 4608
	w := randFloats(r, k*n) // stored [n,k], transposed by the graph
	x := randFloats(r, k)
	m := xModel(1,
		xNode("Transpose", []string{"W"}, []string{"Wt"}),
		xNode("MatMul", []string{"x", "Wt"}, []string{"y"}),
		xInit("W", w, n, k),
		xValueInfo(11, "x", 1, k), xValueInfo(12, "y", 1, n))
	want := make([]float64, n)
	for j := 0; j < n; j++ {
		for i := 0; i < k; i++ {
			want[j] += float64(x[i]) * float64(w[j*k+i])
		}
	}
	for _, optimize := range []bool{false, true} {
		s, err := NewSharedSession(m, nil, SessionOptions{Optimize: optimize})
		if err != nil {
			t.Fatal(err)
		}
		if got := runOne(t, s, floats([]int64{1, k}, x...)); !closeTo(got, want, 1e-3) {
			t.Errorf("optimize %v: got %v..., want %v...", optimize, got[:3], want[:3])
		}
		s.Close()
	}
}

// A ModelBuffer in Go memory (where mmap is unavailable) is shared too:
// the session pins it as well as referencing it.
func TestSharedWeightsHeapBuffer(t *testing.T) {
	requireRuntime(t)
	smallerSharedMin(t)
	forceHeap.Store(true)
	t.Cleanup(func() { forceHeap.Store(false) })
	const k, n = 1024, 4608
	r := rand.New(rand.NewSource(7))
	w, x := randFloats(r, k*n), randFloats(r, k)
	model := matmulModel(3, k, n, w)
	buf, err := NewModelBuffer(int64(len(model)), int64(len(model)))
	if err != nil {
		t.Fatal(err)
	}
	fillChunks(t, buf, model)
	buf.Seal()
	s, err := NewSharedSession(buf.Bytes(), buf, SessionOptions{Optimize: true})
	if err != nil {
		t.Fatal(err)
	}
	buf.Unref()
	if mode, _ := s.Weights(); mode != WeightsShared || buf.Mapped() {
		t.Fatalf("weights %v, mapped %v", mode, buf.Mapped())
	}
	if got := runOne(t, s, floats([]int64{1, k}, x...)); !closeTo(got, matmulWant(x, w, k, n), 1e-3) {
		t.Errorf("got %v..., want %v...", got[:3], matmulWant(x, w, k, n)[:3])
	}
	s.Close()
	if buf.Len() != 0 {
		t.Error("the session's reference outlived it")
	}
}

// The point of sharing: creating the session adds next to nothing to the
// process's memory, where ORT's own copy adds the whole model (the control
// that shows the measurement can see it).
func TestSharedWeightsMemory(t *testing.T) {
	requireRuntime(t)
	if runtime.GOOS != "linux" {
		t.Skip("RSS from /proc")
	}
	const k, n = 4096, 8192 // 128 MiB
	buf, err := NewModelBuffer(1<<30, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewSource(4))
	model := matmulModel(0, k, n, randFloats(r, k*n))
	dst, err := buf.Extend(int64(len(model)))
	if err != nil {
		t.Fatal(err)
	}
	copy(dst, model)
	buf.Filled(len(model))
	buf.Seal()
	model = nil
	debug.FreeOSMemory()
	size := int64(buf.Len())

	before := rss(t)
	s, err := NewSharedSession(buf.Bytes(), buf, SessionOptions{Optimize: true})
	if err != nil {
		t.Fatal(err)
	}
	shared := rss(t) - before
	if mode, _ := s.Weights(); mode != WeightsShared {
		t.Fatalf("weights %v", mode)
	}
	if shared > size/8 {
		t.Errorf("a shared session grew RSS by %d MiB for a %d MiB model", shared>>20, size>>20)
	}
	// The session holds a reference: the buffer outlives our own.
	buf.Unref()
	x := make([]float32, k)
	x[0] = 1
	got := runOne(t, s, floats([]int64{1, k}, x...))
	if len(got) != n {
		t.Fatalf("%d outputs", len(got))
	}
	s.Close()

	model = matmulModel(0, k, n, randFloats(r, k*n))
	debug.FreeOSMemory()
	before = rss(t)
	c, err := NewSession(model, SessionOptions{Optimize: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if copied := rss(t) - before; copied < size/2 {
		t.Errorf("control: ORT's own copy grew RSS by only %d MiB; the measurement sees nothing", copied>>20)
	}
	t.Logf("session RSS growth for a %d MiB model: shared %d MiB", size>>20, shared>>20)
}
