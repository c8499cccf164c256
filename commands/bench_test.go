package commands_test

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/enclaveai/enclaveai/commands"
	"github.com/enclaveai/enclaveai/config"
	"github.com/enclaveai/enclaveai/modelstore"
)

// The tensor commands without the network: parse, run and reply writing
// as the dispatcher does them for each command a connection reads. The
// socket side is BenchmarkReader in package server; the whole path against
// Redis is redis-benchmark in `make bench` (docs/BENCHMARKS.md).

// benchBlob is a 784-float (3136-byte) FLOAT tensor, the size
// docs/BENCHMARKS.md measures end to end.
var benchBlob = bytes.Repeat([]byte{0, 0, 128, 63}, 784) // 1.0f

func benchServer(b testing.TB) (*commands.App, *commands.Client) {
	b.Helper()
	s := commands.NewApp(config.Default(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	return s, s.NewClient("127.0.0.1:1", "127.0.0.1:2", nil)
}

func BenchmarkTensorSet(b *testing.B) {
	s, c := benchServer(b)
	argv := [][]byte{[]byte("AI.TENSORSET"), []byte("t"), []byte("FLOAT"), []byte("784"), []byte("BLOB"), benchBlob}
	// The reader hands over arguments of 512 bytes or more as their own
	// allocations (server.smallArg), which the handler may keep.
	owned := commands.OwnedFunc(func(i int) bool { return len(argv[i]) >= 512 })
	b.SetBytes(int64(len(benchBlob)))
	b.ReportAllocs()
	for b.Loop() {
		c.W.Reset()
		s.Dispatch(c, argv, owned)
	}
	if got := string(c.W.Bytes()); got != "+OK\r\n" {
		b.Fatalf("reply %q", got)
	}
}

func BenchmarkTensorGet(b *testing.B) {
	s, c := benchServer(b)
	s.Dispatch(c, [][]byte{[]byte("AI.TENSORSET"), []byte("t"), []byte("FLOAT"), []byte("784"), []byte("BLOB"), benchBlob}, nil)
	argv := [][]byte{[]byte("AI.TENSORGET"), []byte("t"), []byte("BLOB")}
	b.SetBytes(int64(len(benchBlob)))
	b.ReportAllocs()
	for b.Loop() {
		c.W.Reset()
		s.Dispatch(c, argv, nil)
	}
	if n := c.W.Len(); n != len(benchBlob)+len("$3136\r\n\r\n") {
		b.Fatalf("reply of %d bytes: %q", n, c.W.Bytes()[:min(n, 64)])
	}
}

// BenchmarkTensorGetParallel is BenchmarkTensorGet from as many clients
// as there are CPUs, all reading one key, as redis-benchmark's
// connections do, the tensor's buffer from the pool as the front end
// reads a blob: what readers of one tensor on several CPUs cost each
// other (the cache lines they all write).
func BenchmarkTensorGetParallel(b *testing.B) {
	s, c := benchServer(b)
	blob := modelstore.BlobBuffer(len(benchBlob))
	copy(blob, benchBlob)
	s.Dispatch(c, [][]byte{[]byte("AI.TENSORSET"), []byte("t"), []byte("FLOAT"), []byte("784"), []byte("BLOB"), blob}, pooledBlob(5))
	argv := [][]byte{[]byte("AI.TENSORGET"), []byte("t"), []byte("BLOB")}
	b.SetBytes(int64(len(benchBlob)))
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		c := s.NewClient("127.0.0.1:1", "127.0.0.1:2", nil)
		for pb.Next() {
			c.W.Reset()
			s.Dispatch(c, argv, nil)
			if c.W.Len() != len(benchBlob)+len("$3136\r\n\r\n") {
				b.Errorf("reply %.40q", c.W.Bytes())
				return
			}
		}
	})
}

// pooledBlob is the Ownership the front end's reader gives a command whose
// argument i it read into a buffer from modelstore.BlobBuffer.
type pooledBlob int

func (p pooledBlob) Owned(i int) bool  { return i == int(p) }
func (p pooledBlob) Pooled(i int) bool { return i == int(p) }

// BenchmarkModelExecute is AI.MODELEXECUTE of linear.onnx on a [1,4]
// input without the network: fetching the model and input, the run queue,
// the ONNX Runtime call and storing the output. Its allocs/op are those of
// the inference hot path (docs/BENCHMARKS.md, "Inference loop").
func BenchmarkModelExecute(b *testing.B) {
	s, c := benchModelServer(b)
	argv := [][]byte{[]byte("AI.MODELEXECUTE"), []byte("m"), []byte("INPUTS"), []byte("1"), []byte("x"), []byte("OUTPUTS"), []byte("1"), []byte("y")}
	b.ReportAllocs()
	for b.Loop() {
		c.W.Reset()
		s.Dispatch(c, argv, nil)
	}
	if got := string(c.W.Bytes()); got != "+OK\r\n" {
		b.Fatalf("reply %q", got)
	}
}

// benchModelServer is benchServer with linear.onnx stored at m (with
// args after the backend's, such as BATCHSIZE) and a [1,4] input at x,
// run in this process.
func benchModelServer(b *testing.B, args ...string) (*commands.App, *commands.Client) {
	lib, err := modelstore.FindRuntimeLibrary("")
	if err != nil {
		lib, err = modelstore.FindRuntimeLibrary(filepath.Join("..", ".cache", "onnxruntime", modelstore.RuntimeVersionWanted, "libonnxruntime.so.1"))
	}
	if err != nil {
		b.Skip(err)
	}
	if err := modelstore.InitRuntime(lib); err != nil {
		b.Fatal(err)
	}
	model, err := os.ReadFile(filepath.Join("..", "modelstore", "testdata", "linear.onnx"))
	if err != nil {
		b.Fatal(err)
	}
	s, c := benchServer(b)
	store := [][]byte{[]byte("AI.MODELSTORE"), []byte("m"), []byte("ONNX"), []byte("CPU")}
	for _, a := range args {
		store = append(store, []byte(a))
	}
	for _, argv := range [][][]byte{
		append(store, []byte("BLOB"), model),
		{[]byte("AI.TENSORSET"), []byte("x"), []byte("FLOAT"), []byte("1"), []byte("4"), []byte("VALUES"), []byte("1"), []byte("2"), []byte("3"), []byte("4")},
	} {
		c.W.Reset()
		s.Dispatch(c, argv, nil)
		if got := string(c.W.Bytes()); got != "+OK\r\n" {
			b.Fatalf("%s: %q", argv[0], got)
		}
	}
	return s, c
}

// BenchmarkModelExecuteBatched is AI.MODELEXECUTE of linear.onnx stored
// with BATCHSIZE 32 from 32 clients at once, each with its own input and
// output keys, without the network: what the run queue's batching costs a
// request besides the model's run (a [n,4] run takes a few µs).
func BenchmarkModelExecuteBatched(b *testing.B) {
	s, _ := benchModelServer(b, "BATCHSIZE", "32")
	var next atomic.Int32
	b.ReportAllocs()
	b.SetParallelism(max(1, 32/runtime.GOMAXPROCS(0))) // 32 clients where GOMAXPROCS divides 32
	b.RunParallel(func(pb *testing.PB) {
		c := s.NewClient("127.0.0.1:1", "127.0.0.1:2", nil)
		in := fmt.Sprintf("x%d", next.Add(1))
		out := "y" + in
		s.Dispatch(c, [][]byte{[]byte("AI.TENSORSET"), []byte(in), []byte("FLOAT"), []byte("1"), []byte("4"), []byte("VALUES"), []byte("1"), []byte("2"), []byte("3"), []byte("4")}, nil)
		if got := string(c.W.Bytes()); got != "+OK\r\n" {
			b.Errorf("AI.TENSORSET: %q", got)
			return
		}
		argv := [][]byte{[]byte("AI.MODELEXECUTE"), []byte("m"), []byte("INPUTS"), []byte("1"), []byte(in), []byte("OUTPUTS"), []byte("1"), []byte(out)}
		for pb.Next() {
			c.W.Reset()
			s.Dispatch(c, argv, nil)
			if got := string(c.W.Bytes()); got != "+OK\r\n" {
				b.Errorf("reply %q", got)
				return
			}
		}
	})
}

// BenchmarkTensorSetLogged is BenchmarkTensorSet with the append-only log
// on (appendfsync as the sub-benchmark says), committing once per 16
// commands as a pipelined client's connection does: the log's cost per
// write without the network or the client.
func BenchmarkTensorSetLogged(b *testing.B) {
	for _, fsync := range []string{"everysec", "always"} {
		b.Run(fsync, func(b *testing.B) {
			opts := config.Default()
			opts.Dir = b.TempDir()
			opts.AppendFsync.Store(&fsync)
			s := commands.NewApp(opts, slog.New(slog.NewTextHandler(io.Discard, nil)))
			s.Snapshot.SealKey = bytes.Repeat([]byte{7}, 32)
			if err := s.LoadData(); err != nil {
				b.Fatal(err)
			}
			defer s.CloseLog()
			c := s.NewClient("127.0.0.1:1", "127.0.0.1:2", nil)
			argv := [][]byte{[]byte("AI.TENSORSET"), []byte("t"), []byte("FLOAT"), []byte("784"), []byte("BLOB"), benchBlob}
			owned := commands.OwnedFunc(func(i int) bool { return len(argv[i]) >= 512 })
			b.SetBytes(int64(len(benchBlob)))
			b.ReportAllocs()
			n := 0
			for b.Loop() {
				s.Dispatch(c, argv, owned)
				if n++; n%16 == 0 {
					s.CommitClient(c)
					c.W.Reset()
				}
			}
			s.CommitClient(c)
			if got := string(c.W.Bytes()); len(got) > 0 && got[0] != '+' {
				b.Fatalf("reply %q", got)
			}
		})
	}
}

// TestTensorCommandAllocs bounds the allocations of the tensor commands as
// the dispatcher runs them for a connection (issue 9: parsing and reply
// building allocate nothing per command in steady state but what the
// command keeps): AI.TENSORSET makes the Tensor it stores, its shape
// within it, and its key's string when the key is longer than a byte (the
// blob is the front end's, kept as it is; the parsed command is the
// connection's scratch), AI.TENSORGET nothing.
func TestTensorCommandAllocs(t *testing.T) {
	s, c := benchServer(t)
	set := [][]byte{[]byte("AI.TENSORSET"), []byte("t"), []byte("FLOAT"), []byte("784"), []byte("BLOB"), benchBlob}
	owned := commands.OwnedFunc(func(i int) bool { return i == 5 })
	// The inference loop's input, [1, 784], at a two-byte key.
	set2 := [][]byte{[]byte("AI.TENSORSET"), []byte("in"), []byte("FLOAT"), []byte("1"), []byte("784"), []byte("BLOB"), benchBlob}
	owned2 := commands.OwnedFunc(func(i int) bool { return i == 6 })
	get := [][]byte{[]byte("AI.TENSORGET"), []byte("t"), []byte("BLOB")}
	for _, tc := range []struct {
		argv  [][]byte
		owned commands.Ownership
		max   float64
	}{{set, owned, 1}, {set2, owned2, 2}, {get, nil, 0}} {
		got := testing.AllocsPerRun(1000, func() {
			c.W.Reset()
			s.Dispatch(c, tc.argv, tc.owned)
		})
		if got > tc.max {
			t.Errorf("%s: %.1f allocations per command, want at most %.0f", tc.argv[0], got, tc.max)
		}
	}
}
