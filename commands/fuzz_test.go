package commands

import (
	"bytes"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/enclaveai/enclaveai/config"
	"github.com/enclaveai/enclaveai/modelstore"
)

// fuzzRuntime initialises ONNX Runtime once, when the library can be found
// (`make fuzz` and `make test` fetch it), so that the fuzzed model commands
// reach their run paths; without it they still get parsed.
var fuzzRuntime sync.Once

// fuzzLinear is a small real model stored before each fuzzed command.
var fuzzLinear []byte

// FuzzDispatch sends arbitrary argument vectors through the dispatcher of a
// server holding a tensor and a model (owned by the default user; half the
// inputs run as another user): no input may panic, every command
// gets exactly one well-formed reply, and the server still answers after.
// The first byte of the input picks a command name from the table (so that
// the fuzzer spends its time in the parsers, not on unknown names); the
// rest is split on spaces into the arguments.
func FuzzDispatch(f *testing.F) {
	fuzzRuntime.Do(func() {
		path, err := modelstore.FindRuntimeLibrary("")
		if err != nil {
			path, err = modelstore.FindRuntimeLibrary(filepath.Join("..", ".cache", "onnxruntime",
				modelstore.RuntimeVersionWanted, "libonnxruntime.so.1"))
		}
		if err == nil && modelstore.InitRuntime(path) == nil {
			fuzzLinear, _ = os.ReadFile(filepath.Join("..", "modelstore", "testdata", "linear.onnx"))
		}
	})
	names := slices.Sorted(maps.Keys(Commands()))
	index := func(name string) byte {
		for i, n := range names {
			if n == name {
				return byte(i)
			}
		}
		f.Fatalf("no command %q", name)
		return 0
	}
	for _, s := range []struct{ cmd, args string }{
		{"ai.tensorset", "t FLOAT 2 2 VALUES 1 2 3 4"},
		{"ai.tensorset", "t INT8 3 BLOB abc"},
		{"ai.tensorget", "x META VALUES"},
		{"ai.modelexecute", "m INPUTS 1 x OUTPUTS 1 y TIMEOUT 100"},
		{"ai.modelstore", "m2 ONNX CPU TAG v BATCHSIZE 2 MINBATCHSIZE 1 BLOB abc"},
		{"ai.dagexecute", "LOAD 1 x PERSIST 1 z |> AI.MODELEXECUTE m INPUTS 1 x OUTPUTS 1 z |> AI.TENSORGET z VALUES"},
		{"ai.dagexecute_ro", "LOAD 1 x |> AI.TENSORSET a FLOAT 1 VALUES 1 |> AI.TENSORGET a BLOB"},
		{"ai.dagexecute_ro", "LOAD 1 x |> AI.TENSORSET s STRING 3 VALUES a  b |> AI.TENSORGET s META VALUES"},
		{"ai.info", "m RESETSTAT"},
		{"ai.config", "GET BACKENDSPATH"},
		{"config", "SET maxmemory 1mb"},
		{"scan", "0 MATCH * COUNT 10 TYPE string"},
		{"hello", "3 AUTH default x SETNAME n"},
		{"client", "SETINFO LIB-NAME x"},
		{"expire", "x 10 NX"},
		{"object", "\r;\r"}, // an error that quotes line breaks is still one reply
	} {
		f.Add(append([]byte{index(s.cmd)}, s.args...))
	}
	if fuzzLinear == nil {
		f.Log("ONNX Runtime not found: model commands are fuzzed without a model")
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) == 0 {
			return
		}
		name := names[int(in[0])%len(names)]
		switch name {
		case "shutdown", "save", "bgsave":
			return // they act on the process and the disk, not on parsing
		}
		opts := config.Default()
		opts.MaxMemory.Store(64 << 20)
		opts.Users = map[string]*config.User{"alice": {Name: "alice", On: true, NoPass: true}}
		h := newHarnessOpts(t, opts)
		h.do("AI.TENSORSET x FLOAT 1 4 VALUES 1 2 3 4")
		if fuzzLinear != nil {
			argv := [][]byte{[]byte("AI.MODELSTORE"), []byte("m"), []byte("ONNX"), []byte("CPU"), []byte("BLOB"), fuzzLinear}
			h.s.Dispatch(h.c, argv, nil)
			if got := render(h.c.W.Bytes()); got != "+OK" {
				t.Fatalf("storing the model: %s", got)
			}
			h.c.W.Reset()
		}
		// Half the inputs run as another user than the model's owner.
		if in[0]&0x80 != 0 {
			h.c.login(login{user: "alice"})
		}
		argv := [][]byte{[]byte(name)}
		if len(in) > 1 {
			argv = append(argv, bytes.Split(in[1:], []byte{' '})...)
		}
		h.s.Dispatch(h.c, argv, nil)
		out := bytes.Clone(h.c.W.Bytes())
		h.c.W.Reset()
		// Exactly one reply: an error may quote the client's bytes (with
		// its line breaks flattened), so render's " ; " between replies
		// cannot tell.
		if _, rest, err := render1(out); err != nil || len(rest) > 0 {
			t.Fatalf("%q: not one well-formed reply: %q", argv, out)
		}
		// The server still serves: a new client's PING (a CONFIG SET
		// requirepass may have asked it to authenticate first).
		if got := render(h.client("127.0.0.1:50002").do("PING")); got != "+PONG" && !strings.HasPrefix(got, "-NOAUTH") {
			t.Fatalf("after %q: PING answered %s", argv, got)
		}
	})
}
