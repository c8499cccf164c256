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
// CAP_SYS_PTRACE among them, which passes over the first: NewPool warns.
// Where the kernel has Landlock, each worker's domain (landlock.go) keeps
// it out of every other process's /proc files whatever its capabilities,
// and the seccomp filter (seccomp.go) from signalling the server or
// changing its limits.

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

// landlockABI is the kernel's Landlock ABI version, 0 if it has none: what
// a worker's domain will be (landlock.go).
func landlockABI() int {
	const createRulesetVersion = 1 // LANDLOCK_CREATE_RULESET_VERSION
	n, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, createRulesetVersion)
	if errno != 0 {
		return 0
	}
	return int(n)
}

// probeEscapes tries, from a worker, what a worker taken over by a hostile
// model would do to the server (its parent) and to the files of its user,
// and says what came of each try ("ok" where it worked): the test hooks'
// probeMarker. Each try is harmless if it works: signal 0 only checks
// that a signal could be sent, prlimit only reads, the file is removed,
// /etc/passwd stands for a file of its user's that it has no need of.
func probeEscapes() string {
	ppid := os.Getppid()
	res := func(err error) string {
		if err == nil {
			return "ok"
		}
		return err.Error()
	}
	var old unix.Rlimit
	f, err := os.Open("/proc/" + strconv.Itoa(ppid) + "/mem")
	if err == nil {
		f.Close()
	}
	mem := res(err)
	name := "/tmp/enclaveai-probe-" + strconv.Itoa(os.Getpid())
	f, err = os.OpenFile(name, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err == nil {
		f.Close()
		os.Remove(name)
	}
	create := res(err)
	f, err = os.Open("/etc/passwd") // any file of the system's outside what a worker reads
	if err == nil {
		f.Close()
	}
	read := res(err)
	ll := "none"
	if abi, err := landlock(); err != nil {
		ll = err.Error()
	} else if abi > 0 {
		ll = "abi " + strconv.Itoa(abi)
	}
	return "escape probes: signal=" + res(unix.Kill(ppid, 0)) +
		"; signal-all=" + res(unix.Kill(-1, 0)) +
		"; prlimit=" + res(unix.Prlimit(ppid, unix.RLIMIT_NOFILE, nil, &old)) +
		"; proc-mem=" + mem + "; create=" + create + "; read=" + read + "; landlock=" + ll
}
