package modelstore

// Recycled tensor buffers: the memory of a tensor that AI.TENSORSET
// replaces goes back to a pool, and the next blob of its size is read into
// it, as Redis's allocator hands back the value it has just freed. Go's
// heap instead hands out memory the caches have not seen for a whole
// collection cycle (server/gc.go): the blob's allocation and its first
// writes were 16% of a pipelined AI.TENSORSET's CPU, and recycling took
// 25-30% off the server's CPU a command (docs/BENCHMARKS.md, "Inference
// loop").
//
// A buffer may go back only when nothing can read it any more, and a
// reused buffer holds another key's, maybe another user's, bytes: so the
// rules are strict, and anything in doubt keeps the buffer for the
// garbage collector.
//
//   - Only a tensor made by NewTensorFromBuffer, of a buffer BlobBuffer
//     gave and that nothing else holds, counts its holders; every other
//     tensor's memory is Go's alone.
//   - The count starts at one, the keyspace's hold once the tensor is
//     stored. The keyspace gives its hold up only when Keyspace.Apply
//     replaces the tensor at its key; a tensor removed any other way (DEL,
//     expiry, FLUSHALL, a replacement through SetMany) keeps the hold
//     forever, and its buffer goes to the garbage collector.
//   - A reader that keeps a tensor after the keyspace's lock (Get,
//     GetTensor, Items, Scan) pins it: a pinned tensor is never recycled.
//     ReadTensor's reader (AI.TENSORGET's reply) reads it under the lock
//     instead, and keeps nothing. Only the append-only log's journal
//     counts its hold (Hold under the keyspace lock), and calls Done once
//     the record is encoded.
//   - The holder that brings the count to zero puts the buffer back and
//     sets Data to nil, so that a reader the rules missed reads nothing,
//     and the race detector sees it.
//   - A buffer handed out holds old bytes past the length asked for: every
//     slice of it is capped at that length, and the caller of BlobBuffer
//     overwrites all of it.

import (
	"math/bits"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"
)

// The pooled sizes: from minPooled to maxPooled bytes, in classes 1/16 of
// a power of two apart (at most 6% of a buffer unused, as Go's own size
// classes).
const (
	minPooled  = 512
	maxPooled  = 64 << 10
	classSteps = 16
	numClasses = 1 + (16-9)*classSteps
)

// blobPools are the free buffers of each class, as pointers to their
// first byte (no allocation to box them); sync.Pool lets the collector
// take them back when they sit unused.
var blobPools [numClasses]sync.Pool

// blobClass returns the class of an n-byte buffer and the class's size;
// ok is false outside the pooled sizes.
func blobClass(n int) (class, size int, ok bool) {
	if n <= 0 || n > maxPooled {
		return 0, 0, false
	}
	if n <= minPooled {
		return 0, minPooled, true
	}
	k := bits.Len(uint(n - 1)) // 2^(k-1) < n <= 2^k, k in 10..16
	step := 1 << (k - 5)
	j := (n - 1<<(k-1) + step - 1) / step // 1..16
	return 1 + (k-10)*classSteps + j - 1, 1<<(k-1) + j*step, true
}

// PooledSize reports whether BlobBuffer recycles buffers of n bytes.
func PooledSize(n int) bool {
	_, _, ok := blobClass(n)
	return ok
}

// BlobBuffer returns n bytes for a blob to be read into: a recycled buffer
// of n's class when one is free, or new memory. Its bytes are not cleared:
// the caller must overwrite all n. The slice is capped at n.
func BlobBuffer(n int) []byte {
	class, size, ok := blobClass(n)
	if !ok {
		return uncleared(n)
	}
	if p, _ := blobPools[class].Get().(unsafe.Pointer); p != nil {
		return unsafe.Slice((*byte)(p), size)[:n:n]
	}
	return uncleared(size)[:n:n]
}

// uncleared returns n bytes of fresh memory that Go has not cleared. Its
// pages are committed as its bytes arrive and are written, so a length
// announced and never sent costs (almost) no memory: make would clear the
// allocation first, which commits all of it at once when it reuses pages
// the heap holds, as it does under the memory-limit pacing
// (server/gc.go): a 400 MB bulk announced and not sent grew RSS by 33-78
// MB in 0.3 s (test_core.TestBadInput). strings.Builder.Grow is the
// standard library's one way to an uncleared allocation. The caller must
// overwrite every byte before anything reads them, and drop the memory if
// it cannot.
func uncleared(n int) []byte {
	var b strings.Builder
	b.Grow(n)
	b.WriteByte(0)
	return unsafe.Slice(unsafe.StringData(b.String()), n)
}

// holders counts who may read a recycled tensor's buffer; pinned (below
// zero) once a reader that does not count may have it.
type holders struct {
	n   atomic.Int32
	buf []byte // the whole buffer, as BlobBuffer allocated it
}

const pinned = -1

// NewTensorFromBuffer is NewTensorFromBlob for a blob that BlobBuffer
// returned and that nothing else holds: the tensor's buffer goes back to
// the pool once the keyspace has replaced it and nothing holds it
// (tensorbuf.go). A blob of a size that is not pooled, or a shape of more
// than InlineRank dimensions, makes a plain tensor.
func NewTensorFromBuffer(dt DType, shape []int64, blob []byte) (*Tensor, error) {
	_, size, ok := blobClass(len(blob))
	if !ok || len(shape) > InlineRank {
		return NewTensorFromBlob(dt, shape, blob)
	}
	if err := checkBlob(dt, shape, blob); err != nil {
		return nil, err
	}
	w := &heldTensor{}
	w.init(dt, shape, blob)
	w.h.buf = unsafe.Slice(unsafe.SliceData(blob), size)
	w.h.n.Store(1)
	w.t.hold = &w.h
	return &w.t, nil
}

// swap moves the count from n to next(n) in one atomic step, if next
// allows it (ok); it returns the count it found and whether it moved it.
func (h *holders) swap(next func(n int32) (m int32, ok bool)) (int32, bool) {
	for {
		n := h.n.Load()
		m, ok := next(n)
		if !ok {
			return n, false
		}
		if h.n.CompareAndSwap(n, m) {
			return n, true
		}
	}
}

// pin keeps t's buffer from the pool for good: a reader that does not
// count its hold has it.
func (t *Tensor) pin() {
	if h := t.hold; h != nil {
		h.swap(func(n int32) (int32, bool) { return pinned, n >= 0 })
	}
}

// Hold counts one more holder of t's buffer, who must call Done. Only a
// holder, or the keyspace under its lock while t is stored, may call it.
func (t *Tensor) Hold() {
	if h := t.hold; h != nil {
		h.swap(func(n int32) (int32, bool) { return n + 1, n > 0 })
	}
}

// Done gives up one hold of t's buffer; the last one puts it back in the
// pool. After it, the holder must not read t's Data. (Not Release: the
// server releases every value removed from the keyspace by that name,
// App.Release, which must not give up the keyspace's hold: only
// Keyspace.Apply does, once.)
func (t *Tensor) Done() {
	h := t.hold
	if h == nil {
		return
	}
	if n, ok := h.swap(func(n int32) (int32, bool) { return n - 1, n > 0 }); !ok || n != 1 {
		return
	}
	t.Data = nil
	if class, size, ok := blobClass(len(h.buf)); ok && size == len(h.buf) {
		blobPools[class].Put(unsafe.Pointer(unsafe.SliceData(h.buf)))
	}
	h.buf = nil
}

// pinValue pins v if it is a tensor.
func pinValue(v Value) {
	if t, ok := v.(*Tensor); ok {
		t.pin()
	}
}

// doneValue gives up the keyspace's hold of v if it is a tensor.
func doneValue(v Value) {
	if t, ok := v.(*Tensor); ok {
		t.Done()
	}
}
