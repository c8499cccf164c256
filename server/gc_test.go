package server

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"
)

func TestGCGarbageFor(t *testing.T) {
	for _, c := range []struct{ live, want uint64 }{
		{0, 64 << 20}, {3 << 20, 64 << 20}, {256 << 20, 64 << 20},
		{512 << 20, 128 << 20}, {4 << 30, 1 << 30},
	} {
		if got := gcGarbageFor(c.live); got != c.want {
			t.Errorf("gcGarbageFor(%d MiB) = %d MiB, want %d MiB", c.live>>20, got>>20, c.want>>20)
		}
	}
}

// The running process's collector is paced by a memory limit that follows
// its live heap: GOGC off, the limit above a large allocation while it is
// live (and not by more than its share of garbage and the runtime's own
// memory), back down once it is gone.
func TestTuneGCFollowsLiveHeap(t *testing.T) {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		t.Skip("GOGC or GOMEMLIMIT is set: TuneGC leaves the collector alone")
	}
	gogc, limit := debug.SetGCPercent(100), debug.SetMemoryLimit(-1)
	defer func() {
		debug.SetGCPercent(gogc)
		debug.SetMemoryLimit(limit)
	}()
	TuneGC()
	if p := debug.SetGCPercent(-1); p != -1 {
		t.Fatalf("GOGC %d, want off (-1)", p)
	}
	memLimit := func() uint64 {
		s := []metrics.Sample{{Name: "/gc/gomemlimit:bytes"}}
		metrics.Read(s)
		return s[0].Value.Uint64()
	}
	wait := func(what string, ok func(uint64) bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !ok(memLimit()) {
			if time.Now().After(deadline) {
				t.Fatalf("memory limit %d MiB, want %s", memLimit()>>20, what)
			}
			runtime.GC()
			time.Sleep(10 * time.Millisecond)
		}
	}
	small := func(l uint64) bool { return l >= gcHeadroom && l < gcHeadroom+64<<20 }
	wait("64 to 128 MiB", small)
	big := make([]byte, 512<<20)
	wait("640 to 704 MiB", func(l uint64) bool { return l >= 640<<20 && l < 704<<20 })
	runtime.KeepAlive(big)
	big = nil
	wait("64 to 128 MiB", small)
}
