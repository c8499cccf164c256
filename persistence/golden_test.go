package persistence

import (
	"bytes"
	"crypto/sha256"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// The golden files: goldenSource() sealed with testKey in frames of
// minFrameSize bytes by the build of each format version, with owners on
// some tensors and models from version 2 on (goldenSourceV2). Every version's
// file must load forever. A build writes only the newest version: rewrite
// that one (go test -run Golden -update) only if its source changes, never
// to paper over a format change; the older files cannot be written again.
var (
	goldenV1 = filepath.Join("testdata", "snapshot-v1.eaisnap")
	goldenV2 = filepath.Join("testdata", "snapshot-v2.eaisnap")
)

// goldenSource is fixed content covering every record type: a tensor of
// every dtype kind, a scalar, an empty tensor, TTLs, a STRING tensor, and
// three models, two of which share a blob. Its blobs are pseudo-random (a
// SHA-256 chain), so that they do not compress and the file has several
// frames.
func goldenSource() *memSource {
	chain := func(seed string, n int) []byte {
		var out []byte
		s := sha256.Sum256([]byte(seed))
		for len(out) < n {
			out = append(out, s[:]...)
			s = sha256.Sum256(s[:])
		}
		return out[:n]
	}
	shared := chain("shared blob", 12000)
	return &memSource{
		tensors: []TensorRecord{
			{Key: "tensor:float", DType: 1, Shape: []int64{2, 2}, Data: []byte{0, 0, 0x80, 0x3f, 0, 0, 0, 0x40, 0, 0, 0x40, 0x40, 0, 0, 0x80, 0x40}},
			{Key: "tensor:int64", DType: 6, Shape: []int64{1}, Data: []byte{42, 0, 0, 0, 0, 0, 0, 0}, ExpireAtUnixMs: 1893456000000},
			{Key: "tensor:string", DType: 10, Shape: []int64{2}, Data: []byte("hello\x00world\x00")},
			{Key: "tensor:scalar", DType: 9, Shape: []int64{}, Data: []byte{1}},
			{Key: "tensor:empty", DType: 7, Shape: []int64{3, 0}, Data: []byte{}},
		},
		models: []model{
			{ModelRecord{Key: "model:a", Backend: "ONNX", Device: "CPU", Tag: "golden", BatchSize: 4, MinBatchSize: 2,
				MinBatchTimeoutMs: 50, Optimize: true, CreatedUnixMs: 1767225600000, Owner: "default",
				Extra: map[string]string{"note": "format v1"}}, shared},
			{ModelRecord{Key: "model:b", Backend: "ONNX", Device: "CPU", ID: "7d444840-9dc0-11d1-b245-5ffdce74fad2",
				CreatedUnixMs: 1767225600001, ExpireAtUnixMs: 1893456000000}, shared},
			{ModelRecord{Key: "model:c", Backend: "ONNX", Device: "GPU:1", CreatedUnixMs: 1767225600002}, chain("other blob", 5000)},
		},
	}
}

// goldenSourceV2 is goldenSource with owners, which format version 2 added
// to TENSOR records (MODEL records always had one).
func goldenSourceV2() *memSource {
	src := goldenSource()
	src.tensors[0].Owner = "alice"
	src.tensors[2].Owner = "bob"
	src.models[2].rec.Owner = "alice"
	return src
}

func TestGoldenV1(t *testing.T) { testGolden(t, goldenV1, goldenSource(), false) }
func TestGoldenV2(t *testing.T) { testGolden(t, goldenV2, goldenSourceV2(), *update) }

func testGolden(t *testing.T, path string, src *memSource, write bool) {
	if write {
		if err := os.WriteFile(path, seal(t, src, minFrameSize), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (generate the newest with go test -run Golden -update)", err)
	}
	if len(frames(t, b)) < 3 {
		t.Errorf("golden file has too few frames to be a good fuzz seed")
	}
	sink, err := unseal(b)
	if err != nil {
		t.Fatal(err)
	}
	checkSame(t, src, sink)
	if !bytes.Equal(sink.models[0].blob, sink.models[1].blob) || &sink.models[0].blob[0] != &sink.models[1].blob[0] {
		t.Error("model:a and model:b should share one blob")
	}
}
