package commands

import (
	"testing"
	"time"
)

func TestAttestBucket(t *testing.T) {
	var b attestBucket
	t0 := time.Unix(1000, 0)
	for i := range 5 {
		if !b.take(5, t0) {
			t.Fatalf("answer %d of a full bucket of 5 refused", i+1)
		}
	}
	if b.take(5, t0) {
		t.Fatal("a sixth answer in the same instant was given")
	}
	if !b.take(5, t0.Add(200*time.Millisecond)) {
		t.Fatal("a fifth of a second later, one answer has refilled, and was refused")
	}
	if b.take(5, t0.Add(200*time.Millisecond)) {
		t.Fatal("the refill gave more than one answer")
	}
	// An hour idle refills a second's worth, no more.
	later := t0.Add(time.Hour)
	n := 0
	for b.take(5, later) {
		n++
	}
	if n != 5 {
		t.Fatalf("after an hour idle %d answers, want 5", n)
	}
	if got := b.refused.Load(); got != 3 {
		t.Fatalf("refused = %d, want 3", got)
	}
	if !b.take(0, later) {
		t.Fatal("rate 0 is no bound, and refused")
	}
}
