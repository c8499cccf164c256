package commands

import (
	"strings"
	"testing"

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
