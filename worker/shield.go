package worker

import (
	"math"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// A worker runs ONNX Runtime on models a client sent: code that a hostile
// model may have taken over (docs/ENGINE_ISOLATION.md). Its system-call
// filter (seccomp.go) cannot see paths, so what /proc lets a process of
// the same user do is closed here, in the server before it starts any
// worker (shieldServer) and in each worker (shieldWorker):
//
//   - Neither is dumpable (PR_SET_DUMPABLE 0): a process of the same user
//     without CAP_SYS_PTRACE can no longer open its /proc/PID/mem or
//     /proc/PID/fd/N. A worker opened the server's, read every tenant's
//     model through the server's memfds, found passwords and tensors in
//     its memory and could write to it (security review); per-tenant
//     workers could read each other the same way. It also keeps the
//     kernel from writing a core file, which would hold models, tensors
//     and keys.
//   - The descriptors the server inherited from whoever started it are
//     closed at exec: a worker held only those the server opened itself
//     (Go opens them close-on-exec), and a key file's descriptor left
//     open by a launcher reached every worker.
//
// A server run as root starts its workers with every capability,
// CAP_SYS_PTRACE among them, which passes over both: NewPool warns.

// shieldServer readies the server's process for its workers. Errors are
// ignored: a kernel without the calls leaves the server as it was.
func shieldServer() {
	unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
	closeInheritedOnExec()
}

// shieldWorker makes a worker not dumpable (exec made it dumpable again).
func shieldWorker() { unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0) }

// closeInheritedOnExec marks every descriptor above stderr close-on-exec:
// close_range (Linux 5.11), else one by one from /proc/self/fd.
func closeInheritedOnExec() {
	if unix.CloseRange(3, math.MaxUint32, unix.CLOSE_RANGE_CLOEXEC) == nil {
		return
	}
	entries, _ := os.ReadDir("/proc/self/fd")
	for _, e := range entries {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			unix.FcntlInt(uintptr(fd), unix.F_SETFD, unix.FD_CLOEXEC)
		}
	}
}
