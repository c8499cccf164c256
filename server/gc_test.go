package server

import (
	"os"
	"runtime"
	"runtime/metrics"
	"testing"
	"time"
)

func TestGCPercentFor(t *testing.T) {
	for _, c := range []struct {
		live uint64
		want int
	}{
		{0, 400}, {3 << 20, 400}, {16 << 20, 400}, {32 << 20, 200},
		{64 << 20, 100}, {128 << 20, 50}, {256 << 20, 25}, {4 << 30, 25},
	} {
		if got := gcPercentFor(c.live); got != c.want {
			t.Errorf("gcPercentFor(%d MiB) = %d, want %d", c.live>>20, got, c.want)
		}
	}
}

// The running process's GOGC follows its live heap: low while a large
// allocation is live, back to the maximum once it is gone.
func TestTuneGCFollowsLiveHeap(t *testing.T) {
	if os.Getenv("GOGC") != "" {
		t.Skip("GOGC is set: TuneGC leaves it alone")
	}
	TuneGC()
	gogc := func() int {
		s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
		metrics.Read(s)
		return int(s[0].Value.Uint64())
	}
	wait := func(want int) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for gogc() != want {
			if time.Now().After(deadline) {
				t.Fatalf("GOGC %d, want %d", gogc(), want)
			}
			runtime.GC()
			time.Sleep(10 * time.Millisecond)
		}
	}
	wait(gcPercentMax)
	big := make([]byte, 512<<20)
	wait(gcPercentMin)
	runtime.KeepAlive(big)
	wait(gcPercentMax)
}
