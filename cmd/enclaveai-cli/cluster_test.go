package main

import (
	"testing"

	"github.com/enclaveai/enclaveai/cluster"
)

func TestSplitSlots(t *testing.T) {
	// kvrocks-controller's default split for three nodes.
	got := splitSlots(3)
	want := []cluster.Range{{Start: 0, End: 5460}, {Start: 5461, End: 10921}, {Start: 10922, End: 16383}}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("splitSlots(3) = %v", got)
		}
	}
	for _, n := range []int{1, 2, 7, 1000} {
		rs := splitSlots(n)
		next := 0
		for _, r := range rs {
			if r.Start != next || r.End < r.Start {
				t.Fatalf("n=%d: %v", n, rs)
			}
			next = r.End + 1
		}
		if next != cluster.Slots {
			t.Fatalf("n=%d ends at %d", n, next)
		}
	}
}
