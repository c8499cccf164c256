package server

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/enclaveai/enclaveai/commands"
	"github.com/enclaveai/enclaveai/config"
	"github.com/enclaveai/enclaveai/modelstore"
)

// ingestFixture reads commands as a connection does: the command layer's
// limits with the ingest attached.
type ingestFixture struct {
	cmds *commands.App
	c    *commands.Client
	up   *ingest
	rd   *Reader
}

func newIngestFixture(t *testing.T, in string, opts func(*config.Options)) *ingestFixture {
	o := config.Default()
	if opts != nil {
		opts(o)
	}
	cmds := commands.NewApp(o, slog.New(slog.NewTextHandler(io.Discard, nil)))
	f := &ingestFixture{cmds: cmds, rd: NewReader(strings.NewReader(in))}
	f.c = cmds.NewClient("test", "", nil)
	f.up = &ingest{cmds: cmds, client: f.c}
	return f
}

func (f *ingestFixture) read() (*Command, error) {
	return f.rd.ReadCommand(toLimits(f.cmds.PreLimits(f.c)), func(name []byte) Limits {
		spec := commands.Commands().Lookup(name)
		return f.up.limits(spec, toLimits(f.cmds.CommandLimits(f.c, spec)))
	})
}

// A model whose first chunk is large lands in one buffer, chunk after
// chunk; the other arguments (TAG's value "BLOB" included) do not.
func TestIngestDirect(t *testing.T) {
	c1, c2 := strings.Repeat("a", 1<<20), strings.Repeat("b", 3)
	in := bulkCmd("AI.MODELSTORE", "k", "ONNX", "CPU", "TAG", "BLOB", "BLOB", c1, c2) + bulkCmd("PING")
	f := newIngestFixture(t, in, nil)
	cmd, err := f.read()
	if err != nil {
		t.Fatal(err)
	}
	buf := f.up.take()
	if buf == nil {
		t.Fatal("no upload buffer")
	}
	if !buf.Holds(cmd.Args[7:]) || string(buf.Bytes()) != c1+c2 {
		t.Error("the chunks are not the buffer's bytes")
	}
	if buf.Holds(cmd.Args[5:]) {
		t.Error("TAG's value went into the buffer")
	}
	f.up.done()
	buf.Unref()
	if cmd, err = f.read(); err != nil || string(cmd.Args[0]) != "PING" || f.up.take() != nil {
		t.Fatalf("next command: %v", err)
	}
}

// The path is decided by the running total: a small model keeps the
// ordinary path (allocations of their own); the chunk that brings the total
// to directMin moves the small ones before it into the model's buffer, so
// that a model sent in 1,000,000-byte chunks is not joined in a second copy.
func TestIngestRunningTotal(t *testing.T) {
	in := bulkCmd("AI.MODELSET", "k", "ONNX", "CPU", "INPUTS", "a", "OUTPUTS", "b", "BLOB", "xy", strings.Repeat("z", 1000))
	f := newIngestFixture(t, in, nil)
	cmd, err := f.read()
	if err != nil {
		t.Fatal(err)
	}
	if f.up.take() != nil {
		t.Error("an upload buffer for a 1002-byte model")
	}
	if !cmd.Owned(9) || !cmd.Owned(10) || string(cmd.Args[9]) != "xy" {
		t.Error("chunks not in allocations of their own")
	}
	f.up.done()

	chunks := []string{"xy"}
	want := "xy"
	for i := range 5 {
		c := strings.Repeat(string(rune('a'+i)), 1_000_000)
		chunks, want = append(chunks, c), want+c
	}
	in = bulkCmd(append([]string{"AI.MODELSTORE", "k", "ONNX", "CPU", "BLOB"}, chunks...)...) + bulkCmd("PING")
	f = newIngestFixture(t, in, nil)
	if cmd, err = f.read(); err != nil {
		t.Fatal(err)
	}
	buf := f.up.take()
	if buf == nil {
		t.Fatal("no upload buffer for a 5 MB model in 1,000,000-byte chunks")
	}
	if !buf.Holds(cmd.Args[5:]) || string(buf.Bytes()) != want {
		t.Error("the chunks (the first two moved) are not the buffer's bytes")
	}
	if got := f.up.up.Reserved(); got != int64(len(want)) {
		t.Errorf("reserved %d bytes, want %d", got, len(want))
	}
	f.up.done()
	buf.Unref()
	if cmd, err = f.read(); err != nil || string(cmd.Args[0]) != "PING" {
		t.Fatalf("next command: %v", err)
	}
}

// A single chunk is bounded by max-model-size, not proto-max-bulk-len.
func TestIngestChunkAboveProtoMaxBulkLen(t *testing.T) {
	chunk := strings.Repeat("m", 3<<20)
	in := bulkCmd("AI.MODELSTORE", "k", "ONNX", "CPU", "BLOB", chunk) + bulkCmd("SET", "k", chunk)
	f := newIngestFixture(t, in, func(o *config.Options) { o.ProtoMaxBulkLen.Store(1 << 20) })
	cmd, err := f.read()
	if err != nil {
		t.Fatalf("a 3 MiB chunk under a 1 MiB proto-max-bulk-len: %v", err)
	}
	buf := f.up.take()
	if buf == nil || !buf.Holds(cmd.Args[5:]) {
		t.Fatal("the chunk is not in the upload buffer")
	}
	f.up.done()
	buf.Unref()
	if _, err := f.read(); !IsProtocol(err) || !strings.Contains(err.Error(), "invalid bulk length") {
		t.Fatalf("SET of 3 MiB: %v, want proto-max-bulk-len's protocol error", err)
	}
}

// max-model-size refuses the chunk that would pass it, from its length
// header: it and the rest are skipped, the buffer freed, and the
// connection reads the next command.
func TestIngestMaxModelSize(t *testing.T) {
	chunk := strings.Repeat("m", 2<<20)
	in := bulkCmd("AI.MODELSTORE", "k", "ONNX", "CPU", "BLOB", chunk, chunk, chunk) + bulkCmd("PING")
	f := newIngestFixture(t, in, func(o *config.Options) { o.MaxModelSize.Store(5 << 20) })
	_, err := f.read()
	var re *RefusedError
	if !errors.As(err, &re) || err.Error() != "ERR model exceeds max-model-size" {
		t.Fatalf("got %v, want the max-model-size refusal", err)
	}
	if f.up.buf == nil || f.up.buf.Len() != 4<<20 {
		t.Fatal("expected the first two chunks' buffer until done")
	}
	f.up.done()
	if f.up.buf != nil {
		t.Error("done kept the buffer")
	}
	if cmd, err := f.read(); err != nil || string(cmd.Args[0]) != "PING" {
		t.Fatalf("next command: %v", err)
	}
}

// maxmemory counts every upload in flight: a second one that would pass it
// together with the first is refused until the first is done.
func TestIngestMaxmemory(t *testing.T) {
	chunk := strings.Repeat("m", 3<<20)
	in := bulkCmd("AI.MODELSTORE", "k", "ONNX", "CPU", "BLOB", chunk)
	f := newIngestFixture(t, in+in+in, func(o *config.Options) { o.MaxMemory.Store(5 << 20) })
	g := &ingest{cmds: f.cmds, client: f.c}
	if _, err := f.read(); err != nil {
		t.Fatal(err)
	}
	// While the first upload is in flight, a second connection's is refused.
	other := NewReader(strings.NewReader(in))
	_, err := other.ReadCommand(toLimits(f.cmds.PreLimits(f.c)), func(name []byte) Limits {
		spec := commands.Commands().Lookup(name)
		return g.limits(spec, toLimits(f.cmds.CommandLimits(f.c, spec)))
	})
	var re *RefusedError
	if !errors.As(err, &re) || !strings.HasPrefix(err.Error(), "command not allowed when used memory") {
		t.Fatalf("second upload: %v, want the maxmemory refusal", err)
	}
	g.done()
	f.up.done()
	if _, err := f.read(); err != nil {
		t.Fatalf("after the first upload ended: %v", err)
	}
	f.up.done()
}

// The arguments that are not payload stay under client-query-buffer-limit.
func TestIngestQueryLimitForOtherArgs(t *testing.T) {
	in := bulkCmd("AI.MODELSTORE", "k", "ONNX", "CPU", "TAG", strings.Repeat("t", 2<<20), "BLOB", strings.Repeat("m", 4<<20))
	f := newIngestFixture(t, in, func(o *config.Options) { o.ClientQueryBufferLimit.Store(1 << 20) })
	if _, err := f.read(); !IsProtocol(err) || !strings.Contains(err.Error(), "client-query-buffer-limit") {
		t.Fatalf("got %v, want the query-buffer protocol error", err)
	}
	f.up.done()
	in = bulkCmd("AI.MODELSTORE", "k", "ONNX", "CPU", "TAG", "t", "BLOB", strings.Repeat("m", 4<<20))
	f = newIngestFixture(t, in, func(o *config.Options) { o.ClientQueryBufferLimit.Store(1 << 20) })
	if _, err := f.read(); err != nil {
		t.Fatalf("a 4 MiB chunk under a 1 MiB query limit: %v", err)
	}
	f.up.done()
}

// Filled is told about a Sink's memory as it fills, in steps.
func TestSinkFilled(t *testing.T) {
	payload := bytes.Repeat([]byte("p"), 3*sinkStep+5)
	var steps []int
	lim := open
	dst := make([]byte, len(payload))
	lim.Sink = func(a SinkArg) ([]byte, error) {
		if a.Index == 1 {
			return dst, nil
		}
		return nil, nil
	}
	lim.Filled = func(n int) { steps = append(steps, n) }
	r := NewReader(strings.NewReader(bulkCmd("UPLOAD", string(payload))))
	if _, err := r.ReadCommand(open, func([]byte) Limits { return lim }); err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, s := range steps {
		if s > sinkStep {
			t.Errorf("a step of %d bytes", s)
		}
		total += s
	}
	if total != len(payload) || !bytes.Equal(dst, payload) {
		t.Errorf("Filled told %d bytes in %d steps, want %d", total, len(steps), len(payload))
	}
}

// A Sink's ProtocolError closes the connection like the reader's own.
func TestSinkProtocolError(t *testing.T) {
	lim := open
	lim.Sink = func(SinkArg) ([]byte, error) { return nil, &ProtocolError{"command exceeds client-query-buffer-limit"} }
	r := NewReader(strings.NewReader(bulkCmd("UPLOAD", "x") + bulkCmd("PING")))
	if _, err := r.ReadCommand(open, func([]byte) Limits { return lim }); !IsProtocol(err) {
		t.Fatalf("got %v, want the ProtocolError", err)
	}
}

// The upload policy refuses an upload on its first chunk's length header:
// no buffer is made, and the connection reads the next command.
func TestIngestPolicy(t *testing.T) {
	chunk := strings.Repeat("m", 2<<20)
	in := bulkCmd("AI.MODELSTORE", "k", "ONNX", "CPU", "BLOB", chunk, chunk) + bulkCmd("PING")
	for _, tc := range []struct {
		name string
		set  func(o *config.Options)
		want string
	}{
		{"allow-modelstore no", func(o *config.Options) { o.AllowModelstore.Store(false) },
			"ERR model uploads and deletes are disabled on this server (allow-modelstore no)"},
		{"modelstore-requires-auth yes", func(o *config.Options) { o.ModelstoreRequiresAuth.Store(true) },
			"NOPERM model uploads need an authenticated user (modelstore-requires-auth yes)"},
		{"max-model-bytes-per-user", func(o *config.Options) { o.MaxModelBytesPerUser.Store(3 << 20) },
			"ERR model upload refused: the user's models would pass max-model-bytes-per-user"},
	} {
		f := newIngestFixture(t, in, tc.set)
		_, err := f.read()
		var re *RefusedError
		if !errors.As(err, &re) || err.Error() != tc.want {
			t.Fatalf("%s: got %v, want %q", tc.name, err, tc.want)
		}
		// max-model-bytes-per-user lets the first chunk in (it fits) and
		// refuses the second from its header; the others refuse the first.
		if n := f.up.total; (tc.name == "max-model-bytes-per-user") != (n == 2<<20) {
			t.Errorf("%s: %d bytes taken before the refusal", tc.name, n)
		}
		f.up.done()
		if cmd, err := f.read(); err != nil || string(cmd.Args[0]) != "PING" {
			t.Fatalf("%s: next command: %v", tc.name, err)
		}
	}
}

// A resumable upload holds against maxmemory what its APPENDs committed,
// not the size its BEGIN announced: BEGINs that sent nothing take no room,
// an APPEND cut off mid-chunk gives its chunk's room back, and a committed
// one keeps it until the upload ends.
func TestIngestResumableReservesWhatItHolds(t *testing.T) {
	const mb = 1 << 20
	f := newIngestFixture(t, "", func(o *config.Options) { o.MaxMemory.Store(5 * mb) })
	feed := func(in string) { f.rd = NewReader(strings.NewReader(in)) }
	dispatch := func(argv [][]byte, owned commands.Ownership, buf *modelstore.ModelBuffer) string {
		f.cmds.DispatchUpload(f.c, nil, argv, owned, buf)
		f.cmds.CommitClient(f.c)
		out := string(f.c.W.Bytes())
		f.c.W.Reset()
		return out
	}
	begin := func() string {
		t.Helper()
		reply := dispatch([][]byte{[]byte("AI.UPLOAD"), []byte("BEGIN"), []byte("4194304")}, nil, nil)
		id, ok := strings.CutPrefix(reply, "$36\r\n")
		if !ok {
			t.Fatalf("AI.UPLOAD BEGIN 4194304: %q", reply)
		}
		return strings.TrimSuffix(id, "\r\n")
	}
	id := begin()
	begin()

	chunk := strings.Repeat("m", 3*mb)
	appendCmd := bulkCmd("AI.UPLOAD", "APPEND", id, "0", "BLOB", chunk)
	feed(appendCmd[:len(appendCmd)-mb])
	if _, err := f.read(); err == nil {
		t.Fatal("a cut-off APPEND was read whole")
	}
	f.up.done()

	feed(appendCmd)
	cmd, err := f.read()
	if err != nil {
		t.Fatalf("APPEND after a cut-off one: %v", err)
	}
	buf := f.up.take()
	if reply := dispatch(cmd.Args, cmd, buf); reply != ":3145728\r\n" {
		t.Errorf("APPEND: %q", reply)
	}
	buf.Unref()
	f.up.done()

	store := bulkCmd("AI.MODELSTORE", "k", "ONNX", "CPU", "BLOB", chunk)
	feed(store)
	var re *RefusedError
	if _, err := f.read(); !errors.As(err, &re) || !strings.HasPrefix(err.Error(), "command not allowed when used memory") {
		t.Fatalf("a 3 MiB upload next to an upload holding 3 MiB under maxmemory 5 MiB: %v, want OOM", err)
	}
	f.up.done()
	if reply := dispatch([][]byte{[]byte("AI.UPLOAD"), []byte("ABORT"), []byte(id)}, nil, nil); reply != "+OK\r\n" {
		t.Fatalf("ABORT: %q", reply)
	}
	feed(store)
	if _, err := f.read(); err != nil {
		t.Fatalf("once the upload ended: %v", err)
	}
	f.up.done()
}
