package modelstore

import (
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// hugePage is the size of a transparent huge page on the platforms we run
// on (x86-64, arm64 with 4 KiB base pages).
const hugePage = 2 << 20

// mapAnon reserves size bytes of private anonymous memory without
// committing it, advised for huge pages when the kernel has them. The raw
// system calls are used, not syscall.Mmap, because the tail of the mapping
// is unmapped separately (trimAnon), which syscall's bookkeeping forbids.
func mapAnon(size int64) ([]byte, error) {
	if size <= 0 || size != int64(int(size)) {
		return nil, syscall.EINVAL
	}
	// One huge page more than asked, so that the start can be aligned to
	// one: otherwise the first and last partial huge pages get 4 KiB pages.
	span := uintptr(size) + hugePage
	raw, _, errno := syscall.Syscall6(syscall.SYS_MMAP, 0, span,
		syscall.PROT_READ|syscall.PROT_WRITE,
		syscall.MAP_PRIVATE|syscall.MAP_ANONYMOUS|syscall.MAP_NORESERVE, ^uintptr(0), 0)
	if errno != 0 {
		return nil, errno
	}
	addr := (raw + hugePage - 1) &^ (hugePage - 1)
	if head := addr - raw; head > 0 {
		syscall.Syscall(syscall.SYS_MUNMAP, raw, head, 0)
	}
	if tail := raw + span - (addr + uintptr(size)); tail > 0 {
		syscall.Syscall(syscall.SYS_MUNMAP, addr+uintptr(size), tail, 0)
	}
	mem := unsafe.Slice((*byte)(foreignPointer(addr)), int(size))
	// THP in "madvise" mode (the usual default) only backs advised ranges
	// with huge pages; in "always" mode the advice is harmless, in "never"
	// mode (or without THP) it fails and 4 KiB pages are used.
	syscall.Syscall(syscall.SYS_MADVISE, addr, uintptr(size), syscall.MADV_HUGEPAGE)
	return mem[:0], nil
}

// trimAnon unmaps the reservation beyond the first n bytes (rounded up to a
// huge page, so as not to split one) and returns what is left.
func trimAnon(mem []byte, n int) []byte {
	keep := (n + hugePage - 1) &^ (hugePage - 1)
	if keep >= cap(mem) {
		return mem
	}
	base := uintptr(unsafe.Pointer(unsafe.SliceData(mem)))
	syscall.Syscall(syscall.SYS_MUNMAP, base+uintptr(keep), uintptr(cap(mem)-keep), 0)
	return mem[:n:keep]
}

// unmapAnon releases a mapping made by mapAnon (and maybe trimmed).
func unmapAnon(mem []byte) {
	if cap(mem) == 0 {
		return
	}
	base := uintptr(unsafe.Pointer(unsafe.SliceData(mem)))
	syscall.Syscall(syscall.SYS_MUNMAP, base, uintptr(cap(mem)), 0)
}

// foreignPointer turns the address of memory outside the Go heap (a
// mapping) into a pointer. Reading the uintptr through a pointer keeps
// go vet's unsafeptr check, which cannot know the memory is not Go's,
// quiet without a blanket exception.
func foreignPointer(addr uintptr) unsafe.Pointer {
	return *(*unsafe.Pointer)(unsafe.Pointer(&addr))
}

// madvPopulateWrite is MADV_POPULATE_WRITE (Linux 5.14), absent from package
// syscall's constants on some platforms.
const madvPopulateWrite = 23

// populateAnon faults mem in as if written, ahead of the writes.
func populateAnon(mem []byte) error {
	_, _, errno := syscall.Syscall(syscall.SYS_MADVISE, uintptr(unsafe.Pointer(unsafe.SliceData(mem))),
		uintptr(len(mem)), madvPopulateWrite)
	if errno != 0 {
		return errno
	}
	return nil
}

// mapShared reserves size bytes of a new memfd, mapped shared, so that
// another process given the file descriptor can map the same pages. Shared
// memory gets transparent huge pages only where
// /sys/kernel/mm/transparent_hugepage/shmem_enabled allows them (the
// advice is given for when it does); elsewhere it is faulted in 4 KiB pages.
func mapShared(size int64) ([]byte, int, error) {
	if size <= 0 || size != int64(int(size)) {
		return nil, -1, syscall.EINVAL
	}
	fd, err := unix.MemfdCreate("enclaveai-model", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, -1, err
	}
	if err := unix.Ftruncate(fd, size); err != nil {
		unix.Close(fd)
		return nil, -1, err
	}
	raw, _, errno := syscall.Syscall6(syscall.SYS_MMAP, 0, uintptr(size),
		syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED|syscall.MAP_NORESERVE, uintptr(fd), 0)
	if errno != 0 {
		unix.Close(fd)
		return nil, -1, errno
	}
	syscall.Syscall(syscall.SYS_MADVISE, raw, uintptr(size), syscall.MADV_HUGEPAGE)
	mem := unsafe.Slice((*byte)(foreignPointer(raw)), int(size))
	return mem[:0], fd, nil
}

// trimShared is trimAnon for a mapShared region: the file shrinks too, so
// that whoever maps it later sees only the model's pages. Then the file is
// sealed: no one may change its size or write to it again, through this
// descriptor or any other (an engine worker is given one). A worker taken
// over by a hostile model could otherwise shrink the file, and the
// server's next read of its mapping (AI.MODELGET, SAVE) would fault,
// SIGBUS, fatal to the process; or write to it, and the server would
// serve and seal the altered bytes as the model (engine review).
// F_SEAL_FUTURE_WRITE leaves the server's own writable mapping in place
// (F_SEAL_WRITE would need it gone) but refuses every new one and every
// write(2); kernels before 5.1 lack it, and get the size seals alone.
func trimShared(mem []byte, fd, n int) []byte {
	mem = trimAnon(mem, n)
	unix.Ftruncate(fd, int64(cap(mem)))
	const size = unix.F_SEAL_SHRINK | unix.F_SEAL_GROW
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, size|unix.F_SEAL_FUTURE_WRITE|unix.F_SEAL_SEAL); err != nil {
		unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, size|unix.F_SEAL_SEAL)
	}
	return mem
}

// mapReadOnly maps the first size bytes of the file fd read-only and
// shared (a worker's view of a model buffer).
func mapReadOnly(fd int, size int) ([]byte, error) {
	if size <= 0 {
		return nil, syscall.EINVAL
	}
	raw, _, errno := syscall.Syscall6(syscall.SYS_MMAP, 0, uintptr(size),
		syscall.PROT_READ, syscall.MAP_SHARED, uintptr(fd), 0)
	if errno != 0 {
		return nil, errno
	}
	return unsafe.Slice((*byte)(foreignPointer(raw)), size), nil
}
