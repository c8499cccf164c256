package server

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"testing"
	"time"
)

func TestGCGarbageFor(t *testing.T) {
	for _, c := range []struct{ live, want uint64 }{
		{0, 32 << 20}, {3 << 20, 32 << 20}, {128 << 20, 32 << 20}, {256 << 20, 64 << 20},
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
// memory), back down once it is gone; for the server's headroom and for an
// engine worker's.
func TestTuneGCFollowsLiveHeap(t *testing.T) {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		t.Skip("GOGC or GOMEMLIMIT is set: TuneGC leaves the collector alone")
	}
	for _, headroom := range []uint64{ServerGCHeadroom, WorkerGCHeadroom} {
		t.Run(strconv.Itoa(int(headroom>>20))+"MiB", func(t *testing.T) { followsLiveHeap(t, headroom) })
	}
}

func followsLiveHeap(t *testing.T, headroom uint64) {
	gogc, limit, was := debug.SetGCPercent(100), debug.SetMemoryLimit(-1), gcHeadroom.Load()
	defer func() {
		gcHeadroom.Store(was)
		debug.SetGCPercent(gogc)
		debug.SetMemoryLimit(limit)
	}()
	TuneGC(headroom)
	if p := debug.SetGCPercent(-1); p != -1 {
		t.Fatalf("GOGC %d, want off (-1)", p)
	}
	memLimit := func() uint64 {
		s := []metrics.Sample{{Name: "/gc/gomemlimit:bytes"}}
		metrics.Read(s)
		return s[0].Value.Uint64()
	}
	wait := func(lo, hi uint64) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for l := memLimit(); l < lo || l >= hi; l = memLimit() {
			if time.Now().After(deadline) {
				t.Fatalf("memory limit %d MiB, want %d to %d MiB", l>>20, lo>>20, hi>>20)
			}
			runtime.GC()
			time.Sleep(10 * time.Millisecond)
		}
	}
	// At once, without another collection, the limit is the one for the
	// heap the prefault left: not one that counts its buffer as live,
	// which would let the heap fill a second headroom before coming down.
	if l, want := memLimit(), gcLimit(); l > want+4<<20 {
		t.Errorf("memory limit after TuneGC %d MiB, want %d MiB (the heap without the prefault's buffer)", l>>20, want>>20)
	}
	// The runtime's own memory and the test's live heap: under 64 MiB.
	wait(headroom, headroom+64<<20)
	big := make([]byte, 512<<20)
	wait(640<<20, 704<<20) // 512 MiB live, 25% of it (more than either headroom)
	runtime.KeepAlive(big)
	// Bytes announced and not yet received are live, but allowed no
	// garbage of their own (announced): the limit is the headroom over
	// them, not 25% more.
	announced.Add(512 << 20)
	wait(512<<20+headroom, 512<<20+headroom+64<<20)
	announced.Add(-512 << 20)
	runtime.KeepAlive(big)
	big = nil
	wait(headroom, headroom+64<<20)
}
