package server

import (
	"bufio"
	"bytes"
	"io"
	"iter"
	"net"
	"os"
	"sync"
	"syscall"
)

// inBuf is the reader's input buffer: what bufio.Reader does for it
// (peek, discard, read a line, read through), with one difference, the
// reason it exists: a connection whose input is all parsed holds no
// buffer. Its 64 KiB buffer comes from a pool when bytes arrive and goes
// back as soon as they are all parsed, as Redis 7.4's reusable query
// buffer does; only a connection that sent part of a command keeps one
// while it waits for the rest.
//
// Why: a bufio.Reader per connection keeps its buffer for the
// connection's life, and a burst of pipelined commands commits all of
// it. 5,000 clients idle after 40 pipelined EXISTS of 100 keys cost the
// server 87.8 kB each that way, against Redis 7.0's 29.2 (878 MB at the
// default maxclients, in an enclave whose memory is scarce); with the
// pool, 14.7 (`make bench-clients`, docs/BENCHMARKS.md). A buffer handed
// from one connection to the next might also stay in the CPU's caches;
// on the noisy 2-vCPU VM of docs/BENCHMARKS.md the server's CPU for
// pipelined AI.TENSORSETs (`redis-benchmark -c 50 -P 16`) did not change
// measurably either way.
//
// Waiting without a buffer takes the socket's descriptor: the read is
// made in syscall.RawConn.Read (fdSource), whose function takes a buffer,
// reads, and gives the buffer back when there is nothing to read yet, so
// the goroutine waits in the network poller holding nothing. A connection
// without a descriptor (TLS, tests' readers) waits in a read of one byte
// of its own (wait), and takes a pooled buffer for what follows it: a
// TLS connection has decrypted the whole record by then, and hands over
// the rest of it without waiting again.
type inBuf struct {
	src inSource
	// fd is src when it is a socket's descriptor, which lends: the
	// connection waits for input holding no buffer (nil otherwise).
	fd *fdSource
	// wait is where a source without a descriptor waits for input.
	wait [1]byte
	blk  *inBlock // the memory behind buf when it came from the pool
	buf  []byte   // nil while the connection holds no buffer
	r, w int      // buf[r:w] is read and not yet consumed
	err  error    // the source's error, returned (once) when buf[r:w] is consumed
	// scanned: how much of buf[r:w] ReadSlice has searched already.
	scanned int
	// skipping is set while skip reads and drops a refused argument.
	skipping bool
	// report, when set, is told the bytes unparsed and the room after them
	// before and after each read into the buffer, and (0, 0) when the
	// buffer goes back to the pool (CLIENT LIST's qbuf and qbuf-free).
	report func(used, free int)
}

// inSize is the size of an input buffer: the longest inline command or
// header line (inlineMax, as bufio.Reader's size was).
const inSize = inlineMax

// inBlock is a pooled input buffer.
type inBlock [inSize]byte

var inPool = sync.Pool{New: func() any { return new(inBlock) }}

// inSource is where an inBuf's bytes come from.
type inSource interface {
	// read reads at least one byte into p, or fails.
	read(p []byte) (int, error)
}

// newInBuf reads from rd; count, if set, is told each read's size.
func newInBuf(rd io.Reader, count func(int)) *inBuf {
	if sc, ok := rd.(syscall.Conn); ok {
		if rc, err := sc.SyscallConn(); err == nil {
			s := &fdSource{rc: rc, count: count, inq: inqSocket(rc)}
			s.readFn, s.lentFn = s.readCall, s.lentCall // bound once: no allocation a read
			return &inBuf{src: s, fd: s}
		}
	}
	return &inBuf{src: &ioSource{rd: rd, count: count}}
}

// Buffered is the number of bytes read and not yet consumed.
func (b *inBuf) Buffered() int { return b.w - b.r }

// setWaiting has f called when a read of the connection is about to wait
// for input: for a socket, once a read has found nothing or left nothing
// (fdSource); for a source without a descriptor (TLS), before every read.
func (b *inBuf) setWaiting(f func()) {
	switch s := b.src.(type) {
	case *fdSource:
		s.waiting = f
	case *ioSource:
		s.waiting = f
	}
}

// close ends what a socket's source holds while it reads (fdSource): call
// it before the connection is read otherwise or closed. b may read again
// after it.
func (b *inBuf) close() {
	if b.fd != nil {
		b.fd.close()
	}
}

// held reports whether b holds a buffer now.
func (b *inBuf) held() bool { return b.buf != nil }

// settle gives the buffer back to the pool when all it holds is consumed.
func (b *inBuf) settle() {
	if b.r == b.w && b.blk != nil {
		inPool.Put(b.blk)
		b.blk, b.buf = nil, nil
		b.r, b.w, b.scanned = 0, 0, 0
		if b.report != nil {
			b.report(0, 0)
		}
	}
}

// fill reads more bytes after buf[r:w], which it first moves to the
// buffer's start. It returns the error that stopped it (also kept in err).
func (b *inBuf) fill() error {
	if err := b.takeErr(); err != nil {
		return err
	}
	if b.r > 0 {
		copy(b.buf, b.buf[b.r:b.w])
		b.w -= b.r
		b.scanned -= b.r
		b.r = 0
	}
	var n int
	var err error
	// With nothing buffered the read waits holding no buffer, except in
	// skip, which holds the one it has (reading into it rather than
	// taking one from the pool and giving it back every read).
	lend := b.w == 0 && (b.buf == nil || !b.skipping)
	switch {
	case lend && b.fd != nil:
		b.settle()
		b.blk, n, err = b.fd.readLent()
		if b.blk != nil {
			b.buf = b.blk[:]
		}
	case lend:
		b.settle()
		n, err = b.readSome(b.wait[:])
		if n > 0 {
			b.blk = inPool.Get().(*inBlock)
			b.buf = b.blk[:]
			b.buf[0] = b.wait[0]
			if err == nil {
				// Then what came with that byte (TLS decrypts a record
				// whole). Only a record of one byte makes this read wait,
				// and that byte is part of a command: it waits for the
				// rest holding the buffer, as a descriptor's part does.
				var m int
				m, err = b.readSome(b.buf[1:])
				n += m
			}
		}
	default:
		if b.w == len(b.buf) {
			return bufio.ErrBufferFull
		}
		if b.report != nil {
			b.report(b.w, len(b.buf)-b.w) // what it holds while it waits
		}
		n, err = b.readSome(b.buf[b.w:])
	}
	b.w += n
	if b.report != nil && b.buf != nil {
		b.report(b.w-b.r, len(b.buf)-b.w)
	}
	if err != nil && n > 0 {
		b.err = err // the bytes first; err next time
		return nil
	}
	return err
}

// takeErr returns the source's pending error and forgets it, as
// bufio.Reader does: a read deadline that passed, once cleared, does not
// end the next read.
func (b *inBuf) takeErr() error {
	err := b.err
	b.err = nil
	return err
}

// readSome reads at least one byte into p, as bufio.Reader does: a reader
// that keeps returning nothing and no error fails with io.ErrNoProgress.
func (b *inBuf) readSome(p []byte) (int, error) {
	for range 100 {
		n, err := b.src.read(p)
		if n > 0 || err != nil {
			return n, err
		}
	}
	return 0, io.ErrNoProgress
}

// Peek returns the next n bytes without consuming them (valid until the
// next call), or fewer with the error that stopped them.
func (b *inBuf) Peek(n int) ([]byte, error) {
	if n > inSize {
		return nil, bufio.ErrBufferFull
	}
	for b.w-b.r < n {
		if err := b.fill(); err != nil {
			return b.buf[b.r:b.w], err
		}
	}
	return b.buf[b.r : b.r+n], nil
}

// Discard consumes n bytes, which a Peek returned.
func (b *inBuf) Discard(n int) {
	b.r += n
	b.scanned = max(b.scanned, b.r)
}

// ReadSlice consumes and returns the bytes up to and including delim
// (valid until the next call); bufio.ErrBufferFull when the buffer fills
// without it, as bufio.Reader says.
func (b *inBuf) ReadSlice(delim byte) ([]byte, error) {
	for {
		if i := bytes.IndexByte(b.buf[max(b.scanned, b.r):b.w], delim); i >= 0 {
			end := max(b.scanned, b.r) + i + 1
			line := b.buf[b.r:end]
			b.r, b.scanned = end, end
			return line, nil
		}
		b.scanned = b.w
		if b.w-b.r == inSize {
			return nil, bufio.ErrBufferFull
		}
		if err := b.fill(); err != nil {
			return nil, err
		}
	}
}

// Read reads into p what is buffered, or, with nothing buffered, straight
// from the source into p when p is at least a buffer's size (a model
// chunk, a large argument: no copy, and no buffer held for it).
func (b *inBuf) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if b.r == b.w {
		if err := b.takeErr(); err != nil {
			return 0, err
		}
		if len(p) >= inSize {
			b.settle()
			return b.readSome(p[:min(len(p), maxRead)])
		}
		if err := b.fill(); err != nil && b.r == b.w {
			return 0, err
		}
	}
	n := copy(p, b.buf[b.r:b.w])
	b.Discard(n)
	return n, nil
}

// maxRead bounds one read system call (as the net package does).
const maxRead = 1 << 30

// Discarding more than is buffered (skipping a refused upload) reads and
// drops the rest through the buffer.
func (b *inBuf) skip(n int64) error {
	b.skipping = true
	defer func() { b.skipping = false }()
	for n > 0 {
		if b.r == b.w {
			if err := b.fill(); err != nil && b.r == b.w {
				return err
			}
		}
		k := int(min(n, int64(b.w-b.r)))
		b.Discard(k)
		n -= int64(k)
	}
	return nil
}

// ioSource reads an io.Reader (a TLS connection); the inBuf waits on it
// in a read of one byte (inBuf.wait).
type ioSource struct {
	rd    io.Reader
	count func(int)
	// waiting, if set, is called before every read: whether an io.Reader
	// will wait cannot be told before it does (inBuf.setWaiting).
	waiting func()
}

func (s *ioSource) read(p []byte) (int, error) {
	if s.waiting != nil {
		s.waiting()
	}
	n, err := s.rd.Read(p)
	if s.count != nil && n > 0 {
		s.count(n)
	}
	return n, err
}

// fdSource reads a socket's descriptor in syscall.RawConn.Read: the
// function given to it reads, and returns false when there is nothing to
// read, which makes RawConn wait in the network poller (read deadlines
// included) and call it again once the socket is readable.
//
// A TCP socket that says how much input its read left (TCP_INQ, inqSocket)
// also waits without reading first. RawConn.Read forgets, as it begins,
// that the poller has seen input (internal/poll's prepareRead), so each
// call must read before it may wait, and a client that waits for each
// reply made every command cost a read that found nothing: two reads a
// command where Redis makes one, a system call of about 1.6 µs on the
// paravirtualised host of docs/BENCHMARKS.md. Within one call the
// poller's word holds: whatever arrives after a read (input, the peer's
// close) wakes the wait that follows it. So once a read has left nothing
// (TCP_INQ says 0: no input and no close pending), the source waits in a
// RawConn.Read that lasts (the poll): a coroutine (iter.Pull) whose
// function hands the descriptor to the reader and returns false, to wait,
// when the reader asks it to. A read that left something makes the next
// read at once, in a RawConn.Read of its own (which also notices a
// closed connection) after the poll is ended.
//
// The poll holds the descriptor's read lock from one read to the next, so
// close must end it (Reader.Close) before anything else reads the
// connection, and before the connection goroutine leaves it (its
// coroutine would wait for ever); and the connection's Close, which wakes
// its reads and writes at once, then waits for the poll to end: until the
// connection's goroutine reads again, after the command it runs (CLIENT
// KILL closes without waiting: killer, server.go).
type fdSource struct {
	rc    syscall.RawConn
	count func(int)
	// waiting, if set, is called when a read finds nothing, or the poll
	// is about to wait after a read that left nothing (inBuf.setWaiting).
	waiting func()
	// The call's arguments and results, in fields so that the functions
	// handed to rc.Read are bound once (a closure a call would allocate).
	p              []byte
	blk            *inBlock
	n              int
	err            error
	readFn, lentFn func(fd uintptr) bool
	// inq: the socket reports what a read left (TCP_INQ; its message
	// buffers in in); drained: the last read left nothing.
	inq     bool
	in      inqMsg
	drained bool
	// The poll, while it runs: next hands the descriptor back once it may
	// be read (after a wait unless the poll has just begun), false when
	// the poll ended with pollErr; stop ends it.
	next    func() (uintptr, bool)
	stop    func()
	pollErr error
}

func (s *fdSource) read(p []byte) (int, error) {
	s.p = p
	err := s.call(s.readFn)
	s.p = nil
	return s.result(err)
}

func (s *fdSource) readCall(fd uintptr) bool {
	s.n, s.err = s.recv(fd, s.p)
	if s.err == syscall.EAGAIN {
		s.wait()
		return false
	}
	return true
}

// recv reads into p, and notes whether the read left the socket drained.
func (s *fdSource) recv(fd uintptr, p []byte) (int, error) {
	if !s.inq {
		return readFD(fd, p)
	}
	n, left, err := s.in.recv(fd, p)
	if err == syscall.ENOSYS {
		s.inq = false // not served here (an enclave's runtime): read(2)
		return readFD(fd, p)
	}
	s.drained = err == nil && n > 0 && !left
	return n, err
}

// call runs fn as RawConn.Read does: fn reads and returns false to wait
// for input. A drained source waits in its poll, others read at once.
func (s *fdSource) call(fn func(fd uintptr) bool) error {
	if !s.drained {
		s.close()
		return s.rc.Read(fn)
	}
	s.drained = false
	if s.next == nil {
		s.next, s.stop = iter.Pull(s.poll) // a new poll reads first
	} else {
		s.wait()
	}
	for {
		fd, ok := s.next()
		if !ok {
			s.next, s.stop = nil, nil
			err := s.pollErr
			s.pollErr = nil
			if err == nil {
				err = net.ErrClosed // cannot happen: only stop ends a poll without an error
			}
			return err // a deadline, a closed connection
		}
		if fn(fd) {
			if s.n == 0 {
				s.close() // the end of input, or an error: nothing to wait for
			}
			return nil
		}
	}
}

// poll is the coroutine's body: one RawConn.Read, whose function yields the
// descriptor and, once the reader calls next again, returns false to wait.
func (s *fdSource) poll(yield func(uintptr) bool) {
	s.pollErr = s.rc.Read(func(fd uintptr) bool { return !yield(fd) })
}

// close ends the poll, if one runs.
func (s *fdSource) close() {
	if s.stop != nil {
		s.stop()
		s.next, s.stop = nil, nil
	}
}

// wait tells waiting that the read is about to wait.
func (s *fdSource) wait() {
	if s.waiting != nil {
		s.waiting()
	}
}

// readLent waits for input holding no buffer, then reads it into a pooled
// block (nil when nothing was read).
func (s *fdSource) readLent() (*inBlock, int, error) {
	err := s.call(s.lentFn)
	blk := s.blk
	s.blk = nil
	n, err := s.result(err)
	if n == 0 && blk != nil {
		inPool.Put(blk) // nothing read (EOF, an error): hold nothing
		blk = nil
	}
	return blk, n, err
}

func (s *fdSource) lentCall(fd uintptr) bool {
	if s.blk == nil {
		s.blk = inPool.Get().(*inBlock)
	}
	s.n, s.err = s.recv(fd, s.blk[:])
	if s.err == syscall.EAGAIN {
		inPool.Put(s.blk) // wait for input holding no buffer
		s.blk = nil
		s.wait()
		return false
	}
	return true
}

// result turns a read's outcome into io.Reader's: io.EOF for the peer's
// close, the poller's error (a deadline, a closed connection) as is.
func (s *fdSource) result(pollErr error) (int, error) {
	n, err := s.n, s.err
	s.n, s.err = 0, nil
	switch {
	case pollErr != nil:
		return 0, pollErr
	case err != nil:
		return 0, os.NewSyscallError("read", err)
	case n == 0:
		return 0, io.EOF
	}
	if s.count != nil {
		s.count(n)
	}
	return n, nil
}

// readFD is read(2), retried on EINTR.
func readFD(fd uintptr, p []byte) (int, error) {
	for {
		n, err := syscall.Read(int(fd), p)
		if err != syscall.EINTR {
			return max(n, 0), err
		}
	}
}
