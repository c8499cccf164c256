//go:build cgo

package worker

// The worker's Landlock domain (Linux 5.13+), entered by a C constructor:
// Landlock restricts the calling thread and the threads it starts from then
// on, and a Go process has several threads before main runs (and, with
// cgo, cannot restrict them all afterwards: syscall.AllThreadsSyscall
// refuses), so the domain is entered before the Go runtime starts, while
// the process has one thread, as runc's nsenter does its setns. It runs in
// every process of the binary and acts only in an engine worker (the
// environment the server gives it), with the same switch as the seccomp
// filter. Before it enters the domain it also raises the worker's
// oom_score_adj to 1000 and drops every capability (below).
//
// A domain confines what a worker, taken over by a hostile model, can do
// to the processes and files around it, whatever its user:
//
//   - ptrace and what /proc guards with it (/proc/PID/mem, /proc/PID/fd,
//     /proc/PID/environ): only processes of its own domain, whatever the
//     other's dumpable flag (shield.go): a worker just started, still
//     dumpable for the moment before its first line of code, is in no
//     domain of another worker's.
//   - Signals (ABI 6, Linux 6.12): only to processes of its own domain,
//     so not to the server or another worker (seccomp.go refuses them on
//     older kernels).
//   - Files: no file or directory created, removed, renamed, written,
//     truncated or executed by path: the server's log and snapshots are
//     the worker user's files. Reading only what a worker reads (found
//     with strace -f of the server storing and running the test models):
//     the system's libraries (/usr, /lib*, /etc/ld.so.cache) and ONNX
//     Runtime's library file (not its directory, which may hold the
//     server's configuration and keys), for the dynamic loader; /sys, a
//     few files of the worker's own /proc/PID (maps, which glibc reads for
//     the main thread's stack, cgroup and mountinfo, which Go reads for
//     its CPU limit, status and the like; not net/, which lists the
//     namespace's sockets), /proc/cpuinfo, /proc/meminfo and /proc/stat,
//     for ONNX Runtime's and Go's look at the machine; /etc/localtime, /dev/null,
//     /dev/zero and /dev/urandom. Everything else of its user's (the seal
//     key in the server's directory, a TLS key, the configuration with
//     its passwords) a worker taken over could have read and sent back
//     in a run's output.
//   - TCP (ABI 4) and abstract Unix sockets (ABI 6), behind the seccomp
//     filter's denial of socket(2).

/*
#define _GNU_SOURCE // O_PATH
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <errno.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

#ifndef SYS_landlock_create_ruleset
#define SYS_landlock_create_ruleset 444
#endif
#ifndef SYS_landlock_restrict_self
#define SYS_landlock_restrict_self 446
#endif

#include <fcntl.h>
#include <sys/stat.h>

#ifndef SYS_landlock_add_rule
#define SYS_landlock_add_rule 445
#endif

#define LL_READ_FILE 0x4ULL
#define LL_READ_DIR 0x8ULL

// enclaveai_allow_read lets the domain being built read path (a file), or
// read beneath it (a directory). A path that is not there is skipped.
static void enclaveai_allow_read(int ruleset, const char *path) {
	int fd = open(path, O_PATH | O_CLOEXEC);
	if (fd < 0) {
		return;
	}
	struct stat st;
	uint64_t access = LL_READ_FILE | LL_READ_DIR;
	if (fstat(fd, &st) != 0 || !S_ISDIR(st.st_mode)) {
		access = LL_READ_FILE; // a file takes a file's rights only
	}
	struct {
		uint64_t allowed_access;
		int32_t parent_fd;
	} __attribute__((packed)) rule = {access, fd};
	syscall(SYS_landlock_add_rule, ruleset, 1UL, &rule, 0UL); // LANDLOCK_RULE_PATH_BENEATH
	close(fd);
}

// enclaveai_landlock is the outcome, read by the worker: the ABI version of
// the domain entered (> 0), 0 if not tried (not a worker, or the sandbox
// is off), or -errno.
int enclaveai_landlock;

static void __attribute__((constructor)) enclaveai_enter_landlock(void) {
	const char *w = getenv("ENCLAVEAI_ENGINE_WORKER");
	const char *s = getenv("ENCLAVEAI_ENGINE_SECCOMP");
	if (w == NULL || strcmp(w, "1") != 0 || (s != NULL && strcmp(s, "0") == 0)) {
		return;
	}
	// The kernel's OOM killer takes a worker first: memory a worker holds
	// that counts in no process's total (a memfd's pages it does not map)
	// made it take the server (red-team review). Raising it needs no
	// privilege.
	int oom = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
	if (oom >= 0) {
		if (write(oom, "1000", 4) != 4) {
			// Left as it was: the domain below matters more.
		}
		close(oom);
	}
	// No capability, whatever the user: a worker of root's set the clock
	// and held the server's file opens with fanotify (red-team review).
	// Dropped from the bounding set, none can come back.
	for (int cap = 0; cap < 64; cap++) {
		prctl(PR_CAPBSET_DROP, cap, 0, 0, 0);
	}
	prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
	struct { uint32_t version; int pid; } caphdr = {0x20080522, 0}; // _LINUX_CAPABILITY_VERSION_3
	struct { uint32_t effective, permitted, inheritable; } capdata[2];
	memset(capdata, 0, sizeof capdata);
	syscall(SYS_capset, &caphdr, capdata);
	// A domain needs no_new_privs (the seccomp filter sets it too).
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
		enclaveai_landlock = -errno;
		return;
	}
	long abi = syscall(SYS_landlock_create_ruleset, NULL, 0, 1UL); // LANDLOCK_CREATE_RULESET_VERSION
	if (abi < 1) {
		enclaveai_landlock = -errno;
		return;
	}
	struct { uint64_t fs, net, scoped; } attr = {0, 0, 0};
	// EXECUTE, WRITE_FILE, READ_FILE, READ_DIR, REMOVE_DIR, REMOVE_FILE
	// and the MAKE_* rights.
	attr.fs = 0x1 | 0x2 | LL_READ_FILE | LL_READ_DIR | 0x10 | 0x20 | 0x40 | 0x80 | 0x100 | 0x200 | 0x400 |
		0x800 | 0x1000;
	if (abi >= 2) attr.fs |= 0x2000; // REFER
	if (abi >= 3) attr.fs |= 0x4000; // TRUNCATE
	size_t size = 8;
	if (abi >= 4) {
		attr.net = 0x1 | 0x2; // BIND_TCP, CONNECT_TCP
		size = 16;
	}
	if (abi >= 6) {
		attr.scoped = 0x1 | 0x2; // ABSTRACT_UNIX_SOCKET, SIGNAL
		size = 24;
	}
	int fd = (int)syscall(SYS_landlock_create_ruleset, &attr, size, 0UL);
	if (fd < 0) {
		enclaveai_landlock = -errno;
		return;
	}
	// Reading where a worker reads; nothing else is granted anywhere.
	static const char *reads[] = {"/usr", "/lib", "/lib64", "/lib32", "/libx32", "/etc/ld.so.cache",
		"/etc/localtime", "/sys", "/proc/cpuinfo", "/proc/meminfo", "/proc/stat",
		"/dev/null", "/dev/zero", "/dev/urandom",
		// Files of its own /proc/PID, not the directory: its net/ lists
		// every socket of the network namespace, the server's clients'
		// addresses among them (red-team review), as its task/TID/net does.
		"/proc/self/maps", "/proc/self/cgroup", "/proc/self/mountinfo", "/proc/self/status",
		"/proc/self/stat", "/proc/self/statm", "/proc/self/limits", "/proc/self/auxv",
		"/proc/self/cmdline", "/proc/self/comm", "/proc/self/oom_score_adj",
		"/proc/self/environ"}; // GORACE, for the race build's runtime
	for (size_t i = 0; i < sizeof reads / sizeof reads[0]; i++) {
		enclaveai_allow_read(fd, reads[i]);
	}
	// The library itself, not its directory, which may hold the server's
	// configuration and keys beside it (red-team review).
	const char *lib = getenv("ENCLAVEAI_ONNXRUNTIME_LIB");
	if (lib != NULL) {
		enclaveai_allow_read(fd, lib);
	}
	if (syscall(SYS_landlock_restrict_self, fd, 0UL) != 0) {
		enclaveai_landlock = -errno;
	} else {
		enclaveai_landlock = (int)abi;
	}
	close(fd);
}
*/
import "C"

import "syscall"

// landlock reports the worker's Landlock domain: its ABI version (> 0),
// 0 if it entered none by design (not a worker, or the sandbox is off),
// or the error that kept it out of one.
func landlock() (int, error) {
	n := int(C.enclaveai_landlock)
	if n < 0 {
		return 0, syscall.Errno(-n)
	}
	return n, nil
}
