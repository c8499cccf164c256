package modelstore

import (
	"bytes"
	"errors"
	"math/rand"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
)

// fillChunks writes chunks into b as the reader does: Extend, then the
// bytes in steps, each reported with Filled. It returns the slices.
func fillChunks(t *testing.T, b *ModelBuffer, chunks ...[]byte) [][]byte {
	t.Helper()
	var out [][]byte
	for _, c := range chunks {
		dst, err := b.Extend(int64(len(c)))
		if err != nil {
			t.Fatalf("Extend(%d): %v", len(c), err)
		}
		for off := 0; off < len(c); off += 1 << 20 {
			k := copy(dst[off:], c[off:min(off+1<<20, len(c))])
			b.Filled(k)
		}
		out = append(out, dst)
	}
	return out
}

func randomBytes(seed int64, n int) []byte {
	b := make([]byte, n)
	rand.New(rand.NewSource(seed)).Read(b)
	return b
}

func testModelBuffer(t *testing.T, heap bool) {
	if heap {
		forceHeap.Store(true)
		t.Cleanup(func() { forceHeap.Store(false) })
	}
	chunks := [][]byte{randomBytes(1, 9<<20+3), randomBytes(2, 9<<20+3), randomBytes(3, 5<<20)}
	whole := bytes.Join(chunks, nil)
	b, err := NewModelBuffer(1<<30, int64(len(chunks[0])*3))
	if err != nil {
		t.Fatal(err)
	}
	if b.Mapped() == heap {
		t.Fatalf("Mapped() = %v with heap forced %v", b.Mapped(), heap)
	}
	parts := fillChunks(t, b, chunks...)
	b.Seal()
	if !bytes.Equal(b.Bytes(), whole) || b.Len() != len(whole) {
		t.Fatal("Bytes() differ from the chunks")
	}
	if b.Fingerprint() != Fingerprint(whole) {
		t.Fatal("Fingerprint() differs from the fingerprint of the bytes")
	}
	if !b.Holds(parts) {
		t.Error("Holds(the Extend slices) = false")
	}
	if b.Holds(chunks) {
		t.Error("Holds(equal bytes elsewhere) = true")
	}
	if b.Holds(parts[:2]) || b.Holds(parts[1:]) || b.Holds(nil) {
		t.Error("Holds(part of the buffer) = true")
	}
	if b.moved != 0 {
		t.Errorf("%d bytes moved although the expected size was right", b.moved)
	}
	b.Ref()
	b.Unref()
	if !bytes.Equal(b.Bytes(), whole) {
		t.Fatal("a reference less freed the buffer")
	}
	b.Unref()
	if b.Len() != 0 {
		t.Error("the last reference did not free the buffer")
	}
	defer func() {
		if recover() == nil {
			t.Error("Unref below zero did not panic")
		}
	}()
	b.Unref()
}

func TestModelBufferMapped(t *testing.T) { testModelBuffer(t, false) }
func TestModelBufferHeap(t *testing.T)   { testModelBuffer(t, true) }

// A buffer of the expected size (heap, or a mapping where the limit could
// not be reserved) whose chunks outgrow it moves once per growth, keeping
// the old memory for the slices that point there; Holds then refuses
// them, so the command copies them instead of keeping them.
func TestModelBufferGrows(t *testing.T) {
	for _, heap := range []bool{true, false} {
		forceHeap.Store(heap)
		b, err := NewModelBuffer(4<<20, 4<<20)
		if err != nil {
			t.Fatal(err)
		}
		b.limit = 64 << 20 // as if only the expected size could be mapped
		chunks := [][]byte{randomBytes(4, 4<<20), randomBytes(5, 8<<20)}
		parts := fillChunks(t, b, chunks...)
		if b.moved != 4<<20 {
			t.Errorf("heap %v: moved %d bytes, want the first chunk's %d", heap, b.moved, 4<<20)
		}
		whole := bytes.Join(chunks, nil)
		if !bytes.Equal(b.Bytes(), whole) || b.Fingerprint() != Fingerprint(whole) || !bytes.Equal(parts[0], chunks[0]) {
			t.Errorf("heap %v: contents or digest wrong after growth", heap)
		}
		if b.Holds(parts) {
			t.Errorf("heap %v: Holds(slices of the memory before the growth) = true", heap)
		}
		if want := map[bool]int{true: 0, false: 1}[heap]; len(b.retired) != want {
			t.Errorf("heap %v: %d retired mappings, want %d", heap, len(b.retired), want)
		}
		b.Unref()
	}
	forceHeap.Store(false)
}

func TestModelBufferLimit(t *testing.T) {
	for _, heap := range []bool{false, true} {
		forceHeap.Store(heap)
		b, err := NewModelBuffer(10<<20, 8<<20)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.Extend(6 << 20); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Extend(5 << 20); !errors.Is(err, ErrBufferFull) {
			t.Errorf("heap %v: Extend past the limit: %v", heap, err)
		}
		if _, err := b.Extend(4 << 20); err != nil {
			t.Errorf("heap %v: Extend up to the limit: %v", heap, err)
		}
		b.Unref()
	}
	forceHeap.Store(false)
}

// Freeing a buffer mid-upload (a client gone) stops its helper goroutines
// before the memory goes, and returns the memory at once.
func TestModelBufferFreedMidUpload(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("RSS from /proc")
	}
	debug.FreeOSMemory() // garbage of earlier tests would leave meanwhile
	before := rss(t)
	b, err := NewModelBuffer(1<<30, 256<<20)
	if err != nil {
		t.Fatal(err)
	}
	dst, err := b.Extend(256 << 20)
	if err != nil {
		t.Fatal(err)
	}
	block := bytes.Repeat([]byte{1}, 1<<20)
	for off := 0; off < 128<<20; off += 1 << 20 {
		copy(dst[off:off+1<<20], block)
		b.Filled(1 << 20)
	}
	if grew := rss(t) - before; grew < 100<<20 {
		t.Fatalf("RSS grew by %d MiB after 128 MiB written", grew>>20)
	}
	b.Unref()
	if left := rss(t) - before; left > 16<<20 {
		t.Errorf("RSS %d MiB above where it was after the buffer was freed", left>>20)
	}
}

// rss is this process's resident set size.
func rss(t *testing.T) int64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		t.Skip("no /proc/self/statm")
	}
	f := strings.Fields(string(b))
	pages, _ := strconv.ParseInt(f[1], 10, 64)
	return pages * int64(os.Getpagesize())
}

// recordingTap keeps what a Tap is told.
type recordingTap struct {
	got  []byte
	ends []bool
}

func (r *recordingTap) Stretch(p []byte) { r.got = append(r.got, p...) }
func (r *recordingTap) End(ok bool)      { r.ends = append(r.ends, ok) }

func TestModelBufferTapSeesEveryByteInOrder(t *testing.T) {
	data := randomBytes(7, 11<<20+123) // several stretches and a tail
	b, err := NewModelBuffer(64<<20, int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	tap := &recordingTap{}
	b.SetTap(tap)
	fillChunks(t, b, data[:5<<20], data[5<<20:])
	b.Fingerprint()
	if !bytes.Equal(tap.got, data) || len(tap.ends) != 1 || !tap.ends[0] {
		t.Fatalf("tap saw %d of %d bytes, ends %v", len(tap.got), len(data), tap.ends)
	}
	b.Unref()
	if len(tap.ends) != 2 || tap.ends[1] {
		t.Fatalf("ends after release %v", tap.ends)
	}
}

func TestModelBufferTapEndsFalse(t *testing.T) {
	// Too small to stream: the fingerprint is computed at once.
	b, _ := NewModelBuffer(64<<20, 1<<20)
	tap := &recordingTap{}
	b.SetTap(tap)
	fillChunks(t, b, randomBytes(1, 1<<20))
	b.Fingerprint()
	if len(tap.got) != 0 || len(tap.ends) != 1 || tap.ends[0] {
		t.Fatalf("small buffer: %d bytes, ends %v", len(tap.got), tap.ends)
	}
	b.Unref()
	// Dropped mid-upload.
	b, _ = NewModelBuffer(64<<20, 16<<20)
	tap = &recordingTap{}
	b.SetTap(tap)
	fillChunks(t, b, randomBytes(2, 9<<20))
	b.Unref()
	if len(tap.ends) == 0 || tap.ends[0] {
		t.Fatalf("dropped buffer: ends %v", tap.ends)
	}
}

// A resumable upload's append that did not complete is cut off; bytes
// already Filled are not.
func TestModelBufferTruncate(t *testing.T) {
	b, err := NewModelBuffer(100, 100)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Unref()
	first, _ := b.Extend(4)
	copy(first, "abcd")
	b.Filled(4)
	second, _ := b.Extend(3)
	copy(second, "xyz")
	if !b.HoldsFrom(4, [][]byte{second}) || b.HoldsFrom(4, [][]byte{first}) || b.HoldsFrom(4, nil) {
		t.Error("HoldsFrom does not tell the appended stretch")
	}
	if err := b.Truncate(3); err == nil {
		t.Error("Truncate below the Filled bytes succeeded")
	}
	if err := b.Truncate(4); err != nil || b.Len() != 4 || string(b.Bytes()) != "abcd" {
		t.Fatalf("Truncate(4): %v, %q", err, b.Bytes())
	}
	again, _ := b.Extend(2)
	copy(again, "ef")
	b.Filled(2)
	if string(b.Bytes()) != "abcdef" {
		t.Errorf("after the retry: %q", b.Bytes())
	}
}
