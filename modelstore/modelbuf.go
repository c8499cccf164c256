package modelstore

import (
	"errors"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"syscall"
)

// ModelBuffer holds the bytes of one uploaded model in a single contiguous
// region that the network front end fills straight from the socket, chunk
// after chunk, so that a model of any size is never copied on its way in:
// not per chunk, not to join the chunks, and (see NewSharedSession) not by
// ONNX Runtime either, which reads the weights where they lie.
//
// The region is, in order of preference:
//   - an anonymous private mapping that reserves address space for the
//     largest allowed model (MAP_NORESERVE: nothing is committed until
//     written), advised for transparent huge pages, which the kernel faults
//     in 512 times less often than 4 KiB pages, and which munmap returns to
//     the system at once when the buffer is freed;
//   - a mapping of the expected size, where a large reservation is refused
//     (strict overcommit, an enclave's fixed heap);
//   - a Go allocation of the expected size, where mmap is unavailable.
//
// When ShareBuffers is on (the engine runs in worker processes), the
// mappings are of a memfd instead of anonymous memory, so that a worker
// maps the same pages read-only (FD): the model is held once for both
// processes. Shared memory is backed by huge pages only if the kernel's
// shmem_enabled setting allows; the buffer advises them in any case.
//
// Only the last two may have to grow, when the chunks turn out larger than
// expected: Extend then copies what is in place once, and keeps the old
// memory until the buffer is freed, since earlier chunks still point there.
//
// A ModelBuffer is reference counted: the upload that made it holds one
// reference, a Blob and its ONNX Runtime session one each. The memory is
// released when the last one is dropped.
//
// Its fingerprint (see Fingerprint) is computed while it fills: Filled
// hands each newly arrived stretch to a hashing goroutine, so that by the
// time the last byte lands only the tail is left to hash.
type ModelBuffer struct {
	mem    []byte // reserved (mapped) or allocated (heap) memory
	limit  int64  // the most Extend may hand out
	n      int    // bytes handed out by Extend
	filled int    // bytes reported in place by Filled
	mapped bool   // mem is a mapping of ours (munmap on release)
	fd     int    // the memfd mem maps, or -1
	refs   atomic.Int32
	// retired holds mappings left by growth, unmapped with the buffer;
	// retiredFDs their memfds.
	retired    [][]byte
	retiredFDs []int

	h       hashPipe
	pre     prefaulter
	summed  bool
	sum     uint64
	moved   int // bytes copied by heap growth (tests)
	release sync.Once
}

// hashPipe feeds stretches of the buffer to a goroutine hashing them.
type hashPipe struct {
	sent  int         // bytes sent to the goroutine
	ch    chan []byte // nil until the first send
	done  chan uint64
	abort atomic.Bool
	tap   Tap // nil, or told of each stretch once hashed (SetTap)
}

// Tap sees the bytes of a ModelBuffer as they arrive, on the goroutine that
// fingerprints them, so that a consumer (the append-only log's sealed model
// file) keeps up with the upload instead of starting after it.
type Tap interface {
	// Stretch is the next stretch of the buffer, in order. It must not
	// keep p past the buffer's release.
	Stretch(p []byte)
	// End: the buffer is complete and every byte went through Stretch
	// (true), or the buffer was dropped or too small to stream (false).
	// It may be called more than once; only the first call counts.
	End(complete bool)
}

// SetTap attaches t; call it before the first Filled.
func (b *ModelBuffer) SetTap(t Tap) { b.h.tap = t }

// Tap is the buffer's Tap, nil if none.
func (b *ModelBuffer) Tap() Tap { return b.h.tap }

// prefaulter faults a mapping's pages in ahead of the socket reads that
// fill them, on another thread: on first touch every page costs the kernel
// (and, in a virtual machine, the host) far more than copying into it, and
// done in the reader's thread that cost adds up with the copy instead of
// overlapping it.
type prefaulter struct {
	ch    chan []byte // stretches to fault in, in order; nil until the first
	done  chan struct{}
	abort atomic.Bool
}

// prefaultStep is how much the prefaulter faults in at a time.
const prefaultStep = 8 << 20

func (p *prefaulter) run() {
	defer close(p.done)
	for s := range p.ch {
		for len(s) > 0 && !p.abort.Load() {
			k := min(len(s), prefaultStep)
			if populateAnon(s[:k]) != nil {
				p.abort.Store(true) // an older kernel: the reads fault as usual
			}
			s = s[k:]
		}
	}
}

// stop ends the prefaulting (done or not) and waits for it.
func (p *prefaulter) stop() {
	if p.ch != nil {
		p.abort.Store(true)
		close(p.ch)
		<-p.done
		p.ch = nil
	}
}

// Tuning of the hashing: stretches are sent to the pipeline once they reach
// hashSendMin, and hashed in pieces of hashPiece so that the goroutine
// checks for an abort often.
const (
	hashSendMin = 4 << 20
	hashPiece   = 1 << 20
)

// ErrBufferFull is returned by Extend beyond the buffer's limit.
var ErrBufferFull = errors.New("model buffer limit reached")

// forceHeap makes NewModelBuffer skip mmap (tests of the fallback).
var forceHeap atomic.Bool

// shareBuffers: NewModelBuffer maps memfds (see ShareBuffers).
var shareBuffers atomic.Bool

// ShareBuffers makes the buffers made from now on shareable with another
// process (a memfd, FD) when on, private anonymous memory when off (the
// default). The server turns it on when models run in worker processes.
func ShareBuffers(on bool) { shareBuffers.Store(on) }

// mapRegion maps size bytes of the kind ShareBuffers asks for; fd is -1
// for anonymous memory.
func mapRegion(size int64) ([]byte, int, error) {
	if shareBuffers.Load() {
		return mapShared(size)
	}
	mem, err := mapAnon(size)
	return mem, -1, err
}

// NewModelBuffer makes an empty buffer for a model of at most limit bytes,
// expected to be about expect bytes. The caller holds its one reference.
func NewModelBuffer(limit, expect int64) (*ModelBuffer, error) {
	if expect > limit {
		expect = limit
	}
	b := &ModelBuffer{limit: limit, fd: -1}
	b.refs.Store(1)
	if !forceHeap.Load() {
		for _, size := range []int64{limit, expect} {
			if mem, fd, err := mapRegion(size); err == nil {
				b.mem, b.mapped, b.fd = mem, true, fd
				return b, nil
			}
		}
	}
	if expect < 0 || expect != int64(int(expect)) {
		return nil, ErrBufferFull
	}
	b.mem = make([]byte, 0, int(expect))
	return b, nil
}

// Extend hands out the next n bytes of the buffer, for the caller to fill
// before it calls Filled. The slice stays valid while the buffer is
// referenced; if a heap buffer has to grow, earlier slices keep the old
// memory (which Bytes no longer returns).
func (b *ModelBuffer) Extend(n int64) ([]byte, error) {
	limit := b.limit
	if n < 0 || int64(b.n)+n > limit {
		return nil, ErrBufferFull
	}
	end := b.n + int(n)
	if end > cap(b.mem) {
		b.grow(max(int64(end), min(limit, 2*int64(cap(b.mem)))))
	}
	b.mem = b.mem[:end]
	dst := b.mem[b.n:end:end]
	b.n = end
	if b.mapped && len(dst) > 0 {
		if b.pre.ch == nil {
			b.pre.ch = make(chan []byte, 16)
			b.pre.done = make(chan struct{})
			go b.pre.run()
		}
		select {
		case b.pre.ch <- dst:
		default: // far enough ahead already
		}
	}
	return dst, nil
}

// grow moves the bytes in place to new memory of size bytes.
func (b *ModelBuffer) grow(size int64) {
	b.pre.stop() // it may be faulting in the old memory
	mem, fd, err := []byte(nil), -1, errors.ErrUnsupported
	if !forceHeap.Load() {
		mem, fd, err = mapRegion(size)
	}
	if err != nil {
		mem = make([]byte, 0, int(size))
	}
	mem = mem[:b.n]
	b.moved += copy(mem, b.mem[:b.n])
	if b.mapped {
		b.retired = append(b.retired, b.mem)
	}
	if b.fd >= 0 {
		b.retiredFDs = append(b.retiredFDs, b.fd)
	}
	b.mem, b.mapped, b.fd = mem, err == nil, fd
}

// Filled reports that k more bytes are in place (in Extend order). Large
// enough stretches go to the hashing goroutine.
func (b *ModelBuffer) Filled(k int) {
	b.filled += k
	if b.filled-b.h.sent >= hashSendMin {
		b.sendHash()
	}
}

func (b *ModelBuffer) sendHash() {
	if b.h.ch == nil {
		b.h.ch = make(chan []byte, 64)
		b.h.done = make(chan uint64, 1)
		go b.h.run()
	}
	b.h.ch <- b.mem[b.h.sent:b.filled]
	b.h.sent = b.filled
}

func (p *hashPipe) run() {
	var h maphash.Hash
	h.SetSeed(fingerprintSeed)
	for s := range p.ch {
		stretch := s
		for len(s) > 0 && !p.abort.Load() {
			k := min(len(s), hashPiece)
			h.Write(s[:k])
			s = s[k:]
		}
		if p.tap != nil && !p.abort.Load() {
			p.tap.Stretch(stretch)
		}
	}
	if p.tap != nil {
		p.tap.End(!p.abort.Load())
	}
	p.done <- h.Sum64()
}

// fingerprintSeed keys this process's fingerprints: they are never stored
// or shown, and a client cannot predict them.
var fingerprintSeed = maphash.MakeSeed()

// Fingerprint is a fast keyed 64-bit hash of data (hash/maphash, about six
// times the speed of SHA-256 here), by which the Registry finds candidate
// duplicates before it compares their bytes.
func Fingerprint(data []byte) uint64 { return maphash.Bytes(fingerprintSeed, data) }

// Fingerprint returns the Fingerprint of the bytes in place. It ends the
// hashing: call it once the buffer is complete.
func (b *ModelBuffer) Fingerprint() uint64 {
	if b.summed {
		return b.sum
	}
	if b.h.ch == nil {
		b.sum = Fingerprint(b.mem[:b.filled])
		if b.h.tap != nil {
			b.h.tap.End(false) // never streamed
		}
	} else {
		if b.filled > b.h.sent {
			b.sendHash()
		}
		close(b.h.ch)
		b.sum = <-b.h.done
		b.h.ch = nil
	}
	b.summed = true
	return b.sum
}

// stopHashing stops the goroutine without waiting for its result's worth
// of work, before the memory it reads goes away.
func (b *ModelBuffer) stopHashing() {
	if b.h.ch != nil {
		b.h.abort.Store(true)
		close(b.h.ch)
		<-b.h.done
		b.h.ch = nil
	}
}

// Bytes returns the model bytes handed out so far.
func (b *ModelBuffer) Bytes() []byte { return b.mem[:b.n:b.n] }

// Len is the number of bytes handed out so far.
func (b *ModelBuffer) Len() int { return b.n }

// Mapped reports whether the buffer is a mapping rather than Go memory.
func (b *ModelBuffer) Mapped() bool { return b.mapped }

// Shareable reports whether another process can map the buffer (FD).
func (b *ModelBuffer) Shareable() bool { return b.fd >= 0 }

// FD is the memfd holding the buffer's bytes from offset 0, or -1 when it
// is not Shareable. It stays open while the buffer is referenced; a
// receiver maps Len bytes of it.
func (b *ModelBuffer) FD() int { return b.fd }

// Seal marks the buffer complete: no more Extend. A mapping's unused
// reservation is returned to the system.
func (b *ModelBuffer) Seal() {
	b.pre.stop()
	switch {
	case b.fd >= 0:
		b.mem = trimShared(b.mem, b.fd, b.n)
	case b.mapped:
		b.mem = trimAnon(b.mem, b.n)
	}
}

// Ref adds a reference.
func (b *ModelBuffer) Ref() { b.refs.Add(1) }

// Unref drops a reference; the last one releases the memory. Slices of
// the buffer must not be used after that.
func (b *ModelBuffer) Unref() {
	switch n := b.refs.Add(-1); {
	case n == 0:
		b.release.Do(b.free)
	case n < 0:
		panic("modelstore: ModelBuffer released more often than referenced")
	}
}

func (b *ModelBuffer) free() {
	b.pre.stop()
	b.stopHashing()
	if b.h.tap != nil {
		b.h.tap.End(false) // dropped (ignored if it ended already)
	}
	if b.mapped {
		unmapAnon(b.mem)
	}
	for _, m := range b.retired {
		unmapAnon(m)
	}
	for _, fd := range append(b.retiredFDs, b.fd) {
		if fd >= 0 {
			syscall.Close(fd)
		}
	}
	b.mem, b.n, b.filled, b.retired, b.retiredFDs, b.fd = nil, 0, 0, nil, nil, -1
}

// CopyToBuffer returns a new, sealed buffer (of the kind ShareBuffers
// asks for) holding a copy of data; the caller holds its one reference.
func CopyToBuffer(data []byte) (*ModelBuffer, error) {
	b, err := NewModelBuffer(int64(len(data)), int64(len(data)))
	if err != nil {
		return nil, err
	}
	dst, err := b.Extend(int64(len(data)))
	if err != nil {
		b.Unref()
		return nil, err
	}
	copy(dst, data)
	b.Filled(len(dst))
	b.Seal()
	return b, nil
}

// MapBuffer maps size bytes of the memfd fd read-only, as a sealed
// buffer that owns fd (closed with the last reference): a worker process's
// view of a buffer the server shares with it (FD). The caller holds its
// one reference.
func MapBuffer(fd int, size int) (*ModelBuffer, error) {
	mem, err := mapReadOnly(fd, size)
	if err != nil {
		return nil, err
	}
	b := &ModelBuffer{mem: mem, limit: int64(size), n: size, filled: size, mapped: true, fd: fd}
	b.refs.Store(1)
	return b, nil
}

// Holds reports whether parts are the buffer's bytes, in order, end to end
// (the chunks of an upload that landed in it), not merely equal to them.
func (b *ModelBuffer) Holds(parts [][]byte) bool { return b.HoldsFrom(0, parts) }

// HoldsFrom is Holds for the bytes from off to the end: the chunks of one
// append to a resumable upload.
func (b *ModelBuffer) HoldsFrom(off int, parts [][]byte) bool {
	start := off
	for _, p := range parts {
		if len(p) == 0 {
			continue
		}
		if off+len(p) > b.n || &b.mem[off] != &p[0] {
			return false
		}
		off += len(p)
	}
	return off == b.n && off > start
}

// Truncate drops the bytes handed out past n that were never reported by
// Filled: an append to a resumable upload whose command did not complete.
// Bytes already Filled cannot be taken back (they are hashed, and the
// log's model file has them).
func (b *ModelBuffer) Truncate(n int) error {
	if n < b.filled || n > b.n {
		return ErrBufferFull
	}
	b.mem = b.mem[:n]
	b.n = n
	return nil
}

// Limit is the most bytes the buffer may hold.
func (b *ModelBuffer) Limit() int64 { return b.limit }
