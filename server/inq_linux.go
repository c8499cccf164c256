//go:build linux

package server

import (
	"encoding/binary"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// inqSocket turns TCP_INQ on for a TCP socket, so that its reads say
// whether they left input behind (fdSource); false for other sockets.
func inqSocket(rc syscall.RawConn) bool {
	ok := false
	rc.Control(func(fd uintptr) {
		ok = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_INQ, 1) == nil
	})
	return ok
}

// inqMsg is recvmsg(2)'s message for reads that return TCP_INQ's count,
// kept with its source so that a read allocates nothing.
type inqMsg struct {
	msg unix.Msghdr
	iov unix.Iovec
	oob [32]byte // one control message of 4 bytes: 24 on 64-bit Linux
}

// recv reads into p (not empty) and reports whether the socket has input
// left after the read, or its peer's close: TCP_INQ's count, which the
// kernel makes 1 once the peer's FIN has arrived. Without the count, it
// reports input left.
func (m *inqMsg) recv(fd uintptr, p []byte) (n int, left bool, err error) {
	m.iov.Base = &p[0]
	m.iov.SetLen(len(p))
	m.msg.Iov = &m.iov
	m.msg.SetIovlen(1)
	m.msg.Control = &m.oob[0]
	defer func() { m.iov.Base = nil }() // hold nothing of p
	for {
		m.msg.SetControllen(len(m.oob))
		r, _, e := unix.Syscall(unix.SYS_RECVMSG, fd, uintptr(unsafe.Pointer(&m.msg)), 0)
		switch {
		case e == unix.EINTR:
			continue
		case e != 0:
			return 0, true, e
		}
		return int(r), m.left(), nil
	}
}

// left reads the count's control message after a read.
func (m *inqMsg) left() bool {
	b := m.oob[:min(int(m.msg.Controllen), len(m.oob))]
	for len(b) > 0 {
		h, data, rest, err := unix.ParseOneSocketControlMessage(b)
		if err != nil {
			return true
		}
		if h.Level == unix.IPPROTO_TCP && h.Type == unix.TCP_CM_INQ && len(data) >= 4 {
			return binary.NativeEndian.Uint32(data) != 0
		}
		b = rest
	}
	return true
}
