//go:build cgo && !noort

// Command hugesession times the creation of an ONNX Runtime session for one
// large model, in one of two ways, for bench/huge.py (docs/BENCHMARKS.md,
// "Huge models"):
//
//	hugesession -model m.onnx -mode ort     # onnxruntime_go from the bytes
//	hugesession -model m.onnx -mode shared  # EnclaveAI's shared weights
//
// ort is what a plain onnxruntime_go program does: the model's bytes in Go
// memory, NewDynamicAdvancedSessionWithONNXData with ORT's default options
// (all optimizations, prepacking). shared is what the server does with an
// upload: the bytes in a ModelBuffer, modelstore.NewSharedSession with the
// server's default options (OPTIMIZE 1). Each way runs in its own process so
// that the resident set sizes it reports are its own. The model is read
// before the clock starts; the session is then created, and one inference
// run checks it works. It prints one JSON object: seconds, RSS before and
// after, and the peak RSS (VmHWM, reset before the session is created).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	ort "github.com/yalue/onnxruntime_go"

	"github.com/enclaveai/enclaveai/modelstore"
)

// status reads fields of /proc/self/status in bytes.
func status(field string) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			kb, _ := strconv.ParseInt(strings.Fields(rest)[0], 10, 64)
			return kb << 10
		}
	}
	return -1
}

func main() {
	path := flag.String("model", "", "the .onnx file")
	mode := flag.String("mode", "shared", "ort or shared")
	flag.Parse()
	if err := run(*path, *mode); err != nil {
		fmt.Fprintln(os.Stderr, "hugesession:", err)
		os.Exit(1)
	}
}

func run(path, mode string) error {
	if err := modelstore.InitRuntime(""); err != nil {
		return err
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	size := st.Size()
	var data []byte
	var buf *modelstore.ModelBuffer
	if mode == "shared" {
		if buf, err = modelstore.NewModelBuffer(size, size); err != nil {
			return err
		}
		if data, err = buf.Extend(size); err != nil {
			return err
		}
	} else {
		data = make([]byte, size)
	}
	if _, err := io.ReadFull(f, data); err != nil {
		return err
	}
	if buf != nil {
		buf.Filled(len(data))
		buf.Seal()
	}
	os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) // resets VmHWM
	before := status("VmRSS")

	out := map[string]any{"mode": mode, "model_bytes": size, "rss_before": before}
	t0 := time.Now()
	var runOnce func() error
	switch mode {
	case "ort":
		s, err := ort.NewDynamicAdvancedSessionWithONNXData(data, []string{"x"}, []string{"y"}, nil)
		if err != nil {
			return err
		}
		out["seconds"] = time.Since(t0).Seconds()
		defer s.Destroy()
		runOnce = func() error {
			x, err := ort.NewEmptyTensor[float32](ort.NewShape(1, 4096))
			if err != nil {
				return err
			}
			defer x.Destroy()
			y := []ort.Value{nil}
			if err := s.Run([]ort.Value{x}, y); err != nil {
				return err
			}
			y[0].Destroy()
			return nil
		}
	case "shared":
		s, err := modelstore.NewSharedSession(data, buf, modelstore.SessionOptions{Optimize: true})
		if err != nil {
			return err
		}
		out["seconds"] = time.Since(t0).Seconds()
		defer s.Close()
		mode, shared := s.Weights()
		out["weights"], out["shared_bytes"] = mode.String(), shared
		runOnce = func() error {
			x := &modelstore.Tensor{DType: modelstore.Float, Shape: []int64{1, 4096}, Data: make([]byte, 4*4096)}
			_, err := s.Run(context.Background(), []*modelstore.Tensor{x})
			return err
		}
	default:
		return fmt.Errorf("unknown mode %q", mode)
	}
	out["rss_after_session"] = status("VmRSS")
	out["rss_peak"] = status("VmHWM")
	if err := runOnce(); err != nil {
		return fmt.Errorf("inference: %w", err)
	}
	out["rss_after_run"] = status("VmRSS")
	return json.NewEncoder(os.Stdout).Encode(out)
}
