package worker

import (
	seccomp "github.com/elastic/go-seccomp-bpf"
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
//     reboot, swap, clock setting, kexec, personality.
//
// Denied calls that a confused program may try fail with EPERM; those that
// only an attack makes kill the worker (SIGSYS), which the supervisor
// reports like any crash.
func installSeccomp() error {
	if err := seccomp.SetNoNewPrivs(); err != nil {
		return err
	}
	const cloneThread = 0x10000 // CLONE_THREAD
	return seccomp.LoadFilter(seccomp.Filter{
		NoNewPrivs: true,
		Flag:       seccomp.FilterFlagTSync,
		Policy: seccomp.Policy{
			DefaultAction: seccomp.ActionAllow,
			Syscalls: []seccomp.SyscallGroup{
				{
					Action: seccomp.ActionErrno,
					Names: []string{"socket", "connect", "bind", "listen", "accept", "accept4",
						"socketpair", "open_by_handle_at", "name_to_handle_at"},
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
