//go:build cgo && !noort

// Command engines compares the pure-Go engine (package goengine) with ONNX
// Runtime in this process (modelstore.InProcess, the server's default
// options: OPTIMIZE 1, one intra-op thread), for docs/BENCHMARKS.md ("Pure-Go
// engine"; `make bench-engines`):
//
//	engines [-models dir] [-budget 2s] [-huge m.onnx] [-doc docs/BENCHMARKS.md]
//
// Per model and batch size (1 and 32): microseconds per run of each engine
// on the same random input, measured in alternating blocks (ORT, Go, ORT,
// Go, ...) so that a machine busy with other work slows both alike; the
// figure is the median block. With -huge, for that model: session creation
// time and the process's peak memory (VmHWM, reset after the model is read)
// with each engine, each in a process of its own (this program run with
// -create), the model's bytes read into memory first as the server holds
// them; twice each, alternating.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"github.com/enclaveai/enclaveai/goengine"
	"github.com/enclaveai/enclaveai/modelstore"
)

var models = []struct {
	file  string
	shape []int64 // after the batch dimension
}{
	{"linear.onnx", []int64{4}},
	{"mlp.onnx", []int64{784}},
	{"cnn.onnx", []int64{1, 28, 28}},
	{"transformer.onnx", []int64{64, 256}},
}

func main() {
	dir := flag.String("models", "redis_tests/models", "directory of the generated models")
	budget := flag.Duration("budget", 2*time.Second, "time per engine, model and batch size")
	huge := flag.String("huge", "", "a large model: session creation time and peak memory")
	create := flag.String("create", "", "internal: create one session of this model with -engine and print JSON")
	engine := flag.String("engine", "go", "internal: go or onnxruntime")
	doc := flag.String("doc", "", "rewrite this file's section between the engines markers")
	flag.Parse()
	if err := modelstore.InitRuntime(""); err != nil {
		fail(err)
	}
	if *create != "" {
		fail(createOnce(*create, *engine))
		return
	}
	var report strings.Builder
	fmt.Fprintf(&report, "Measured %s on %d CPUs (%s): `make bench-engines`.\n\n", time.Now().UTC().Format("2006-01-02"), runtime.NumCPU(), runtime.Version())
	report.WriteString("| model | batch | ONNX Runtime µs/run | pure-Go µs/run | Go / ORT |\n|---|---|---|---|---|\n")
	for _, m := range models {
		data, err := os.ReadFile(filepath.Join(*dir, m.file))
		if err != nil {
			fail(fmt.Errorf("%v (run `make models`)", err))
		}
		for _, b := range []int64{1, 32} {
			o, g, err := compare(data, append([]int64{b}, m.shape...), *budget)
			if err != nil {
				fail(fmt.Errorf("%s: %w", m.file, err))
			}
			line := fmt.Sprintf("| %s | %d | %.0f | %.0f | %.1fx |\n", m.file, b, o, g, g/o)
			fmt.Print(line)
			report.WriteString(line)
		}
	}
	if *huge != "" {
		st, err := os.Stat(*huge)
		if err != nil {
			fail(err)
		}
		size := float64(st.Size())
		fmt.Fprintf(&report, "\nSession creation for a %.0f MB model (redis_tests/models/huge_model.py), each in its own process; memory as multiples of the model's size (the bytes the server stores count as 1):\n\n", size/1e6)
		report.WriteString("| engine | run | creation s | peak RSS | RSS after (GC'd) |\n|---|---|---|---|---|\n")
		for run := 1; run <= 2; run++ {
			for _, e := range []string{"onnxruntime", "go"} {
				r, err := spawn(*huge, e)
				if err != nil {
					fail(err)
				}
				line := fmt.Sprintf("| %s | %d | %.2f | %.2fx (%.0f MB) | %.2fx |\n", e, run, r.Seconds,
					float64(r.Peak)/size, float64(r.Peak)/1e6, float64(r.After)/size)
				fmt.Print(line)
				report.WriteString(line)
			}
		}
	}
	if *doc != "" {
		fail(rewrite(*doc, report.String()))
	}
}

func fail(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "engines:", err)
		os.Exit(1)
	}
}

func randomInput(shape []int64) *modelstore.Tensor {
	r := rand.New(rand.NewSource(1))
	f := make([]float32, modelstore.ShapeLen(shape))
	for i := range f {
		f[i] = float32(r.NormFloat64())
	}
	return &modelstore.Tensor{DType: modelstore.Float, Shape: shape,
		Data: unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(f))), 4*len(f))}
}

// compare returns µs per run of ONNX Runtime and of the pure-Go engine.
func compare(data []byte, shape []int64, budget time.Duration) (ortUS, goUS float64, err error) {
	src := modelstore.ModelSource{Data: data}
	o, err := modelstore.InProcess{}.Compile(src, modelstore.SessionOptions{Optimize: true})
	if err != nil {
		return 0, 0, err
	}
	defer o.Close()
	g, err := goengine.Engine{}.Compile(src, modelstore.SessionOptions{Optimize: true})
	if err != nil {
		return 0, 0, err
	}
	defer g.Close()
	in := []*modelstore.Tensor{randomInput(shape)}
	sessions := []modelstore.EngineSession{o, g}
	// One run each to warm up and size the blocks: about 100 ms, at least
	// one run.
	per := make([]int, 2)
	for i, s := range sessions {
		t := time.Now()
		if _, err := s.Run(context.Background(), in); err != nil {
			return 0, 0, err
		}
		per[i] = max(1, int(100*time.Millisecond/max(time.Since(t), time.Microsecond)))
	}
	samples := make([][]float64, 2)
	start := time.Now()
	for round := 0; round < 3 || (time.Since(start) < 2*budget && round < 50); round++ {
		for i, s := range sessions {
			t := time.Now()
			for range per[i] {
				if _, err := s.Run(context.Background(), in); err != nil {
					return 0, 0, err
				}
			}
			samples[i] = append(samples[i], float64(time.Since(t).Microseconds())/float64(per[i]))
		}
	}
	return median(samples[0]), median(samples[1]), nil
}

func median(v []float64) float64 {
	slices.Sort(v)
	return v[len(v)/2]
}

type created struct {
	Seconds float64
	Peak    int64 // VmHWM during creation, bytes
	After   int64 // VmRSS after creation and a GC, bytes
}

func spawn(model, engine string) (created, error) {
	exe, err := os.Executable()
	if err != nil {
		return created{}, err
	}
	out, err := exec.Command(exe, "-create", model, "-engine", engine).Output()
	if err != nil {
		return created{}, fmt.Errorf("%s session: %w", engine, err)
	}
	var c created
	return c, json.Unmarshal(out, &c)
}

// status reads a field of /proc/self/status, in bytes.
func status(field string) int64 {
	b, _ := os.ReadFile("/proc/self/status")
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			kb, _ := strconv.ParseInt(strings.Fields(rest)[0], 10, 64)
			return kb << 10
		}
	}
	return -1
}

func createOnce(path, engine string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var e modelstore.Engine = modelstore.InProcess{}
	if engine == "go" {
		e = goengine.Engine{}
	}
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		return err
	}
	t := time.Now()
	s, err := e.Compile(modelstore.ModelSource{Data: data}, modelstore.SessionOptions{Optimize: true})
	if err != nil {
		return err
	}
	c := created{Seconds: time.Since(t).Seconds(), Peak: status("VmHWM")}
	debug.FreeOSMemory()
	c.After = status("VmRSS")
	runtime.KeepAlive(data)
	runtime.KeepAlive(s)
	return json.NewEncoder(os.Stdout).Encode(c)
}

// rewrite replaces the text between the markers in the document.
func rewrite(path, body string) error {
	const begin, end = "<!-- bench-engines begin -->\n", "<!-- bench-engines end -->"
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	s := string(b)
	i, j := strings.Index(s, begin), strings.Index(s, end)
	if i < 0 || j < i {
		return fmt.Errorf("%s has no %q ... %q section", path, strings.TrimSpace(begin), end)
	}
	return os.WriteFile(path, []byte(s[:i+len(begin)]+body+s[j:]), 0o644)
}
