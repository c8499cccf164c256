package persistence

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
)

// tampered is a small snapshot cut into many frames, to be damaged.
func tampered(t *testing.T) ([]byte, []int) {
	t.Helper()
	b := seal(t, everything(), minFrameSize)
	offs := frames(t, b)
	if len(offs) < 4 {
		t.Fatalf("%d frames, want at least 4", len(offs))
	}
	return b, offs
}

func expect(t *testing.T, what string, b []byte, want error) {
	t.Helper()
	_, err := unseal(b)
	if got := sentinel(err); got != want {
		t.Errorf("%s: got %v, want %v", what, err, want)
	}
}

// Every header byte, every frame header byte and a sample of ciphertext
// bytes, flipped one at a time.
func TestFlippedByte(t *testing.T) {
	b, offs := tampered(t)
	lastLen := offs[len(offs)-1]
	positions := []int{}
	for i := range headerSize {
		positions = append(positions, i)
	}
	for _, off := range offs {
		for i := range 8 {
			positions = append(positions, off+i)
		}
	}
	for p := headerSize; p < len(b); p += 97 {
		positions = append(positions, p)
	}
	positions = append(positions, len(b)-1)
	for _, p := range positions {
		for _, mask := range []byte{0x01, 0x80} {
			c := bytes.Clone(b)
			c[p] ^= mask
			_, err := unseal(c)
			got := sentinel(err)
			want := ErrCorrupt
			switch {
			case p < offVersion:
				want = ErrNotSnapshot
			case p < offFlags:
				want = ErrVersion
			case p >= offKeyID && p < offSalt:
				want = ErrWrongKey
			case p >= lastLen && p < lastLen+4 && got == ErrTruncated:
				// A longer length for the last frame reads past the
				// end of the file: that looks like truncation.
				want = ErrTruncated
			}
			if got != want {
				t.Errorf("byte %d ^ %#02x: got %v, want %v", p, mask, err, want)
			}
		}
	}
}

func TestTruncated(t *testing.T) {
	b, offs := tampered(t)
	cuts := []int{0, 1, 7, 8, 9, 10, 11, 50, headerSize - 1, headerSize, headerSize + 1}
	for _, off := range offs {
		cuts = append(cuts, off-1, off, off+1, off+4, off+5, off+6)
	}
	for c := headerSize; c < len(b); c += 251 {
		cuts = append(cuts, c)
	}
	cuts = append(cuts, len(b)-1)
	for _, c := range cuts {
		expect(t, fmt.Sprintf("cut at %d of %d", c, len(b)), b[:c], ErrTruncated)
	}
}

// cut returns frame i of b.
func cut(b []byte, offs []int, i int) []byte {
	if i+1 < len(offs) {
		return b[offs[i]:offs[i+1]]
	}
	return b[offs[i]:]
}

// rebuild joins b's header and the given frames of b.
func rebuild(b []byte, offs []int, order ...int) []byte {
	out := slices.Clone(b[:headerSize])
	for _, i := range order {
		out = append(out, cut(b, offs, i)...)
	}
	return out
}

func TestFrames(t *testing.T) {
	b, offs := tampered(t)
	n := len(offs)
	all := func() []int {
		o := make([]int, n)
		for i := range o {
			o[i] = i
		}
		return o
	}
	if _, err := unseal(rebuild(b, offs, all()...)); err != nil {
		t.Fatalf("rebuilding the file unchanged: %v", err)
	}
	swapped := all()
	swapped[1], swapped[2] = swapped[2], swapped[1]
	expect(t, "frames 1 and 2 swapped", rebuild(b, offs, swapped...), ErrCorrupt)
	expect(t, "frame 1 duplicated", rebuild(b, offs, slices.Insert(all(), 1, 1)...), ErrCorrupt)
	expect(t, "frame 1 dropped", rebuild(b, offs, slices.Delete(all(), 1, 2)...), ErrCorrupt)
	expect(t, "last frame dropped", rebuild(b, offs, all()[:n-1]...), ErrTruncated)
	expect(t, "last frame repeated", rebuild(b, offs, append(all(), n-1)...), ErrCorrupt)
	expect(t, "one byte after the last frame", append(slices.Clone(b), 0), ErrCorrupt)
	lastAsMiddle := slices.Clone(b)
	lastAsMiddle[offs[n-1]+4] = 0
	expect(t, "last frame flagged as not last", lastAsMiddle, ErrCorrupt)
	middleAsLast := slices.Clone(b[:offs[2]])
	middleAsLast[offs[1]+4] = lastFrame
	expect(t, "middle frame flagged as last", middleAsLast, ErrCorrupt)

	// Frames of another snapshot of the same content, sealed with the same
	// key, do not fit this one, nor does its header.
	other := seal(t, everything(), minFrameSize)
	otherOffs := frames(t, other)
	moved := slices.Clone(b[:offs[1]])
	moved = append(moved, cut(other, otherOffs, 1)...)
	moved = append(moved, b[offs[2]:]...)
	expect(t, "frame 1 from another file", moved, ErrCorrupt)
	expect(t, "header from another file", append(slices.Clone(other[:headerSize]), b[headerSize:]...), ErrCorrupt)
}

func TestWrongKey(t *testing.T) {
	b := seal(t, everything(), frameSize)
	other := bytes.Clone(testKey)
	other[0] ^= 1
	err := Read(bytes.NewReader(b), other, 1<<30, &memSink{})
	if !errors.Is(err, ErrWrongKey) {
		t.Fatalf("wrong key: got %v", err)
	}
}

func TestBadSealKey(t *testing.T) {
	b := seal(t, everything(), frameSize)
	for _, key := range [][]byte{nil, make([]byte, 16), make([]byte, KeySize), make([]byte, 64)} {
		if err := Read(bytes.NewReader(b), key, 1<<30, &memSink{}); !errors.Is(err, ErrSealKey) {
			t.Errorf("Read with a %d-byte key: got %v", len(key), err)
		}
		if err := Write(io.Discard, key, &memSource{}); !errors.Is(err, ErrSealKey) {
			t.Errorf("Write with a %d-byte key: got %v", len(key), err)
		}
	}
}

func TestNotSnapshot(t *testing.T) {
	expect(t, "random bytes", randBytes(1000), ErrNotSnapshot)
	expect(t, "RDB file", []byte("REDIS0011\xfa\x09redis-ver"), ErrNotSnapshot)
	b := seal(t, everything(), frameSize)
	binary.BigEndian.PutUint16(b[offVersion:], formatVersion+1)
	expect(t, "a version from the future", b, ErrVersion)
	binary.BigEndian.PutUint16(b[offVersion:], 0)
	expect(t, "version 0", b, ErrVersion)
}

func TestTooLarge(t *testing.T) {
	src := &memSource{models: []model{{ModelRecord{Key: "m"}, randBytes(1000)}}}
	b := seal(t, src, frameSize)
	if err := Read(bytes.NewReader(b), testKey, 999, &memSink{}); !errors.Is(err, ErrTooLarge) {
		t.Errorf("blob over the limit: got %v", err)
	}
	if err := Read(bytes.NewReader(b), testKey, 1000, &memSink{}); err != nil {
		t.Errorf("blob at the limit: %v", err)
	}
	src = &memSource{tensors: []TensorRecord{{Key: "t", DType: 7, Shape: []int64{1000}, Data: randBytes(1000)}}}
	b = seal(t, src, frameSize)
	if err := Read(bytes.NewReader(b), testKey, 999, &memSink{}); !errors.Is(err, ErrTooLarge) {
		t.Errorf("tensor over the limit: got %v", err)
	}
}

type failingSink struct{ memSink }

var errSink = errors.New("sink says no")

func (failingSink) Model(ModelRecord, []byte) error { return errSink }

func TestSinkError(t *testing.T) {
	b := seal(t, everything(), frameSize)
	if err := Read(bytes.NewReader(b), testKey, 1<<30, &failingSink{}); err != errSink {
		t.Fatalf("got %v, want the sink's error unchanged", err)
	}
}

func TestWriterRefusesWhatReaderWould(t *testing.T) {
	extra := map[string]string{}
	for i := range MaxExtra + 1 {
		extra[fmt.Sprint(i)] = ""
	}
	for name, src := range map[string]*memSource{
		"rank":           {tensors: []TensorRecord{{Key: "t", Shape: make([]int64, MaxRank+1)}}},
		"negative dim":   {tensors: []TensorRecord{{Key: "t", Shape: []int64{-1}}}},
		"too many extra": {models: []model{{ModelRecord{Key: "m", Extra: extra}, nil}}},
	} {
		if err := Write(io.Discard, testKey, src); err == nil {
			t.Errorf("%s: Write accepted it", name)
		}
	}
}

// plainRecords is the uncompressed record stream Write would produce for src.
func plainRecords(t testing.TB, src Source) []byte {
	t.Helper()
	var buf bytes.Buffer
	e := newEncoder(&buf)
	if err := src.Tensors(e.tensor); err != nil {
		t.Fatal(err)
	}
	if err := src.Models(e.model); err != nil {
		t.Fatal(err)
	}
	if err := e.end(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// sealPlain seals an arbitrary record stream with the test key, as Write
// seals a well-formed one.
func sealPlain(t testing.TB, plain []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	h, err := newHeader(testKey, time.Now(), minFrameSize)
	if err != nil {
		t.Fatal(err)
	}
	buf.Write(h.raw[:])
	fw, err := newFrameWriter(&buf, h)
	if err != nil {
		t.Fatal(err)
	}
	enc, err := zstd.NewWriter(fw)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := enc.Write(plain); err != nil {
		t.Fatal(err)
	}
	if err := enc.Close(); err != nil {
		t.Fatal(err)
	}
	if err := fw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// badRecords are authentic files whose record streams are wrong: what a
// buggy writer could produce. Each must be refused as ErrCorrupt.
func badRecords(t testing.TB) []badRecord {
	src := &memSource{
		tensors: []TensorRecord{{Key: "t", DType: 1, Shape: []int64{1}, Data: []byte{1, 2, 3, 4}}},
		models:  []model{{ModelRecord{Key: "m", Extra: map[string]string{"a": "1", "b": "2"}}, []byte("blob")}},
	}
	good := plainRecords(t, src)
	tensorEnd := 1 + 4 + 1 + 4 + 8 + 1 + 1 + 8 + 8 + 4
	blobAt := tensorEnd
	modelAt := blobAt + 1 + 4 + 32 + 8 + 4
	endAt := len(good) - 41
	if good[blobAt] != recBlob || good[modelAt] != recModel || good[endAt] != recEnd {
		t.Fatal("record offsets in the test are wrong")
	}
	patch := func(at int, b ...byte) []byte {
		c := bytes.Clone(good)
		copy(c[at:], b)
		return c
	}
	return []badRecord{
		{"unknown record type", patch(0, 0x7f), "unknown record type 0x7f"},
		{"negative dimension", patch(1+4+1+4+8+1+1, 0x80), "negative dimension"},
		{"string over the limit", patch(1, 0x20, 0x00, 0x00, 0x01), "tensor key is 536870913 bytes"},
		{"string cut short", patch(1, 0x1f, 0x00, 0x00, 0x00), "before the END record"},
		{"owner over the limit", patch(1+4+1, 0x20, 0x00, 0x00, 0x01), "tensor owner is 536870913 bytes"},
		{"blob id 2 first", patch(blobAt+1, 0, 0, 0, 2), "blob id 2, expected 1"},
		{"blob hash mismatch", patch(blobAt+5, good[blobAt+5]^1), "does not match its SHA-256"},
		{"model with no blob", patch(modelAt+1+4+1+8, 0, 0, 0, 9), "refers to blob 9"},
		{"optimize flag 2", patch(modelAt+1+4+1+8+4+12+4+4+8, 2), "optimize flag 2"},
		{"extra out of order", patch(endAt-6, 'a'), "out of order"},
		{"checksum mismatch", patch(len(good)-1, good[len(good)-1]^1), "checksum mismatch"},
		{"record count", patch(endAt+8, good[endAt+8]^1), "END record counts 2 records"},
		{"no END record", good[:endAt], "before the END record"},
		{"cut inside END", good[:len(good)-1], "before the END record"},
		{"cut inside a tensor", good[:10], "before the END record"},
		{"data after END", append(bytes.Clone(good), 0), "data after the END record"},
		{"empty stream", []byte{}, "before the END record"},
	}
}

// badRecord is a record stream that a version 1 reader must refuse, and
// words from the reason it must give.
type badRecord struct {
	name  string
	plain []byte
	why   string
}

func TestBadRecords(t *testing.T) {
	for _, bad := range badRecords(t) {
		_, err := unseal(sealPlain(t, bad.plain))
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), bad.why) {
			t.Errorf("%s: got %v, want ErrCorrupt saying %q", bad.name, err, bad.why)
		}
	}
	// The helpers themselves produce a good file from good records.
	src := everything()
	sink, err := unseal(sealPlain(t, plainRecords(t, src)))
	if err != nil {
		t.Fatal(err)
	}
	checkSame(t, src, sink)
}

// Sizes a record declares are checked before anything is allocated: a
// stream that claims a 1 TiB blob, tensor or string costs next to nothing.
func TestDeclaredSizesAllocateNothing(t *testing.T) {
	huge := []byte{0, 0, 1, 0, 0, 0, 0, 0} // 1 TiB
	blob := append(append([]byte{recBlob, 0, 0, 0, 1}, make([]byte, 32)...), huge...)
	tensor := append([]byte{recTensor, 0, 0, 0, 0, 0, 0, 0, 0}, make([]byte, 8)...) // key, owner, expiry
	tensor = append(append(tensor, 1, 0), huge...)
	for name, c := range map[string]struct {
		plain []byte
		want  error
	}{
		"blob":              {blob, ErrTooLarge},
		"tensor":            {tensor, ErrTooLarge},
		"string over limit": {[]byte{recModel, 0xff, 0xff, 0xff, 0xff}, ErrCorrupt},
		"512 MiB string":    {[]byte{recModel, 0x20, 0, 0, 0, 'k'}, ErrCorrupt},
	} {
		var err error
		alloc, _ := memProbe(func() { err = decodeRecords(bytes.NewReader(c.plain), formatVersion, fuzzMaxBlob, &memSink{}) })
		if !errors.Is(err, c.want) {
			t.Errorf("%s: got %v, want %v", name, err, c.want)
		}
		if alloc > 1<<20 {
			t.Errorf("%s: allocated %d bytes", name, alloc)
		}
	}
}
