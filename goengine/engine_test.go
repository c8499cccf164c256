package goengine

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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
