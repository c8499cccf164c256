package server

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
)

// Pacing of the Go garbage collector. GOGC is the garbage the heap may
// gather, as a percentage of the live heap, before the next collection.
// Neither a fixed low nor a fixed high value suits a server whose live heap
// is sometimes 3 MB (tensors written and replaced at a high rate: Go's
// default of 100 then collects every few milliseconds, 11% of the server's
// CPU under TENSORSET load, docs/BENCHMARKS.md) and sometimes gigabytes of
// stored tensors (where 400 lets the process grow to five times its data:
// 4.4 GB of RSS for 1.07 GB of tensors overwritten in turn, measured).
// So the percentage follows the live heap after every collection: garbage
// of up to gcHeadroom is always allowed, but never more than gcPercentMax
// percent of the live heap, and never less than gcPercentMin percent.
// Large model buffers are not on the Go heap (ModelBuffer maps them), so
// this is about tensors and small models.
const (
	gcHeadroom   = 64 << 20
	gcPercentMax = 400
	gcPercentMin = 25
)

// gcPercentFor returns the GOGC for a live heap of live bytes.
func gcPercentFor(live uint64) int {
	if live == 0 {
		return gcPercentMax
	}
	p := uint64(gcHeadroom) * 100 / live
	return int(min(max(p, gcPercentMin), gcPercentMax))
}

// TuneGC makes the collector's target follow the live heap (gcPercentFor),
// adjusted after every collection, unless GOGC is set in the environment,
// which then wins. It returns at once; the tuning lasts for the process.
func TuneGC() {
	if os.Getenv("GOGC") != "" {
		return
	}
	debug.SetGCPercent(gcPercentMax)
	runtime.SetFinalizer(&gcSentinel{}, afterGC)
}

// gcSentinel is an object kept only by its finalizer, which runs once per
// collection and sets itself again. It holds a pointer so that it is not
// batched with other tiny objects, whose finalizers may never run.
type gcSentinel struct{ _ *int }

var liveHeap = []metrics.Sample{{Name: "/gc/heap/live:bytes"}}

// gcPercent is the last value set by afterGC; only the finalizer
// goroutine touches it.
var gcPercent = gcPercentMax

func afterGC(s *gcSentinel) {
	metrics.Read(liveHeap)
	if v := liveHeap[0].Value; v.Kind() == metrics.KindUint64 {
		if p := gcPercentFor(v.Uint64()); p != gcPercent {
			gcPercent = p
			debug.SetGCPercent(p)
		}
	}
	runtime.SetFinalizer(s, afterGC)
}
