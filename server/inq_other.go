//go:build !linux

package server

import "syscall"

// inqSocket reports false: TCP_INQ is Linux's (inq_linux.go).
func inqSocket(syscall.RawConn) bool { return false }

// inqMsg is unused where TCP_INQ is not.
type inqMsg struct{}

func (*inqMsg) recv(fd uintptr, p []byte) (int, bool, error) {
	n, err := readFD(fd, p)
	return n, true, err
}
