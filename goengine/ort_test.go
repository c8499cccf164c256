//go:build cgo && !noort

package goengine

import (
	"context"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"unsafe"

	"github.com/enclaveai/enclaveai/modelstore"
)

var ortOnce struct {
	sync.Once
	err error
}

// requireORT loads ONNX Runtime from the Makefile's cache.
func requireORT(t *testing.T) {
	t.Helper()
	ortOnce.Do(func() {
		lib := os.Getenv(modelstore.RuntimeLibraryEnv)
		if lib == "" {
			lib = filepath.Join("..", ".cache", "onnxruntime", modelstore.RuntimeVersionWanted, "libonnxruntime.so.1")
		}
		ortOnce.err = modelstore.InitRuntime(lib)
	})
	if ortOnce.err != nil {
		t.Fatalf("ONNX Runtime (run `make ort`): %v", ortOnce.err)
	}
}

func randomFloats(r *rand.Rand, shape ...int64) *modelstore.Tensor {
	n := modelstore.ShapeLen(shape)
	f := make([]float32, n)
	for i := range f {
		f[i] = float32(r.NormFloat64())
	}
	return &modelstore.Tensor{DType: modelstore.Float, Shape: shape, Data: asBytes(f)}
}

func floatsOf(t *modelstore.Tensor) []float32 {
	return unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(t.Data))), len(t.Data)/4)
}

// The benchmark models give ONNX Runtime's outputs (rtol 1e-3, atol 1e-4)
// at two batch sizes, run on both engines from the same bytes.
func TestMatchesONNXRuntime(t *testing.T) {
	requireORT(t)
	for _, c := range []struct {
		model   string
		shape   []int64 // after the batch dimension
		batches []int64
	}{
		{"linear.onnx", []int64{4}, []int64{1, 32}},
		{"mlp.onnx", []int64{784}, []int64{1, 32}},
		{"cnn.onnx", []int64{1, 28, 28}, []int64{1, 32}},
		{"transformer.onnx", []int64{64, 256}, []int64{1, 2}},
	} {
		t.Run(c.model, func(t *testing.T) {
			model := readTestModel(t, c.model)
			src := modelstore.ModelSource{Data: model}
			ort, err := modelstore.InProcess{}.Compile(src, modelstore.SessionOptions{Optimize: true})
			if err != nil {
				t.Fatal(err)
			}
			defer ort.Close()
			gos, err := Engine{}.Compile(src, modelstore.SessionOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer gos.Close()
			if len(gos.Inputs()) != len(ort.Inputs()) || len(gos.Outputs()) != len(ort.Outputs()) {
				t.Fatalf("io: go %v -> %v, ort %v -> %v", gos.Inputs(), gos.Outputs(), ort.Inputs(), ort.Outputs())
			}
			r := rand.New(rand.NewSource(1))
			for _, b := range c.batches {
				in := randomFloats(r, append([]int64{b}, c.shape...)...)
				want, err := ort.Run(context.Background(), []*modelstore.Tensor{in})
				if err != nil {
					t.Fatal(err)
				}
				got, err := gos.Run(context.Background(), []*modelstore.Tensor{in})
				if err != nil {
					t.Fatalf("batch %d: %v", b, err)
				}
				for i := range want {
					if !equalShape(got[i].Shape, want[i].Shape) || got[i].DType != want[i].DType {
						t.Fatalf("batch %d output %d: %s %v, ORT %s %v", b, i, got[i].DType, got[i].Shape, want[i].DType, want[i].Shape)
					}
					g, w := floatsOf(got[i]), floatsOf(want[i])
					for k := range w {
						if d := math.Abs(float64(g[k] - w[k])); d > 1e-4+1e-3*math.Abs(float64(w[k])) {
							t.Fatalf("batch %d output %d[%d]: %g, ORT %g", b, i, k, g[k], w[k])
						}
					}
				}
			}
		})
	}
}

func equalShape(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
