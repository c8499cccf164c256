package persistence

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"reflect"
	"testing"
)

// testKey is the seal key of the tests and of the golden files: the bytes
// 0x01, 0x02, ..., 0x20. Never change it, or the golden files stop loading.
var testKey = func() []byte {
	k := make([]byte, KeySize)
	for i := range k {
		k[i] = byte(i + 1)
	}
	return k
}()

// model is a model record with its blob, as a memSource holds it.
type model struct {
	rec  ModelRecord
	blob []byte
}

// memSource is a Source over slices.
type memSource struct {
	tensors []TensorRecord
	models  []model
}

func (s *memSource) Tensors(yield func(TensorRecord) error) error {
	for _, t := range s.tensors {
		if err := yield(t); err != nil {
			return err
		}
	}
	return nil
}

func (s *memSource) Models(yield func(ModelRecord, []byte) error) error {
	for _, m := range s.models {
		if err := yield(m.rec, m.blob); err != nil {
			return err
		}
	}
	return nil
}

// memSink collects what Read hands on.
type memSink struct {
	tensors []TensorRecord
	models  []model
}

func (s *memSink) Tensor(t TensorRecord) error {
	s.tensors = append(s.tensors, t)
	return nil
}

func (s *memSink) Model(m ModelRecord, blob []byte) error {
	s.models = append(s.models, model{m, blob})
	return nil
}

// checkSame fails the test unless sink holds exactly what src held.
func checkSame(t *testing.T, src *memSource, sink *memSink) {
	t.Helper()
	if len(sink.tensors) != len(src.tensors) || len(sink.models) != len(src.models) {
		t.Fatalf("got %d tensors and %d models, want %d and %d",
			len(sink.tensors), len(sink.models), len(src.tensors), len(src.models))
	}
	for i, want := range src.tensors {
		got := sink.tensors[i]
		if got.Key != want.Key || got.Owner != want.Owner || got.ExpireAtUnixMs != want.ExpireAtUnixMs || got.DType != want.DType ||
			len(got.Shape) != len(want.Shape) || (len(want.Shape) > 0 && !reflect.DeepEqual(got.Shape, want.Shape)) ||
			!bytes.Equal(got.Data, want.Data) {
			t.Errorf("tensor %d: got %+v, want %+v", i, got, want)
		}
	}
	for i, want := range src.models {
		got := sink.models[i]
		// Read gives the digest it verified; compare the rest as written.
		if got.rec.BlobSHA256 == nil || *got.rec.BlobSHA256 != sha256.Sum256(got.blob) {
			t.Errorf("model %q: BlobSHA256 is not the blob's digest", want.rec.Key)
		}
		got.rec.BlobSHA256 = want.rec.BlobSHA256
		if !reflect.DeepEqual(got.rec, want.rec) {
			t.Errorf("model %d: got %+v, want %+v", i, got.rec, want.rec)
		}
		if !bytes.Equal(got.blob, want.blob) {
			t.Errorf("model %q: blob differs (%d bytes, want %d)", want.rec.Key, len(got.blob), len(want.blob))
		}
	}
}

// seal writes src with the test key and the given frame size.
func seal(t testing.TB, src Source, frameSize int) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := write(&buf, testKey, src, frameSize); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// unseal reads a snapshot from b with the test key.
func unseal(b []byte) (*memSink, error) {
	sink := &memSink{}
	return sink, Read(bytes.NewReader(b), testKey, 1<<30, sink)
}

func randBytes(n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}

// sentinels are the errors Read must wrap; sentinel names the one err wraps.
var sentinels = []error{ErrNotSnapshot, ErrVersion, ErrWrongKey, ErrCorrupt, ErrTruncated}

func sentinel(err error) error {
	for _, s := range sentinels {
		if errors.Is(err, s) {
			return s
		}
	}
	return nil
}

// frames returns the offset of every frame in a snapshot.
func frames(t testing.TB, b []byte) []int {
	t.Helper()
	var offs []int
	for off := headerSize; off < len(b); {
		offs = append(offs, off)
		l := int(b[off])<<24 | int(b[off+1])<<16 | int(b[off+2])<<8 | int(b[off+3])
		off += frameHdrSize + l
	}
	return offs
}
