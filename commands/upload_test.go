package commands

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/enclaveai/enclaveai/config"
	"github.com/enclaveai/enclaveai/modelstore"
)

func words(s string) [][]byte {
	var out [][]byte
	for _, w := range strings.Fields(s) {
		out = append(out, []byte(w))
	}
	return out
}

// modelPayloadArg agrees with parseModelStore on which arguments are the
// BLOB chunks.
func TestModelPayloadArg(t *testing.T) {
	for _, tc := range []struct {
		line  string
		first int // index of the first chunk; 0: none
	}{
		{"AI.MODELSTORE k ONNX CPU BLOB c1 c2", 5},
		{"AI.MODELSTORE k ONNX CPU TAG BLOB BLOB c1", 7},
		{"AI.MODELSTORE k ONNX CPU TAG t BATCHSIZE 2 MINBATCHSIZE 1 OPTIMIZE 0 NOPERSIST blob BLOB", 14},
		{"AI.MODELSET k ONNX CPU INPUTS a b OUTPUTS c BLOB c1", 10},
		{"AI.MODELSTORE k ONNX CPU FILE BLOB", 0},
		{"AI.MODELSTORE BLOB ONNX BLOB TAG x", 0},
	} {
		argv := words(tc.line)
		first := 0
		for i := 1; i < len(argv); i++ {
			if modelPayloadArg(argv[:i], i) {
				first = i
				break
			}
		}
		if first != tc.first {
			t.Errorf("%s: first chunk at %d, want %d", tc.line, first, tc.first)
			continue
		}
		if first == 0 {
			continue
		}
		r, err := parseModelStore(strings.EqualFold(tc.line[:11], "AI.MODELSET"))(NewArgs(argv, nil))
		if err != nil {
			t.Errorf("%s: %v", tc.line, err)
			continue
		}
		if got := r.(*modelStoreCmd).chunks; len(got) != len(argv)-first || !bytes.Equal(got[0], argv[first]) {
			t.Errorf("%s: parse kept %q as chunks", tc.line, got)
		}
	}
}

func testServer(t *testing.T) (*App, *Client) {
	s := NewApp(config.Default(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	return s, s.NewClient("test", "", nil)
}

// An upload buffer that does not hold exactly the parsed chunks (the
// front end and the parser disagreed) is never kept: the model is built
// from a copy, since the buffer is freed after the command.
func TestModelBytesFromUpload(t *testing.T) {
	s, c := testServer(t)
	buf, err := modelstore.NewModelBuffer(1<<20, 16)
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Unref()
	dst, _ := buf.Extend(6)
	copy(dst, "abcdef")
	buf.Filled(6)
	x := &Ctx{App: s, C: c, W: c.W}

	held := &modelStoreCmd{chunks: [][]byte{dst[:2], dst[2:]}, upload: buf}
	data, got, err := held.modelBytes(x)
	if err != nil || got != buf || &data[0] != &dst[0] {
		t.Errorf("chunks in the buffer: buf %v, err %v; want the buffer itself", got, err)
	}
	other := &modelStoreCmd{chunks: [][]byte{dst[2:]}, upload: buf}
	data, got, err = other.modelBytes(x)
	if err != nil || got != nil || string(data) != "cdef" || &data[0] == &dst[2] {
		t.Errorf("a chunk the buffer does not match: %q, buf %v, err %v; want a copy", data, got, err)
	}
}

// A model's blob takes over the maxmemory reservation of the upload that
// brought its bytes as it is acquired: until the upload ended (after the
// reply), its bytes counted twice, in the registry and in the upload's
// reservation, in used_memory and against maxmemory. Stored twice, the
// bytes are one blob, the first upload's; the second upload's buffer is
// not taken over and counts until its upload ends (it was given back at
// once, and its bytes counted nowhere until then).
func TestStoredModelTakesOverItsUploadsRoom(t *testing.T) {
	model := loadTestRuntime(t)
	if model == nil {
		t.Skip("no ONNX Runtime")
	}
	h := newHarness(t)
	n := int64(len(model))
	store := func(key string, dup bool) {
		t.Helper()
		prev := words("AI.MODELSTORE " + key + " ONNX CPU BLOB")
		spec := Commands().Lookup(prev[0])
		// What the front end does (server/ingest.go): the chunk is
		// admitted and reserved on its length header, then read into a
		// model buffer.
		u, err := h.s.StartUpload(h.c, spec, prev)
		if err != nil {
			t.Fatal(err)
		}
		buf, err := modelstore.NewModelBuffer(n, n)
		if err != nil {
			t.Fatal(err)
		}
		if err := u.Admit(n); err != nil {
			t.Fatal(err)
		}
		if err := u.Reserve(n); err != nil {
			t.Fatal(err)
		}
		dst, err := buf.Extend(n)
		if err != nil {
			t.Fatal(err)
		}
		copy(dst, model)
		buf.Filled(len(dst))
		buf.Seal()
		if got, want := h.s.UsedMemory(), h.s.Keys.Used()+h.s.Models.Bytes()+n; got != want {
			t.Errorf("%s arrived: UsedMemory() = %d, want %d (the upload's %d bytes counted)", key, got, want, n)
		}
		h.s.DispatchUpload(h.c, spec, append(prev, dst), OwnedFunc(func(int) bool { return true }), buf)
		h.s.CommitClient(h.c)
		if got := string(h.c.W.Bytes()); got != "+OK\r\n" {
			t.Fatalf("AI.MODELSTORE %s: %q", key, got)
		}
		h.c.W.Reset()
		held := int64(0) // the blob holds the upload's bytes
		if dup {
			held = n // the blob holds another's: the upload's buffer lives on
		}
		if got := h.s.uploading.Load(); got != held {
			t.Errorf("%s stored, its upload not yet ended: uploads hold %d bytes, want %d", key, got, held)
		}
		if got, want := h.s.UsedMemory(), h.s.Keys.Used()+h.s.Models.Bytes()+held; got != want {
			t.Errorf("%s stored: UsedMemory() = %d, want %d", key, got, want)
		}
		u.End()
		buf.Unref()
		if got := h.s.uploading.Load(); got != 0 {
			t.Errorf("%s's upload ended: uploads hold %d bytes, want 0", key, got)
		}
	}
	store("a", false)
	store("b", true)
	if got := h.s.Models.Bytes(); got != n {
		t.Errorf("registry holds %d bytes, want the one blob's %d", got, n)
	}
}

// BulkStream sends large bulk strings past the reply buffer, after what
// is pending, and keeps small ones in it.
func TestBulkStream(t *testing.T) {
	w := NewWriter()
	var out bytes.Buffer
	var writes int
	w.SetStream(func(bufs ...[]byte) error {
		writes++
		for _, b := range bufs {
			out.Write(b)
		}
		return nil
	})
	big := bytes.Repeat([]byte("z"), streamMin)
	w.Array(3)
	w.BulkStream([]byte("small"))
	w.BulkStream(big)
	if writes != 1 || w.Len() != 0 {
		t.Fatalf("%d writes, %d bytes pending", writes, w.Len())
	}
	w.BulkStream(big)
	want := "*3\r\n$5\r\nsmall\r\n$1048576\r\n" + string(big) + "\r\n$1048576\r\n" + string(big) + "\r\n"
	if out.String()+string(w.Bytes()) != want {
		t.Error("streamed bytes differ from the reply")
	}

	failed := errors.New("broken pipe")
	w = NewWriter()
	w.SetStream(func(...[]byte) error { writes++; return failed })
	writes = 0
	w.BulkStream(big)
	w.BulkStream(big)
	if writes != 1 || !errors.Is(w.StreamErr(), failed) {
		t.Errorf("after a failed write: %d writes, StreamErr %v", writes, w.StreamErr())
	}

	// Without a stream (a transaction's replies, a startup client) it is Bulk.
	w = NewWriter()
	w.BulkStream(big)
	if w.Len() != len(big)+len("$1048576\r\n\r\n") {
		t.Errorf("no stream: %d bytes pending", w.Len())
	}
}

// A model's chunks under a small MODEL_CHUNK_SIZE leave the reply buffer
// as it fills (Writer.Spill): AI.MODELGET of 3 MB in chunks of 1 byte
// would otherwise hold 21 MB of reply. The reply is the same either way,
// and without a stream (a transaction) it all stays in the buffer.
func TestWriteChunksSpills(t *testing.T) {
	data := bytes.Repeat([]byte("abc"), 1<<20)
	var want bytes.Buffer
	fmt.Fprintf(&want, "*%d\r\n", len(data))
	for _, b := range data {
		fmt.Fprintf(&want, "$1\r\n%c\r\n", b)
	}

	w := NewWriter()
	var out bytes.Buffer
	most := 0
	w.SetStream(func(bufs ...[]byte) error {
		for _, b := range bufs {
			most = max(most, len(b))
			out.Write(b)
		}
		return nil
	})
	writeChunks(w, data, 1)
	out.Write(w.Bytes())
	if !bytes.Equal(out.Bytes(), want.Bytes()) {
		t.Fatalf("the reply differs: %d bytes, want %d", out.Len(), want.Len())
	}
	if limit := streamMin + 16; most > limit || w.Cap() > 2*streamMin+64 {
		t.Errorf("the reply buffer held %d bytes at once (capacity %d); want at most %d", most, w.Cap(), limit)
	}

	// A connection that fails stops the reply.
	w = NewWriter()
	writes := 0
	w.SetStream(func(...[]byte) error { writes++; return errors.New("broken pipe") })
	writeChunks(w, data, 1)
	if writes != 1 || w.Len() > 16 {
		t.Errorf("after a failed write: %d writes, %d bytes pending", writes, w.Len())
	}

	w = NewWriter()
	writeChunks(w, data, 1)
	if !bytes.Equal(w.Bytes(), want.Bytes()) {
		t.Errorf("without a stream: %d bytes pending, want the %d of the reply", w.Len(), want.Len())
	}
}

// chunksOf renders AI.MODELGET's reply of data (Writer.Later).
func chunksOf(data []byte, chunk int64) func(*Writer) {
	return func(w *Writer) { writeChunks(w, data, chunk) }
}

// A transaction's AI.MODELGET leaves the model's bytes where they lie
// until the connection sends the replies (Writer.Later): WriteOut sends
// them in their place among the other replies, chunked as asked, and each
// reference is released once, whether its reply was sent or dropped.
func TestWriterLater(t *testing.T) {
	data := bytes.Repeat([]byte("abcdefg"), 3<<18) // 5.25 MiB: some chunks go out from where they lie
	chunked := func(chunk int) []byte {
		w := NewWriter()
		writeChunks(w, data, int64(chunk))
		return slices.Clone(w.Bytes())
	}
	for _, chunk := range []int{0, 1, 1000, 2 << 20} {
		w := NewWriter()
		var out bytes.Buffer
		streamTo(w, &out)
		released := 0
		release := func() { released++ }
		w.Array(3)
		w.Later(chunksOf(data, int64(chunk)), release)
		w.Later(chunksOf(data[:5], int64(chunk)), release)
		w.Simple("PONG")
		if !w.HasLater() || w.Len() != len("*3\r\n")+2+len("+PONG\r\n") || released != 0 {
			t.Fatalf("chunk %d: before WriteOut: later %v, %d bytes pending, %d released", chunk, w.HasLater(), w.Len(), released)
		}
		if err := w.WriteOut(); err != nil {
			t.Fatal(err)
		}
		want := slices.Concat([]byte("*3\r\n"), chunked(chunk), []byte("$5\r\nabcde\r\n"), []byte("+PONG\r\n"))
		if chunk == 1 {
			want = slices.Concat([]byte("*3\r\n"), chunked(chunk), []byte("*5\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n$1\r\nd\r\n$1\r\ne\r\n"), []byte("+PONG\r\n"))
		}
		if !bytes.Equal(out.Bytes(), want) {
			t.Errorf("chunk %d: %d bytes written, want %d", chunk, out.Len(), len(want))
		}
		if released != 2 || w.HasLater() || w.Len() != 0 {
			t.Errorf("chunk %d: after WriteOut: %d released, later %v, %d bytes pending", chunk, released, w.HasLater(), w.Len())
		}
	}

	// Replies dropped after a mark (CLIENT REPLY OFF, a failed log commit)
	// release theirs; a mark taken right after a Later keeps it.
	w := NewWriter()
	w.SetStream(func(...[]byte) error { return nil })
	var released []int
	w.Later(chunksOf(data, 0), func() { released = append(released, 1) })
	mark := w.Len()
	w.Later(chunksOf(data, 0), func() { released = append(released, 2) })
	w.truncate(mark)
	if !slices.Equal(released, []int{2}) || !w.HasLater() {
		t.Errorf("truncate: released %v, later %v", released, w.HasLater())
	}
	w.Reset() // a connection that ends with replies unsent
	if !slices.Equal(released, []int{2, 1}) || w.HasLater() {
		t.Errorf("reset: released %v, later %v", released, w.HasLater())
	}

	// A failed write ends WriteOut, and releases everything.
	w = NewWriter()
	writes := 0
	w.SetStream(func(...[]byte) error { writes++; return errors.New("broken pipe") })
	n := 0
	w.Simple("OK")
	w.Later(chunksOf(data, 1), func() { n++ })
	w.Later(chunksOf(data, 1), func() { n++ })
	if err := w.WriteOut(); err == nil || writes != 1 || n != 2 || w.HasLater() {
		t.Errorf("failed write: err %v, %d writes, %d released, later %v", err, writes, n, w.HasLater())
	}

	// While a Later reply waits, nothing else streams past it.
	w = NewWriter()
	var order bytes.Buffer
	w.SetStream(func(bufs ...[]byte) error {
		for _, b := range bufs {
			order.Write(b)
		}
		return nil
	})
	w.Later(chunksOf(data[:3], 0), func() {})
	w.BulkStream(data)
	writeChunks(w, data, 1)
	if order.Len() != 0 {
		t.Errorf("%d bytes streamed ahead of a Later reply", order.Len())
	}
	if err := w.WriteOut(); err != nil {
		t.Fatal(err)
	}
	want := slices.Concat([]byte("$3\r\nabc\r\n"), chunked(0), chunked(1))
	if !bytes.Equal(order.Bytes(), want) {
		t.Errorf("%d bytes written, want %d", order.Len(), len(want))
	}

	// Without a stream (a client of the server's own), the reply is built
	// at once.
	w = NewWriter()
	done := false
	w.Later(chunksOf(data, 1000), func() { done = true })
	if !done || w.HasLater() || !bytes.Equal(w.Bytes(), chunked(1000)) {
		t.Errorf("no stream: released %v, later %v, %d bytes", done, w.HasLater(), w.Len())
	}
}

// AI.TENSORGET VALUES of a large tensor, built as its reply leaves
// (Writer.Later), is the reply built at once, and never holds much more
// than a megabyte of text.
func TestWriteValuesLater(t *testing.T) {
	n := 300_000
	data := make([]byte, 4*n)
	for i := range n {
		binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(float32(i)/7))
	}
	ten := &modelstore.Tensor{DType: modelstore.Float, Shape: []int64{3, int64(n / 3)}, Data: data}
	f := tensorGetFormat{meta: true, values: true}
	at := NewWriter()
	writeTensor(at, ten, f, false)
	w := NewWriter()
	var out bytes.Buffer
	most := 0
	w.SetStream(func(bufs ...[]byte) error {
		n := 0
		for _, b := range bufs {
			n += len(b)
			out.Write(b)
		}
		most = max(most, n)
		return nil
	})
	writeTensorReply(w, ten, f)
	if out.Len() != 0 {
		t.Fatalf("%d bytes written before WriteOut", out.Len())
	}
	if err := w.WriteOut(); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out.Bytes(), at.Bytes()) {
		t.Fatalf("%d bytes written, want the %d of the reply built at once", out.Len(), at.Len())
	}
	if at.Len() < 3*streamMin || most > streamMin+1024*32 {
		t.Errorf("a reply of %d bytes left in writes of up to %d", at.Len(), most)
	}
}

// VALUES of a STRING tensor, built as its reply leaves, is the reply built
// at once; a long element is written from the tensor's own bytes, and the
// short ones leave a megabyte or so at a time.
func TestWriteStringsLater(t *testing.T) {
	long := bytes.Repeat([]byte{'x'}, 3*streamMin)
	data := slices.Concat([]byte("a\x00"), long, []byte("\x00"))
	for i := range 200_000 {
		data = fmt.Appendf(data, "%d\x00", i)
	}
	ten := &modelstore.Tensor{DType: modelstore.String, Shape: []int64{200_002}, Data: data}
	f := tensorGetFormat{values: true}
	if !heldReply(ten, f) {
		t.Fatal("not held")
	}
	at := NewWriter()
	writeTensor(at, ten, f, false)
	w := NewWriter()
	var out bytes.Buffer
	most, inPlace := 0, false
	w.SetStream(func(bufs ...[]byte) error {
		for _, b := range bufs {
			if len(b) == len(long) && &b[0] == &data[2] {
				inPlace = true
				continue
			}
			most = max(most, len(b))
		}
		for _, b := range bufs {
			out.Write(b)
		}
		return nil
	})
	writeTensorReply(w, ten, f)
	if err := w.WriteOut(); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out.Bytes(), at.Bytes()) {
		t.Fatalf("%d bytes written, want the %d of the reply built at once", out.Len(), at.Len())
	}
	if !inPlace || most > streamMin+1024 {
		t.Errorf("long element written in place: %v; other writes of up to %d bytes", inPlace, most)
	}
	want := fmt.Appendf(nil, "*200002\r\n$1\r\na\r\n$%d\r\n%s\r\n$1\r\n0\r\n", len(long), long)
	if !bytes.HasPrefix(at.Bytes(), want) {
		t.Errorf("reply starts %q", at.Bytes()[:40])
	}
}

// A held reply is built in the protocol its command ran in: a HELLO 3
// queued after it in a transaction changes the protocol before the
// connection sends the replies.
func TestWriterLaterKeepsItsProtocol(t *testing.T) {
	w := NewWriter()
	var out bytes.Buffer
	streamTo(w, &out)
	double := func(w *Writer) { w.Double(0.5) }
	w.Later(double, nil)
	w.proto = 3 // HELLO 3, run after it in the same EXEC
	w.Later(double, nil)
	if err := w.WriteOut(); err != nil {
		t.Fatal(err)
	}
	if got, want := out.String(), "$3\r\n0.5\r\n,0.5\r\n"; got != want {
		t.Errorf("wrote %q, want %q", got, want)
	}
	if w.proto != 3 {
		t.Errorf("protocol %d after WriteOut, want 3", w.proto)
	}
}

// streamTo makes w stream into out.
func streamTo(w *Writer, out *bytes.Buffer) {
	w.SetStream(func(bufs ...[]byte) error {
		for _, b := range bufs {
			out.Write(b)
		}
		return nil
	})
}
