package commands

import (
	"strings"
	"testing"
	"time"

	"github.com/enclaveai/enclaveai/config"
	"github.com/enclaveai/enclaveai/modelstore"
)

func TestUploadParse(t *testing.T) {
	parseTable(t,
		parseCase{line: "AI.UPLOAD BEGIN 10", want: uploadCmd{sub: "BEGIN", size: 10}},
		parseCase{line: "ai.upload append u1 4 BLOB ab cd", want: uploadCmd{sub: "APPEND", id: "u1", offset: 4,
			chunks: [][]byte{[]byte("ab"), []byte("cd")}}},
		parseCase{line: "AI.UPLOAD status u1", want: uploadCmd{sub: "STATUS", id: "u1"}},
		parseCase{line: "AI.UPLOAD ABORT u1", want: uploadCmd{sub: "ABORT", id: "u1"}},
		parseCase{line: "AI.UPLOAD BEGIN 0", err: string(errUploadSize)},
		parseCase{line: "AI.UPLOAD BEGIN x", err: string(errUploadSize)},
		parseCase{line: "AI.UPLOAD BEGIN 1 2", err: string(errSyntax)},
		parseCase{line: "AI.UPLOAD APPEND u1 -1 BLOB a", err: string(errNotInteger)},
		parseCase{line: "AI.UPLOAD APPEND u1 0 CHUNK a", err: string(errExpectedBlob)},
		parseCase{line: "AI.UPLOAD APPEND u1 0 BLOB", err: string(errSyntax)},
		parseCase{line: "AI.UPLOAD STATUS", err: string(errSyntax)},
		parseCase{line: "AI.UPLOAD RESUME u1", err: string(errSyntax)},
		parseCase{line: "AI.MODELSTORE m ONNX CPU UPLOAD u1", want: &modelStoreCmd{key: "m", optimize: true,
			meta: modelstore.ModelMeta{Backend: "ONNX", Device: "CPU"}, uploadID: "u1", fromUpload: true}},
		parseCase{line: "AI.MODELSTORE m ONNX CPU UPLOAD u1 x", err: string(errExpectedBlob)},
	)
}

// Chunks that did not come through the front end's payload path (here:
// the harness dispatches whole commands) are copied into the upload.
func TestUploadRun(t *testing.T) {
	h := newHarness(t)
	id := strings.Trim(render(h.do("AI.UPLOAD BEGIN 6")), `"`)
	h.run(
		row("AI.UPLOAD APPEND "+id+" 0 BLOB ab cd", ":4"),
		row("AI.UPLOAD APPEND "+id+" 0 BLOB ab", "-ERR the upload holds 4 bytes: append at offset 4"),
		row("AI.UPLOAD APPEND "+id+" 4 BLOB xyz", "-ERR the chunks pass the upload's announced size"),
		row("AI.UPLOAD STATUS "+id, "[:6 :4 :0 :0]"),
		row("AI.MODELSTORE m ONNX CPU UPLOAD "+id, "-ERR the upload holds 4 of its 6 bytes"),
		row("AI.UPLOAD APPEND "+id+" 4 BLOB ef", ":6"),
		row("AI.UPLOAD ABORT "+id, "+OK"),
		row("AI.UPLOAD STATUS "+id, "-"+string(errNoUpload)),
		row("AI.UPLOAD ABORT "+id, "-"+string(errNoUpload)),
	)
	if got := h.s.uploading.Load(); got != 0 {
		t.Errorf("uploading = %d after the abort, want 0", got)
	}
}

// An upload holds against maxmemory the bytes it holds, not the size it
// announced: BEGINs that send nothing take no room (one client's held all
// of maxmemory from every other upload), a chunk that would pass maxmemory
// is refused and the upload keeps what it held, and an expired upload
// gives its bytes back.
func TestUploadReservesWhatItHolds(t *testing.T) {
	opts := config.Default()
	opts.MaxMemory.Store(10_000)
	h := newHarnessOpts(t, opts)
	begin := func() string {
		t.Helper()
		got := render(h.do("AI.UPLOAD BEGIN 8000"))
		if !strings.HasPrefix(got, `"`) {
			t.Fatalf("AI.UPLOAD BEGIN 8000: %s", got)
		}
		return strings.Trim(got, `"`)
	}
	a, b := begin(), begin()
	h.run(row("AI.UPLOAD BEGIN 20000", "-OOM command not allowed when used memory > 'maxmemory'."))
	held := func(want int64) {
		t.Helper()
		if got := h.s.uploading.Load(); got != want {
			t.Errorf("uploading = %d, want %d", got, want)
		}
	}
	held(0)
	blob := func(n int) string { return strings.Repeat("m", n) }
	h.run(
		row("AI.UPLOAD APPEND "+a+" 0 BLOB "+blob(6000), ":6000"),
		row("AI.UPLOAD APPEND "+b+" 0 BLOB "+blob(5000), "-OOM command not allowed when used memory > 'maxmemory'."),
		row("AI.UPLOAD STATUS "+b, "[:8000 :0 :0 :0]"),
		row("AI.UPLOAD APPEND "+b+" 0 BLOB "+blob(3000), ":3000"),
	)
	held(9000)
	h.run(row("AI.UPLOAD ABORT "+b, "+OK"))
	held(6000)
	h.s.expireUploads(time.Now().Add(time.Duration(opts.UploadSessionTimeout.Load()+1) * time.Second))
	held(0)
	h.run(row("AI.UPLOAD APPEND "+a+" 6000 BLOB x", "-"+string(errNoUpload)))
}
