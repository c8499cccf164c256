package worker

import (
	"os"

	seccomp "github.com/elastic/go-seccomp-bpf"
	"golang.org/x/sys/unix"
)

// The worker's system-call filter (github.com/elastic/go-seccomp-bpf),
// installed on every thread (TSYNC) once ONNX Runtime is loaded and the
// control socket is open, before the first model arrives. It is a deny
// list, not an allow list: ONNX Runtime's kernels and its thread pools
// (and Go's runtime) make system calls that vary with the library's build
// and the model, and a call wrongly denied would kill runs that are fine.
// What it denies is what a worker never needs and an attacker who has
// taken over one would reach for first:
//
//   - starting programs or processes: execve, execveat, and clone without
//     CLONE_THREAD (fork); clone3 cannot be filtered by its flags (they are
//     in memory) and stays allowed, but a forked child cannot execute
//     anything either;
//   - the network: socket, connect, bind, listen, accept (the control
//     socket is inherited, already connected);
//   - other processes and the kernel: ptrace, process_vm_readv/writev,
//     kcmp, pidfd_getfd, bpf, perf_event_open, userfaultfd, keyctl,
//     add_key, request_key, module loading, mount and namespaces, chroot,
//     reboot, swap, clock setting, kexec, personality;
//   - acting on another process of its user, which the kernel allows
//     without privilege: signals (kill, tgkill, rt_sigqueueinfo,
//     rt_tgsigqueueinfo: only to itself; tkill not at all), pidfd_open
//     (only its own), resource limits (prlimit64: a server whose
//     RLIMIT_FSIZE is set to 0 dies of SIGXFSZ at its next log write),
//     priorities and scheduling (setpriority, ioprio_set,
//     sched_setscheduler/setparam/setattr, sched_setaffinity: the server's
//     threads pinned to one CPU), and moving pages
//     (migrate_pages, move_pages): only itself, by its pid or 0. A worker
//     taken over could otherwise kill the server with one kill(2).
//     Landlock's signal scope (landlock.go) does the same for signals
//     where the kernel has it; for the kernels without it, the filter
//     refuses fcntl's F_SETOWN, F_SETOWN_EX and F_SETSIG and ioctl's
//     FIOSETOWN, SIOCSPGRP and FIOASYNC (a SIGIO sent to any process of
//     the user when a descriptor becomes ready), and pidfd_send_signal
//     (through a descriptor of /proc/PID, which Landlock closes);
//   - what Landlock does not cover (red-team review, each shown to work
//     from a stand-in for an exploited ONNX Runtime): io_uring, whose
//     operations are not system calls and made sockets (UDP out of the
//     machine, a Unix socket's connect, netlink as root) behind the
//     filter's back; a file's mode, owner, times and extended attributes
//     by path (a chmod of the seal key to 0644, of the server's directory
//     to 0500, which failed every later save and write); System V shared
//     memory, messages and semaphores (a segment outlives the worker, and
//     its pages, in no process's memory, made the kernel's OOM killer
//     take the server); setsid and setpgid (a process leaving the
//     worker's group, which the server kills whole); and, as root, the
//     clock (clock_adjtime, adjtimex), the host's names, the kernel's log
//     and fanotify (whose permission events made the server's saves wait
//     on the worker);
//   - clone3 answers ENOSYS: its flags are in memory, where a filter
//     cannot read them, so a fork made with it went unseen (a child that
//     held the control socket hid the worker's death, and runs hung past
//     their TIMEOUT); C libraries then fall back to clone, whose flags
//     the filter reads.
//
// Denied calls that a confused program may try fail with EPERM (clone3
// with ENOSYS); those that only an attack makes kill the worker (SIGSYS),
// which the supervisor reports like any crash.
func installSeccomp() error {
	if err := seccomp.SetNoNewPrivs(); err != nil {
		return err
	}
	const (
		cloneThread = 0x10000 // CLONE_THREAD
		fSetOwn     = 8       // F_SETOWN
		fSetSig     = 10      // F_SETSIG
		fSetOwnEx   = 15      // F_SETOWN_EX
		fioSetOwn   = 0x8901  // FIOSETOWN
		fioAsync    = 0x5452  // FIOASYNC
	)
	// cmd matches an fcntl or ioctl of the given command.
	cmd := func(call string, c uint64) seccomp.NameWithConditions {
		return seccomp.NameWithConditions{Name: call,
			Conditions: []seccomp.Condition{{Argument: 1, Operation: seccomp.Equal, Value: c}}}
	}
	pid := uint64(os.Getpid())
	// notSelf matches a call whose argument n names another process than
	// this one (orZero: 0 names this one too).
	notSelf := func(name string, n uint32, orZero bool) seccomp.NameWithConditions {
		c := []seccomp.Condition{{Argument: n, Operation: seccomp.NotEqual, Value: pid}}
		if orZero {
			c = append(c, seccomp.Condition{Argument: n, Operation: seccomp.NotEqual, Value: 0})
		}
		return seccomp.NameWithConditions{Name: name, Conditions: c}
	}
	// whichNot matches setpriority and ioprio_set on anything but a
	// process (a process group, every process of a user).
	whichNot := func(name string, process uint64) seccomp.NameWithConditions {
		return seccomp.NameWithConditions{Name: name,
			Conditions: []seccomp.Condition{{Argument: 0, Operation: seccomp.NotEqual, Value: process}}}
	}
	return seccomp.LoadFilter(seccomp.Filter{
		NoNewPrivs: true,
		Flag:       seccomp.FilterFlagTSync,
		Policy: seccomp.Policy{
			DefaultAction: seccomp.ActionAllow,
			Syscalls: []seccomp.SyscallGroup{
				{
					Action: seccomp.ActionErrno,
					Names: []string{"socket", "connect", "bind", "listen", "accept", "accept4",
						"socketpair", "open_by_handle_at", "name_to_handle_at", "tkill",
						"io_uring_setup", "io_uring_enter", "io_uring_register",
						"chmod", "fchmod", "fchmodat", "fchmodat2", "chown", "fchown", "lchown", "fchownat",
						"utime", "utimes", "futimesat", "utimensat",
						"setxattr", "lsetxattr", "fsetxattr", "removexattr", "lremovexattr", "fremovexattr",
						"shmget", "shmat", "msgget", "semget", "setsid", "setpgid",
						"clock_adjtime", "adjtimex", "sethostname", "setdomainname", "syslog", "fanotify_init",
						"pidfd_send_signal"},
					NamesWithCondtions: []seccomp.NameWithConditions{
						cmd("fcntl", fSetOwn), cmd("fcntl", fSetSig), cmd("fcntl", fSetOwnEx),
						cmd("ioctl", fioSetOwn), cmd("ioctl", unix.SIOCSPGRP), cmd("ioctl", fioAsync),
						notSelf("kill", 0, false), notSelf("tgkill", 0, false),
						notSelf("rt_sigqueueinfo", 0, false), notSelf("rt_tgsigqueueinfo", 0, false),
						notSelf("pidfd_open", 0, false),
						notSelf("prlimit64", 0, true),
						whichNot("setpriority", 0), notSelf("setpriority", 1, true), // PRIO_PROCESS
						whichNot("ioprio_set", 1), notSelf("ioprio_set", 1, true), // IOPRIO_WHO_PROCESS
						notSelf("sched_setscheduler", 0, true), notSelf("sched_setparam", 0, true),
						notSelf("sched_setattr", 0, true), notSelf("sched_setaffinity", 0, true),
						notSelf("migrate_pages", 0, true), notSelf("move_pages", 0, true),
					},
				},
				{
					Action: seccomp.ActionErrno | seccomp.Action(unix.ENOSYS),
					Names:  []string{"clone3"},
				},
				{
					Action: seccomp.ActionKillProcess,
					Names: []string{"execve", "execveat", "fork", "vfork", "ptrace", "process_vm_readv",
						"process_vm_writev", "kcmp", "pidfd_getfd", "bpf", "perf_event_open", "userfaultfd",
						"keyctl", "add_key", "request_key", "init_module", "finit_module", "delete_module",
						"mount", "umount2", "pivot_root", "chroot", "setns", "unshare", "reboot", "swapon",
						"swapoff", "settimeofday", "clock_settime", "kexec_load", "kexec_file_load",
						"personality", "acct", "iopl", "ioperm"},
					NamesWithCondtions: []seccomp.NameWithConditions{{
						Name:       "clone",
						Conditions: []seccomp.Condition{{Argument: 0, Operation: seccomp.BitsNotSet, Value: cloneThread}},
					}},
				},
			},
		},
	})
}
