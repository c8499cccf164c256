package commands

import (
	"sync"
	"testing"
	"time"
)

// A striped counter sums what clients of every stripe add, and a reset
// clears every stripe.
func TestCounter(t *testing.T) {
	var c Counter
	var wg sync.WaitGroup
	for id := int64(0); id < 3*stripes; id++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 1000 {
				c.Add(id, 2)
			}
		}()
	}
	wg.Wait()
	if got := c.Load(); got != 3*stripes*2000 {
		t.Fatalf("sum %d, want %d", got, 3*stripes*2000)
	}
	c.Store(0)
	if got := c.Load(); got != 0 {
		t.Fatalf("after a reset: %d", got)
	}
	var st cmdStats
	for id := int64(0); id < stripes; id++ {
		x := st.of(&Client{ID: id})
		x.calls.Add(1)
		x.usec.Add(10)
		x.failed.Add(id % 2)
	}
	if calls, usec, rejected, failed := st.sum(); calls != stripes || usec != 10*stripes || rejected != 0 || failed != stripes/2 {
		t.Fatalf("commandstats sum %d %d %d %d", calls, usec, rejected, failed)
	}
	st.reset()
	if calls, usec, _, _ := st.sum(); calls != 0 || usec != 0 {
		t.Fatal("commandstats not reset")
	}
}

// The transaction lock's write side waits for a reader of any stripe, and
// keeps readers of every stripe out while it is held.
func TestTxLock(t *testing.T) {
	var l txLock
	for id := int64(0); id < stripes; id++ {
		c := &Client{ID: id}
		l.RLock(c)
		locked := make(chan struct{})
		go func() { l.Lock(); close(locked) }()
		select {
		case <-locked:
			t.Fatalf("stripe %d: the write side was taken under a reader", id)
		case <-time.After(10 * time.Millisecond):
		}
		l.RUnlock(c)
		<-locked
		read := make(chan struct{})
		go func() { l.RLock(c); close(read) }()
		select {
		case <-read:
			t.Fatalf("stripe %d: a reader got in under the write side", id)
		case <-time.After(10 * time.Millisecond):
		}
		l.Unlock()
		<-read
		l.RUnlock(c)
	}
}
