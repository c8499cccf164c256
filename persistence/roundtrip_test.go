package persistence

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// everything is a source with one tensor of every dtype (modelstore's
// numbering, STRING included), scalars, empty shapes, TTLs and models that
// share blobs.
func everything() *memSource {
	f32 := make([]byte, 4*6)
	for i := range 6 {
		binary.LittleEndian.PutUint32(f32[4*i:], math.Float32bits(float32(i)+0.5))
	}
	shared := randBytes(10 << 10)
	src := &memSource{tensors: []TensorRecord{
		{Key: "float", DType: 1, Shape: []int64{2, 3}, Data: f32},
		{Key: "double", DType: 2, Shape: []int64{1}, Data: []byte{0, 0, 0, 0, 0, 0, 0xf0, 0x3f}},
		{Key: "int8", DType: 3, Shape: []int64{2}, Data: []byte{0xff, 1}},
		{Key: "int16", DType: 4, Shape: []int64{1}, Data: []byte{1, 2}},
		{Key: "int32", DType: 5, Shape: []int64{1}, Data: []byte{1, 2, 3, 4}},
		{Key: "int64", DType: 6, Shape: []int64{1}, Data: []byte{1, 2, 3, 4, 5, 6, 7, 8}},
		{Key: "uint8", DType: 7, Shape: []int64{3}, Data: []byte{0, 128, 255}},
		{Key: "uint16", DType: 8, Shape: []int64{1}, Data: []byte{0xff, 0xff}},
		{Key: "bool", DType: 9, Shape: []int64{2}, Data: []byte{0, 1}},
		{Key: "string", DType: 10, Shape: []int64{3}, Data: []byte("a\x00\x00héllo\x00")},
		{Key: "uint32", DType: 11, Shape: []int64{1}, Data: []byte{1, 0, 0, 0}},
		{Key: "uint64", DType: 12, Shape: []int64{1}, Data: []byte{1, 0, 0, 0, 0, 0, 0, 0}},
		{Key: "scalar", DType: 1, Shape: nil, Data: []byte{0, 0, 0x80, 0x3f}},
		{Key: "empty", DType: 1, Shape: []int64{0, 4}, Data: []byte{}},
		{Key: "ttl", DType: 7, Shape: []int64{1}, Data: []byte{7}, ExpireAtUnixMs: 1767225600000},
		{Key: "", DType: 7, Shape: []int64{1}, Data: []byte{9}},
		{Key: "binary\x00key\xff", DType: 7, Shape: []int64{1}, Data: []byte{1}},
	}}
	src.models = []model{
		{ModelRecord{Key: "m1", Backend: "ONNX", Device: "CPU", Tag: "v1", BatchSize: 8, MinBatchSize: 2,
			MinBatchTimeoutMs: 100, Optimize: true, ID: "0b1a7e52-4c1e-4a39-9f0e-3a1d2c3b4a5f",
			CreatedUnixMs: 1767225600123, Owner: "alice", ExpireAtUnixMs: 1767225700000,
			Extra: map[string]string{"inputs": "x", "outputs": "y", "": "empty name"}}, shared},
		{ModelRecord{Key: "m2", Backend: "ONNX", Device: "GPU:0"}, shared},
		{ModelRecord{Key: "m3", Backend: "ONNX", Device: "CPU"}, bytes.Clone(shared)},
		{ModelRecord{Key: "m4", Backend: "ONNX", Device: "CPU"}, randBytes(3000)},
		{ModelRecord{Key: "empty-blob"}, nil},
	}
	return src
}

func TestRoundTrip(t *testing.T) {
	src := everything()
	b := seal(t, src, frameSize)
	sink, err := unseal(b)
	if err != nil {
		t.Fatal(err)
	}
	checkSame(t, src, sink)
	// m1, m2 and m3 share one blob: Read allocates it once.
	if &sink.models[0].blob[0] != &sink.models[1].blob[0] || &sink.models[0].blob[0] != &sink.models[2].blob[0] {
		t.Error("models sharing a blob got separate copies")
	}
}

func TestRoundTripSmallFrames(t *testing.T) {
	src := everything()
	b := seal(t, src, minFrameSize)
	if n := len(frames(t, b)); n < 4 {
		t.Fatalf("%d frames, want several", n)
	}
	sink, err := unseal(b)
	if err != nil {
		t.Fatal(err)
	}
	checkSame(t, src, sink)
}

func TestEmptySnapshot(t *testing.T) {
	sink, err := unseal(seal(t, &memSource{}, frameSize))
	if err != nil {
		t.Fatal(err)
	}
	if len(sink.tensors)+len(sink.models) != 0 {
		t.Fatalf("empty snapshot yielded %+v", sink)
	}
}

// A blob shared by many keys is stored once: ten models on one incompressible
// 1 MiB blob make a file barely bigger than one model does.
func TestSharedBlobWrittenOnce(t *testing.T) {
	blob := randBytes(1 << 20)
	one := &memSource{models: []model{{ModelRecord{Key: "m0"}, blob}}}
	ten := &memSource{}
	for i := range 10 {
		b := blob
		if i%2 == 1 {
			b = bytes.Clone(blob) // equal content in another array: found by SHA-256
		}
		ten.models = append(ten.models, model{ModelRecord{Key: "m" + string(rune('0'+i))}, b})
	}
	n1, n10 := len(seal(t, one, frameSize)), len(seal(t, ten, frameSize))
	if n1 < 1<<20 || n10 > n1+1024 {
		t.Fatalf("one model: %d bytes, ten models sharing its blob: %d bytes", n1, n10)
	}
	sink, err := unseal(seal(t, ten, frameSize))
	if err != nil {
		t.Fatal(err)
	}
	checkSame(t, ten, sink)
}

// A digest the caller already knows is written as the blob's digest
// without hashing the blob again: the right one round-trips, and a wrong
// one is caught by Read (so it was used, not recomputed).
func TestKnownBlobDigest(t *testing.T) {
	blob := randBytes(1 << 16)
	sum := sha256.Sum256(blob)
	src := &memSource{models: []model{{ModelRecord{Key: "m", BlobSHA256: &sum}, blob}}}
	sink, err := unseal(seal(t, src, frameSize))
	if err != nil {
		t.Fatal(err)
	}
	if len(sink.models) != 1 || !bytes.Equal(sink.models[0].blob, blob) || *sink.models[0].rec.BlobSHA256 != sum {
		t.Fatalf("got %+v", sink.models)
	}
	wrong := sum
	wrong[0] ^= 1
	src.models[0].rec.BlobSHA256 = &wrong
	if _, err := unseal(seal(t, src, frameSize)); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("a wrong known digest: %v, want ErrCorrupt", err)
	}
}

// No stored byte sequence shows through: a recognisable pattern inside
// incompressible data, in a tensor and in a model, is nowhere in the file.
func TestNoPlaintextInFile(t *testing.T) {
	pattern := bytes.Repeat([]byte("ENCLAVEAI-PLAINTEXT-"), 4)[:64]
	var data []byte
	for range 64 {
		data = append(data, randBytes(1000)...)
		data = append(data, pattern...)
	}
	src := &memSource{
		tensors: []TensorRecord{{Key: "secret-tensor-key", DType: 7, Shape: []int64{int64(len(data))}, Data: data}},
		models:  []model{{ModelRecord{Key: "secret-model-key", Owner: "secret-owner"}, bytes.Clone(data)}},
	}
	b := seal(t, src, frameSize)
	for _, needle := range [][]byte{pattern, pattern[:16], []byte("secret-"), data[:32]} {
		if i := bytes.Index(b, needle); i >= 0 {
			t.Errorf("%q found at offset %d", needle, i)
		}
	}
}

// memProbe measures the bytes allocated during f (TotalAlloc) and the peak
// heap in use during f above what was in use before it, sampled every
// millisecond.
func memProbe(f func()) (allocated, peak uint64) {
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	var max atomic.Uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		var m runtime.MemStats
		for {
			runtime.ReadMemStats(&m)
			if m.HeapInuse > before.HeapInuse && m.HeapInuse-before.HeapInuse > max.Load() {
				max.Store(m.HeapInuse - before.HeapInuse)
			}
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
		}
	})
	f()
	close(stop)
	wg.Wait()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc, max.Load()
}

// A big blob streams through: saving it allocates a few frames' worth of
// buffers, not a second copy; loading it allocates the blob once plus
// buffers.
func TestBigBlobBoundedMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("64 MiB blob")
	}
	const size = 64 << 20
	const slack = 5 * frameSize // buffers of the cipher, zstd and bufio
	blob := randBytes(size)
	src := &memSource{models: []model{{ModelRecord{Key: "big", Backend: "ONNX"}, blob}}}
	path := filepath.Join(t.TempDir(), "big.snap")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	var werr error
	alloc, peak := memProbe(func() { werr = Write(f, testKey, src) })
	f.Close()
	if werr != nil {
		t.Fatal(werr)
	}
	t.Logf("save: allocated %d MiB, peak heap +%d MiB", alloc>>20, peak>>20)
	if alloc > slack || peak > slack {
		t.Errorf("save of a %d MiB blob allocated %d MiB (peak +%d MiB), want < %d MiB", size>>20, alloc>>20, peak>>20, slack>>20)
	}

	sink := &memSink{}
	alloc, peak = memProbe(func() { werr = LoadFile(path, testKey, size, sink) })
	if werr != nil {
		t.Fatal(werr)
	}
	t.Logf("load: allocated %d MiB, peak heap +%d MiB", alloc>>20, peak>>20)
	if alloc > size+slack || peak > size+slack {
		t.Errorf("load of a %d MiB blob allocated %d MiB (peak +%d MiB), want < %d MiB", size>>20, alloc>>20, peak>>20, (size+slack)>>20)
	}
	if len(sink.models) != 1 || !bytes.Equal(sink.models[0].blob, blob) {
		t.Fatal("big blob did not round trip")
	}
}

// allocSink is a memSink that gives the memory blobs are read into.
type allocSink struct {
	memSink
	given [][]byte
}

func (s *allocSink) AllocBlob(n int64) ([]byte, error) {
	b := make([]byte, n)
	s.given = append(s.given, b)
	return b, nil
}

// A Sink that is a BlobAllocator gets each blob read into its memory,
// once per blob however many models share it.
func TestBlobAllocator(t *testing.T) {
	blob := randBytes(3 << 20)
	src := &memSource{models: []model{{ModelRecord{Key: "a"}, blob}, {ModelRecord{Key: "b"}, blob}}}
	sink := &allocSink{}
	if err := Read(bytes.NewReader(seal(t, src, frameSize)), testKey, 1<<30, sink); err != nil {
		t.Fatal(err)
	}
	checkSame(t, src, &sink.memSink)
	if len(sink.given) != 1 {
		t.Fatalf("%d allocations for one shared blob", len(sink.given))
	}
	for _, m := range sink.models {
		if &m.blob[0] != &sink.given[0][0] {
			t.Error("a model's blob is not the memory the sink gave")
		}
	}
}
