package worker

import (
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/enclaveai/enclaveai/modelstore"
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
// model would do to the server (its parent), to the files of its user and
// to the machine, and says what came of each try ("ok" where it worked,
// the error otherwise; "ok" is what the sandbox must not let through):
// the test hooks' probeMarker. Each try is harmless if it works: signal 0
// only checks that a signal could be sent, prlimit only reads, the
// server's CPU affinity is set to what it is, the file
// is removed, /etc/passwd stands for a file of its user's that it has no
// need of, and so does the listing of ONNX Runtime's directory, the calls that a filter must refuse before the kernel looks at
// their arguments (clone3, io_uring_setup, chmod, setxattr) are given
// arguments the kernel would refuse, the segment is removed, F_SETOWN
// names the worker itself. oom and caps report the worker's
// oom_score_adj and effective capabilities.
func probeEscapes() string {
	ppid := os.Getppid()
	res := func(err error) string {
		if err == nil {
			return "ok"
		}
		return err.Error()
	}
	// refused: a call the filter refuses fails with want; another error
	// is the kernel's answer to the arguments, so the call went through.
	refused := func(err error, want unix.Errno) string {
		if err == want {
			return err.Error()
		}
		return "ok (" + res(err) + ")"
	}
	call := func(trap uintptr, a ...uintptr) error {
		a = append(a, 0, 0, 0, 0, 0, 0)
		_, _, e := unix.Syscall6(trap, a[0], a[1], a[2], a[3], a[4], a[5])
		if e != 0 {
			return e
		}
		return nil
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
	// The directory of ONNX Runtime's library, which may hold the
	// server's configuration and keys beside it.
	_, err = os.ReadDir(filepath.Dir(os.Getenv(modelstore.RuntimeLibraryEnv)))
	libdir := res(err)
	shm := "ok"
	if id, err := unix.SysvShmGet(unix.IPC_PRIVATE, 4096, unix.IPC_CREAT|0o600); err != nil {
		shm = err.Error()
	} else {
		unix.SysvShmCtl(id, unix.IPC_RMID, nil)
	}
	var p [2]int
	setown, fiosetown := "no pipe", "no pipe"
	if unix.Pipe2(p[:], unix.O_CLOEXEC) == nil {
		_, err := unix.FcntlInt(uintptr(p[0]), unix.F_SETOWN, os.Getpid())
		setown = res(err)
		pid := int32(os.Getpid())
		fiosetown = refused(call(unix.SYS_IOCTL, uintptr(p[0]), 0x8901, uintptr(unsafe.Pointer(&pid))), unix.EPERM) // FIOSETOWN
		unix.Close(p[0])
		unix.Close(p[1])
	}
	missing := []byte("/enclaveai-probe-missing\x00")
	path := uintptr(unsafe.Pointer(&missing[0]))
	// The network namespace's sockets (the server's clients' addresses),
	// through the worker's own /proc/PID and its parent's.
	_, err = os.ReadFile("/proc/self/net/tcp")
	procNet := res(err)
	_, err = os.ReadFile("/proc/" + strconv.Itoa(ppid) + "/net/tcp")
	parentNet := res(err)
	// The server's CPUs, set to what they are.
	affinity := "no mask"
	var set unix.CPUSet
	if unix.SchedGetaffinity(ppid, &set) == nil {
		affinity = refused(unix.SchedSetaffinity(ppid, &set), unix.EPERM)
	}
	oom, _ := os.ReadFile("/proc/self/oom_score_adj")
	caps := "?"
	if status, err := os.ReadFile("/proc/self/status"); err == nil {
		for _, line := range strings.Split(string(status), "\n") {
			if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
				caps = strings.TrimSpace(v)
			}
		}
	}
	ll := "none"
	if abi, err := landlock(); err != nil {
		ll = err.Error()
	} else if abi > 0 {
		ll = "abi " + strconv.Itoa(abi)
	}
	defer runtime.KeepAlive(missing) // path points into it
	return "escape probes: signal=" + res(unix.Kill(ppid, 0)) +
		"; signal-all=" + res(unix.Kill(-1, 0)) +
		"; prlimit=" + res(unix.Prlimit(ppid, unix.RLIMIT_NOFILE, nil, &old)) +
		"; proc-mem=" + mem + "; create=" + create + "; read=" + read + "; libdir=" + libdir +
		"; proc-net=" + procNet + "; parent-net=" + parentNet + "; affinity=" + affinity +
		"; clone3=" + refused(call(unix.SYS_CLONE3, 0, 0), unix.ENOSYS) +
		"; io_uring=" + refused(call(unix.SYS_IO_URING_SETUP, 0, 0), unix.EPERM) +
		"; chmod=" + refused(call(unix.SYS_CHMOD, path, 0o777), unix.EPERM) +
		"; setxattr=" + refused(call(unix.SYS_SETXATTR, path, path, 0), unix.EPERM) +
		"; pidfd_send_signal=" + refused(call(unix.SYS_PIDFD_SEND_SIGNAL, ^uintptr(0), 0, 0, 0), unix.EPERM) +
		"; shm=" + shm + "; setown=" + setown + "; fiosetown=" + fiosetown +
		"; oom=" + strings.TrimSpace(string(oom)) + "; caps=" + caps + "; landlock=" + ll
}
