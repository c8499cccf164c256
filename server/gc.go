package server

import (
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
)

// Pacing of the Go garbage collector. The server's live heap is sometimes
// 3 MB (tensors written and replaced at a high rate) and sometimes
// gigabytes of stored tensors, so the garbage the heap may gather between
// collections follows the live heap: a fixed headroom, or gcPercentMin
// percent of the live heap when that is more. A small heap is then
// collected every 32 MiB of allocation rather than every few milliseconds
// (Go's default of 100 cost 11% of the server's CPU under TENSORSET load,
// docs/BENCHMARKS.md), and a large one cannot multiply its memory (4.4 GB
// of RSS for 1.07 GB of tensors overwritten in turn under a fixed 400%).
// Large model buffers are not on the Go heap (ModelBuffer maps them), so
// this is about tensors and small models.
//
// Why a memory limit rather than GOGC: the collector's GOGC goal comes
// with a scavenger that returns to the OS every page above the heap in
// use at the last collection (plus 10%), so a heap that fills with
// garbage and empties again gives back, after each collection, the pages
// the next cycle's allocations fault in again. On the 2-vCPU machine of
// docs/BENCHMARKS.md a page fault costs 11-15 µs: that was 0.02-0.03
// faults and 15-20% of the CPU of a pipelined AI.TENSORSET of 3136 bytes
// (`perf record -e page-faults`: all but a few in the copy of the blob).
// With GOGC off and a memory limit the scavenger keeps what the limit
// allows, and the limit, set again after every collection, is the pacing
// above: faults fell 4-10x and CPU per TENSORSET by 11-15%
// (docs/BENCHMARKS.md, "Core server"). A headroom of 32 MiB or more keeps that gain (a 24 MiB
// limit in all lost it, 40 MiB kept it); the headroom is faulted in as the
// process starts (prefault.go), not by its first requests. The heap then
// keeps free pages that are committed, and Go clears an allocation that
// reuses any of them whole: so the reader puts an argument larger than its
// buffer in memory Go has not cleared (modelstore.BlobBuffer), or a large
// length announced and never sent would commit its memory at once.
//
// An engine worker's heap holds a run's tensors only, and there is one
// worker per tenant with users enabled: its headroom is half the server's.
const (
	ServerGCHeadroom = 32 << 20
	WorkerGCHeadroom = 16 << 20
	gcPercentMin     = 25
)

// gcHeadroom is the process's headroom, set by TuneGC (ServerGCHeadroom
// until then); afterGC reads it on the finalizer goroutine.
var gcHeadroom atomic.Uint64

// gcGarbageFor returns the garbage allowed over a live heap of live bytes.
func gcGarbageFor(live uint64) uint64 {
	h := gcHeadroom.Load()
	if h == 0 {
		h = ServerGCHeadroom
	}
	return max(h, live*gcPercentMin/100)
}

// announced counts the bytes of arguments allocated whole as their length
// was read (modelstore.BlobBuffer) and not yet received: the heap holds
// them as live, though their pages are only committed as the bytes
// arrive. gcLimit allows garbage for the live heap without them: 500
// connections that each announced 500 MB and sent nothing took the limit
// to 300 GB, and with the collector paced by it alone, other clients'
// garbage grew RSS past 4 GB, maxmemory or not (resource review).
var announced atomic.Int64

// gcSentinelOnce: one sentinel per process, however often TuneGC is called.
var gcSentinelOnce sync.Once

// TuneGC turns GOGC off and paces the collector by a memory limit that
// follows the live heap (gcGarbageFor: headroom, or 25% of the live heap),
// set again after every collection, unless GOGC or GOMEMLIMIT is set in the
// environment, which then wins. It returns at once; the tuning lasts for
// the process.
func TuneGC(headroom uint64) {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	gcHeadroom.Store(headroom)
	debug.SetMemoryLimit(int64(gcLimit()))
	debug.SetGCPercent(-1)
	gcSentinelOnce.Do(func() { runtime.SetFinalizer(&gcSentinel{}, afterGC) })
	prefault(headroom)
	// The collection the prefault's allocation caused found it live, and
	// the finalizer may set the limit for that heap after prefault's own
	// collection: the heap would then fill a second headroom before the
	// limit came down, and the scavenger would give back, at once, the
	// pages the next cycle faults in again (27 MB after a fresh server's
	// third collection; 0.22 page faults per TENSORSET over its first
	// 30,000 at one client). Set it now, for the heap left.
	debug.SetMemoryLimit(int64(gcLimit()))
}

// gcSentinel is an object kept only by its finalizer, which runs once per
// collection and sets itself again. It holds a pointer so that it is not
// batched with other tiny objects, whose finalizers may never run.
type gcSentinel struct{ _ *int }

// gcMetrics are the runtime's memory: its total, the heap's classes (what
// is not among them, stacks and the runtime's own metadata, is counted at
// its size), and the heap that the last collection found live.
var gcMetrics = [...]string{
	"/memory/classes/total:bytes",
	"/memory/classes/heap/objects:bytes",
	"/memory/classes/heap/unused:bytes",
	"/memory/classes/heap/free:bytes",
	"/memory/classes/heap/released:bytes",
	"/gc/heap/live:bytes",
}

// gcLimit returns the memory limit for the heap the last collection found
// live: the runtime's memory outside the heap, the live heap and the
// garbage allowed over it, arguments still to arrive left out (announced). Before any collection, the live heap counts as
// zero. It reads into samples of its own: TuneGC and the finalizer
// goroutine's afterGC may call it at once.
func gcLimit() uint64 {
	var samples [len(gcMetrics)]metrics.Sample
	for i, name := range gcMetrics {
		samples[i].Name = name
	}
	metrics.Read(samples[:])
	var v [len(gcMetrics)]uint64
	for i, s := range samples {
		if s.Value.Kind() == metrics.KindUint64 {
			v[i] = s.Value.Uint64()
		}
	}
	total, heap, live := v[0], v[1]+v[2]+v[3]+v[4], v[5]
	other := total - min(heap, total)
	waiting := min(uint64(max(announced.Load(), 0)), live)
	return min(other+live+gcGarbageFor(live-waiting), math.MaxInt64)
}

func afterGC(s *gcSentinel) {
	debug.SetMemoryLimit(int64(gcLimit()))
	runtime.SetFinalizer(s, afterGC)
}
