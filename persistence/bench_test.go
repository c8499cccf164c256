package persistence

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// The benchmarks move one 256 MiB model blob of random bytes (like trained
// weights, it barely compresses) and report MB/s of blob:
//
//	go test -run '^$' -bench . -benchtime 5x ./persistence
//
// BenchmarkRawSave and BenchmarkRawLoad are the baseline: the same bytes
// copied to and from a file with no format at all.
const benchBlobSize = 256 << 20

var benchBlob []byte

func benchSource(b *testing.B) *memSource {
	if benchBlob == nil {
		benchBlob = randBytes(benchBlobSize)
	}
	b.SetBytes(benchBlobSize)
	return &memSource{models: []model{{ModelRecord{Key: "model", Backend: "ONNX", Device: "CPU"}, benchBlob}}}
}

func BenchmarkSave(b *testing.B) {
	src := benchSource(b)
	dir := b.TempDir()
	for b.Loop() {
		if err := SaveFile(dir, snapName, testKey, src); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkLoad(b *testing.B) {
	src := benchSource(b)
	dir := b.TempDir()
	if err := SaveFile(dir, snapName, testKey, src); err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(dir, snapName)
	for b.Loop() {
		if err := LoadFile(path, testKey, benchBlobSize, &memSink{}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRawSave(b *testing.B) {
	benchSource(b)
	path := filepath.Join(b.TempDir(), "raw")
	for b.Loop() {
		f, err := os.Create(path)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := io.Copy(f, bytes.NewReader(benchBlob)); err != nil {
			b.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
		f.Close()
	}
}

func BenchmarkRawLoad(b *testing.B) {
	benchSource(b)
	path := filepath.Join(b.TempDir(), "raw")
	if err := os.WriteFile(path, benchBlob, 0o600); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		f, err := os.Open(path)
		if err != nil {
			b.Fatal(err)
		}
		buf := make([]byte, benchBlobSize)
		if _, err := io.ReadFull(f, buf); err != nil {
			b.Fatal(err)
		}
		f.Close()
	}
}
