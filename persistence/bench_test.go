package persistence

import (
	"bytes"
	"fmt"
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

// BenchmarkLogRecord is what the append-only log costs a small write: TENSOR
// records of 3136 bytes (the AI.TENSORSET of make bench-aof) committed 40 at
// a time (one group commit), per record:
//
//	go test -run '^$' -bench LogRecord ./persistence
//
// seal is encoding the records and sealing their frame (AES-GCM and the
// frame's CRC); commit is Append and Commit, which add the write(2) into a
// file in a temporary directory: the copy into the page cache.
func BenchmarkLogRecord(b *testing.B) {
	rec := &TensorRecord{Key: "t", DType: 1, Shape: []int64{784}, Data: make([]byte, 3136)}
	const group = 40
	b.Run("seal", func(b *testing.B) {
		h, err := newLogHeader(testKey, KindIncr)
		if err != nil {
			b.Fatal(err)
		}
		var plain, sealed []byte
		b.SetBytes(int64(len(rec.Data)))
		for i := 0; i < b.N; i += group {
			plain = plain[:0]
			for range group {
				plain, _ = appendOp(plain, Op{Tensor: rec})
			}
			sealed = h.sealFrame(sealed[:0], uint64(i), 0, plain)
		}
	})
	b.Run("commit", func(b *testing.B) {
		l := openTestLog(b, b.TempDir(), nil)
		if err := l.Create(newLogState().source()); err != nil {
			b.Fatal(err)
		}
		defer l.Close()
		b.SetBytes(int64(len(rec.Data)))
		for i := 0; i < b.N; i += group {
			var seq uint64
			for range group {
				seq = l.Append(Op{Tensor: rec})
			}
			if err := l.Commit(seq); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkLogRewriteSwitch times the commit that carries a rewrite's
// switch to its new incr file under everysec, with 8 or 64 MiB written to
// the old file since its last fsync (switchLocked fsyncs it while writers
// wait, BeginRewrite first without holding them up):
//
//	go test -run '^$' -bench LogRewriteSwitch -benchtime 10x ./persistence
func BenchmarkLogRewriteSwitch(b *testing.B) {
	rec := &TensorRecord{Key: "t", DType: 1, Shape: []int64{1 << 18}, Data: make([]byte, 1<<20)}
	for _, mib := range []int{8, 64} {
		b.Run(fmt.Sprintf("written=%dMiB", mib), func(b *testing.B) {
			b.StopTimer()
			for range b.N {
				l := openTestLog(b, b.TempDir(), nil)
				if err := l.Create(newLogState().source()); err != nil {
					b.Fatal(err)
				}
				for range mib {
					if err := l.Commit(l.Append(Op{Tensor: rec})); err != nil {
						b.Fatal(err)
					}
				}
				cut, err := l.BeginRewrite()
				if err != nil {
					b.Fatal(err)
				}
				l.Append(cut)
				seq := l.Append(tensorOp("after", "1"))
				b.StartTimer()
				if err := l.Commit(seq); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				l.Close()
			}
		})
	}
}
