package worker

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/enclaveai/enclaveai/modelstore"
)

// channel is one end of a control socket (SOCK_SEQPACKET: each write is
// one message, which a read gets whole). Writes may come from many
// goroutines at once; reads from one.
//
// The socket is used in blocking mode with plain system calls, not
// through Go's network poller: the reader's thread sleeps in recvmsg and
// the kernel wakes it directly when a message arrives, one hop fewer than
// epoll waking the poller which then wakes the reading goroutine. A run's
// round trip crosses the socket twice, so each hop counts.
type channel struct {
	fd   int
	file *os.File // owns fd
	// mu keeps close from reusing fd's number under a send in flight.
	mu     sync.RWMutex
	closed bool
}

func newChannel(f *os.File) (*channel, error) {
	fd := int(f.Fd()) // Fd puts the descriptor in blocking mode
	if err := unix.SetNonblock(fd, false); err != nil {
		f.Close()
		return nil, err
	}
	return &channel{fd: fd, file: f}, nil
}

// close closes the socket once no send is in flight; later sends fail.
// The reader must be done.
func (ch *channel) close() {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if !ch.closed {
		ch.closed = true
		ch.file.Close()
	}
}

var errClosedChannel = errors.New("worker: control socket closed")

// socketPair makes a control socket: the parent's end and the child's.
func socketPair() (parent, child *os.File, err error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, err
	}
	return os.NewFile(uintptr(fds[0]), "engine-control"), os.NewFile(uintptr(fds[1]), "engine-control"), nil
}

// send writes one message with fds (their numbers stay the caller's).
func (ch *channel) send(msg []byte, fds ...int) error {
	var oob []byte
	if len(fds) > 0 {
		oob = syscall.UnixRights(fds...)
	}
	ch.mu.RLock()
	defer ch.mu.RUnlock()
	if ch.closed {
		return errClosedChannel
	}
	for {
		err := unix.Sendmsg(ch.fd, msg, oob, nil, unix.MSG_NOSIGNAL)
		if err != unix.EINTR {
			return err
		}
	}
}

// recvBuf is one reader's buffers: several goroutines may read a channel
// at once (the worker's), each with its own.
type recvBuf struct{ buf, oob []byte }

func newRecvBuf() *recvBuf {
	return &recvBuf{buf: make([]byte, maxMessage), oob: make([]byte, syscall.CmsgSpace(4*4))}
}

// recv reads one message into rb: a fresh copy of its bytes and the
// descriptors that came with it (now the caller's to close).
func (ch *channel) recv(rb *recvBuf) ([]byte, []int, error) {
	n, oobn, flags, _, err := unix.Recvmsg(ch.fd, rb.buf, rb.oob, unix.MSG_CMSG_CLOEXEC)
	for err == unix.EINTR {
		n, oobn, flags, _, err = unix.Recvmsg(ch.fd, rb.buf, rb.oob, unix.MSG_CMSG_CLOEXEC)
	}
	if err != nil {
		return nil, nil, err
	}
	var fds []int
	if oobn > 0 {
		msgs, err := syscall.ParseSocketControlMessage(rb.oob[:oobn])
		if err == nil {
			for _, m := range msgs {
				if r, err := syscall.ParseUnixRights(&m); err == nil {
					fds = append(fds, r...)
				}
			}
		}
	}
	if flags&(syscall.MSG_TRUNC|syscall.MSG_CTRUNC) != 0 {
		closeAll(fds)
		return nil, nil, fmt.Errorf("worker: message truncated (%d bytes)", n)
	}
	if n == 0 {
		closeAll(fds)
		return nil, nil, errClosed
	}
	return append([]byte(nil), rb.buf[:n]...), fds, nil
}

var errClosed = fmt.Errorf("worker: control socket closed")

func closeAll(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}

// sendTensors appends ts (and a payload placement) to e and sends the
// message: bytes inline when they are few, else in a fresh memfd.
func (ch *channel) sendTensors(e *enc, ts []*modelstore.Tensor) error {
	size := tensorsSize(ts)
	if size <= inlineMax {
		payload := make([]byte, size)
		putTensors(e, ts, payload)
		e.u8(payloadInline)
		e.b = append(e.b, payload...)
		return ch.send(e.b)
	}
	fd, mem, err := newShm(size)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	putTensors(e, ts, mem)
	unix.Munmap(mem)
	e.u8(payloadShm)
	e.u64(uint64(size))
	return ch.send(e.b, fd)
}

// recvTensors reads tensors from d, their bytes inline or in the first of
// fds. The returned done must be called once the tensors are no longer
// used (it unmaps a payload memfd); with copyOut the bytes of a memfd are
// copied out first, so done may be called at once.
func recvTensors(d *dec, fds []int, copyOut bool) ([]*modelstore.Tensor, func(), error) {
	refs := getTensors(d)
	where := d.u8()
	if d.err != nil {
		return nil, nil, d.err
	}
	switch where {
	case payloadInline:
		// The message is the caller's own copy already.
		ts, err := locate(refs, d.b, false)
		return ts, func() {}, err
	case payloadShm:
		size := d.u64()
		if d.err != nil || len(fds) == 0 || checkSize(size) != nil {
			return nil, nil, errShort
		}
		if size == 0 {
			ts, err := locate(refs, nil, copyOut)
			return ts, func() {}, err
		}
		mem, err := unix.Mmap(fds[0], 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
		if err != nil {
			return nil, nil, err
		}
		done := func() { unix.Munmap(mem) }
		ts, err := locate(refs, mem, copyOut)
		if err != nil || copyOut {
			done()
			done = func() {}
		}
		return ts, done, err
	}
	return nil, nil, errShort
}

// newShm makes a memfd of size bytes, mapped writable.
func newShm(size int) (int, []byte, error) {
	fd, err := unix.MemfdCreate("enclaveai-tensors", unix.MFD_CLOEXEC)
	if err != nil {
		return -1, nil, err
	}
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		unix.Close(fd)
		return -1, nil, err
	}
	mem, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		unix.Close(fd)
		return -1, nil, err
	}
	return fd, mem, nil
}
