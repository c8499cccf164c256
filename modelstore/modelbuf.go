package modelstore

import (
	"errors"
	"hash/maphash"
	"sync"
	"sync/atomic"
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
	refs   atomic.Int32
	// retired holds mappings left by growth, unmapped with the buffer.
	retired [][]byte

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
}

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

// NewModelBuffer makes an empty buffer for a model of at most limit bytes,
// expected to be about expect bytes. The caller holds its one reference.
func NewModelBuffer(limit, expect int64) (*ModelBuffer, error) {
	if expect > limit {
		expect = limit
	}
	b := &ModelBuffer{limit: limit}
	b.refs.Store(1)
	if !forceHeap.Load() {
		for _, size := range []int64{limit, expect} {
			if mem, err := mapAnon(size); err == nil {
				b.mem, b.mapped = mem, true
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
	mem, err := []byte(nil), errors.ErrUnsupported
	if !forceHeap.Load() {
		mem, err = mapAnon(size)
	}
	if err != nil {
		mem = make([]byte, 0, int(size))
	}
	mem = mem[:b.n]
	b.moved += copy(mem, b.mem[:b.n])
	if b.mapped {
		b.retired = append(b.retired, b.mem)
	}
	b.mem, b.mapped = mem, err == nil
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
		for len(s) > 0 && !p.abort.Load() {
			k := min(len(s), hashPiece)
			h.Write(s[:k])
			s = s[k:]
		}
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

// Mapped reports whether the buffer is a private mapping rather than Go
// memory.
func (b *ModelBuffer) Mapped() bool { return b.mapped }

// Seal marks the buffer complete: no more Extend. A mapping's unused
// reservation is returned to the system.
func (b *ModelBuffer) Seal() {
	b.pre.stop()
	if b.mapped {
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
	if b.mapped {
		unmapAnon(b.mem)
	}
	for _, m := range b.retired {
		unmapAnon(m)
	}
	b.mem, b.n, b.filled, b.retired = nil, 0, 0, nil
}

// Holds reports whether parts are the buffer's bytes, in order, end to end
// (the chunks of an upload that landed in it), not merely equal to them.
func (b *ModelBuffer) Holds(parts [][]byte) bool {
	off := 0
	for _, p := range parts {
		if len(p) == 0 {
			continue
		}
		if off+len(p) > b.n || &b.mem[off] != &p[0] {
			return false
		}
		off += len(p)
	}
	return off == b.n && off > 0
}
