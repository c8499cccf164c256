package worker

import (
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/enclaveai/enclaveai/modelstore"
)

// channel is one end of a control socket or of a lane's socket on the
// server's side (SOCK_SEQPACKET: each write is one message, which a read
// gets whole), read and written through Go's network poller. Writes may
// come from many goroutines at once, and reads too (each with its own
// recvBuf).
type channel struct {
	c *net.UnixConn
}

func newChannel(f *os.File) (*channel, error) {
	fc, err := net.FileConn(f)
	f.Close()
	if err != nil {
		return nil, err
	}
	uc, ok := fc.(*net.UnixConn)
	if !ok {
		fc.Close()
		return nil, fmt.Errorf("worker: control socket is a %T", fc)
	}
	return &channel{c: uc}, nil
}

// close closes the socket; blocked reads and later writes fail.
func (ch *channel) close() { ch.c.Close() }

// socketPair makes a control socket: the parent's end and the child's.
func socketPair() (parent, child *os.File, err error) {
	fds, err := seqpacketPair()
	if err != nil {
		return nil, nil, err
	}
	return os.NewFile(uintptr(fds[0]), "engine-control"), os.NewFile(uintptr(fds[1]), "engine-control"), nil
}

// seqpacketPair makes a SOCK_SEQPACKET socket pair whose ends each send a
// message of maxMessage bytes in one write: a message larger than a Unix
// socket's send buffer (less 32 bytes) fails (EMSGSIZE), and the buffer
// would otherwise be net.core.wmem_default's. The kernel doubles the size
// asked for (its bookkeeping) and caps it at twice net.core.wmem_max
// (212992 by default): a machine whose wmem_max is set below about 98 KiB
// gets a clear error here rather than runs that fail later.
func seqpacketPair() ([2]int, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fds, err
	}
	for _, fd := range fds {
		err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF, maxMessage)
		if err == nil {
			var got int
			if got, err = unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF); err == nil && got < maxMessage+32 {
				err = fmt.Errorf("worker: a socket's send buffer is %d bytes, under the %d a message may take (raise net.core.wmem_max)", got, maxMessage+32)
			}
		}
		if err != nil {
			closeAll(fds[:])
			return fds, err
		}
	}
	return fds, nil
}

// send writes one message with fds (their numbers stay the caller's).
func (ch *channel) send(msg []byte, fds ...int) error {
	var oob []byte
	if len(fds) > 0 {
		oob = syscall.UnixRights(fds...)
	}
	n, _, err := ch.c.WriteMsgUnix(msg, oob, nil)
	if err == nil && n != len(msg) {
		err = fmt.Errorf("worker: short write (%d of %d bytes)", n, len(msg))
	}
	return err
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
	n, oobn, flags, _, err := ch.c.ReadMsgUnix(rb.buf, rb.oob)
	if err != nil {
		return nil, nil, err
	}
	return rb.message(n, oobn, flags)
}

// awaitPolling polls ch for a message for as long as poll says so and
// returns when one is there (or the peer has closed, or an error: the read
// that follows says which), or when poll returns false. It reads nothing:
// ch.recv does, then without waiting in the poller.
func (ch *channel) awaitPolling(poll func() bool) {
	rc, err := ch.c.SyscallConn()
	if err != nil {
		return
	}
	rc.Control(func(fd uintptr) { pollFD(int(fd), poll) })
}

// awaitPolling polls the blocking socket fd for a message for at most d
// (the worker's end of a lane, before it sleeps in recvmsg).
func awaitPolling(fd int, d time.Duration) {
	deadline := time.Now().Add(d)
	pollFD(fd, func() bool { return time.Now().Before(deadline) })
}

// pollFD peeks at fd, without waiting, until a message is there (or the
// peer has closed, or an error) or poll returns false. Between peeks it
// yields its CPU to any other thread that wants it (sched_yield): a
// polling thread takes a CPU only while nothing else needs it.
func pollFD(fd int, poll func() bool) {
	var b [1]byte
	for poll() {
		_, _, err := unix.Recvfrom(fd, b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
		if err != unix.EAGAIN && err != unix.EINTR {
			return
		}
		unix.Syscall(unix.SYS_SCHED_YIELD, 0, 0, 0)
	}
}

// message returns a copy of the message of n bytes that a read left in rb
// (with oobn bytes of control data and the read's flags).
func (rb *recvBuf) message(n, oobn, flags int) ([]byte, []int, error) {
	msg, fds, err := rb.view(n, oobn, flags)
	if err != nil {
		return nil, nil, err
	}
	return append([]byte(nil), msg...), fds, nil
}

// view is message without the copy: the bytes stay in rb's buffer, which
// the next read overwrites.
func (rb *recvBuf) view(n, oobn, flags int) ([]byte, []int, error) {
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
	return rb.buf[:n], fds, nil
}

var errClosed = fmt.Errorf("worker: control socket closed")

func closeAll(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}

// sender sends one message with file descriptors: a channel, or the
// worker's end of a lane.
type sender interface {
	send(msg []byte, fds ...int) error
}

// sendTensors appends ts (and a payload placement) to e and sends the
// message on ch (putPayload).
func sendTensors(ch sender, e *enc, ts []*modelstore.Tensor) error {
	fds, err := putPayload(e, ts)
	if err != nil {
		return err
	}
	defer closeAll(fds)
	return ch.send(e.b, fds...)
}

// putPayload appends ts to e with their bytes inline when they are few
// (putInline), else in a fresh memfd, whose descriptor it returns for the
// caller to send with the message and then close.
func putPayload(e *enc, ts []*modelstore.Tensor) ([]int, error) {
	size := tensorsSize(ts)
	if size <= inlineMax {
		putInline(e, ts)
		return nil, nil
	}
	fd, mem, err := newShm(size)
	if err != nil {
		return nil, err
	}
	putTensors(e, ts, mem)
	unix.Munmap(mem)
	// The receiver maps the file only sealed (recvTensors): no one can
	// shrink it under its mapping, or change what it reads.
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, payloadSeals); err != nil {
		unix.Close(fd)
		return nil, err
	}
	e.u8(payloadShm)
	e.u64(uint64(size))
	return []int{fd}, nil
}

// recvTensors reads tensors from d, their bytes inline or in the first of
// fds. The returned done must be called once the tensors are no longer
// used (it unmaps a payload memfd); with copyOut the bytes of a memfd are
// copied out first, so done may be called at once. Tensors of more than
// max bytes together (0: no bound) are refused with
// modelstore.ErrOutputTooBig before anything is mapped or copied.
func recvTensors(d *dec, fds []int, copyOut bool, max int64) ([]*modelstore.Tensor, func(), error) {
	refs := getTensors(d)
	where := d.u8()
	if d.err != nil {
		return nil, nil, d.err
	}
	if max > 0 {
		var n uint64
		for _, r := range refs {
			n += r.len
		}
		if n > uint64(max) {
			return nil, nil, modelstore.ErrOutputTooBig
		}
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
		if err := checkPayloadFile(fds[0], size); err != nil {
			return nil, nil, err
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

// payloadSeals are the seals of a payload memfd once written: its size
// and its bytes are fixed for good.
const payloadSeals = unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_WRITE | unix.F_SEAL_SEAL

// errPayloadFile refuses a payload file that is not a memfd sealed as
// putPayload seals it, of at least the size its message gives.
var errPayloadFile = errors.New("worker protocol: the payload is not a sealed memory file of its size")

// checkPayloadFile checks, before fd is mapped, that nothing can shrink
// the file under the mapping or change its bytes, and that it holds size
// bytes: a worker taken over by a hostile model could send a file it then
// truncates, and the server's read of the mapping would fault (SIGBUS),
// fatal to the whole process (engine review).
func checkPayloadFile(fd int, size uint64) error {
	seals, err := unix.FcntlInt(uintptr(fd), unix.F_GET_SEALS, 0)
	if err != nil || seals&payloadSeals != payloadSeals {
		return errPayloadFile
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Size < 0 || uint64(st.Size) < size {
		return errPayloadFile
	}
	return nil
}

// newShm makes a memfd of size bytes, mapped writable, that can be sealed.
func newShm(size int) (int, []byte, error) {
	fd, err := unix.MemfdCreate("enclaveai-tensors", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
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
