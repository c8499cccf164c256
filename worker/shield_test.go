package worker

import (
	"testing"

	"golang.org/x/sys/unix"
)

// The server's shield leaves it not dumpable and every descriptor it
// inherited close-on-exec, so that no worker holds one (security review:
// a key file's descriptor its launcher left open reached every worker).
func TestShieldServer(t *testing.T) {
	var p [2]int
	if err := unix.Pipe2(p[:], 0); err != nil { // as a launcher leaves one: no O_CLOEXEC
		t.Fatal(err)
	}
	defer unix.Close(p[0])
	defer unix.Close(p[1])
	shieldServer()
	for _, fd := range p {
		flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
		if err != nil || flags&unix.FD_CLOEXEC == 0 {
			t.Errorf("descriptor %d is not close-on-exec (flags %#x, %v)", fd, flags, err)
		}
	}
	if d, err := unix.PrctlRetInt(unix.PR_GET_DUMPABLE, 0, 0, 0, 0); err != nil || d != 0 {
		t.Errorf("dumpable = %d (%v), want 0", d, err)
	}
}
