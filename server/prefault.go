//go:build linux && cgo && !noort

package server

import (
	"runtime"

	"golang.org/x/sys/unix"
)

// prefault has n bytes of heap faulted in once, as the process starts, and
// leaves them free for the allocator. Under the memory limit (gc.go) the
// heap fills its headroom with garbage before each collection, so the
// first pass of a fresh process's allocations through it meets a new page
// every few kilobytes, and a page fault costs 11-15 µs on the 2-vCPU VM of
// docs/BENCHMARKS.md (section machine): a fresh server answered
// AI.MODELEXECUTE at one client 40-60 µs slower at p50 over its first ten
// thousand runs than after forty thousand. MADV_POPULATE_WRITE (Linux 5.14)
// makes the kernel fault the whole range in one system call; where it is
// refused, the heap faults its pages in as it goes, as before. The enclave
// build (noort) has no such file: EGo commits the enclave's heap up front.
func prefault(n uint64) {
	b := make([]byte, n) // fresh from the OS, so not cleared by Go
	if unix.Madvise(b, unix.MADV_POPULATE_WRITE) != nil {
		return
	}
	runtime.KeepAlive(b)
	b = nil
	runtime.GC() // its pages are free again, and stay (the limit allows them)
}
