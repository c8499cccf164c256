package commands

import (
	"sync"
	"sync/atomic"
)

// Counter is a sum that connections on several CPUs add to without sharing
// a cache line: each adds to the stripe its client's id picks, and Load
// adds the stripes up. One atomic.Int64 that every command added to (the
// commands processed, each command's calls and time), and the transaction
// lock's read side (txLock), moved between the CPUs' caches on every
// command two CPUs dispatched at once: BenchmarkTensorGetParallel took 375
// ns an AI.TENSORGET with them, 140 striped, on the 2-CPU machine of
// docs/BENCHMARKS.md. Redis's counters, in its one thread, cost it nothing
// of the kind.
type Counter struct {
	_       [cacheLine]byte // nor with what lies before it
	stripes [stripes]struct {
		n atomic.Int64
		_ [cacheLine]byte // n on a line of its own, however the array lies
	}
}

// stripes is the number of a striped counter's stripes (a power of two):
// two clients on two CPUs share one with odds of 1 in stripes.
const stripes = 8

// cacheLine is the size of the CPU's cache line (x86-64, arm64's 64 bytes):
// the padding after a stripe's counters, so that no line holds two
// stripes' counters whatever the alignment.
const cacheLine = 64

// stripe is the stripe of the client with id id.
func stripe(id int64) int { return int(uint64(id) % stripes) }

// Add adds d on behalf of the client with id id.
func (c *Counter) Add(id, d int64) { c.stripes[stripe(id)].n.Add(d) }

// Load is the sum.
func (c *Counter) Load() int64 {
	var n int64
	for i := range c.stripes {
		n += c.stripes[i].n.Load()
	}
	return n
}

// Store sets the sum to n (CONFIG RESETSTAT's 0).
func (c *Counter) Store(n int64) {
	for i := range c.stripes {
		c.stripes[i].n.Store(0)
	}
	c.stripes[0].n.Store(n)
}

// txLock is the transaction lock (App.tx; docs/LOCKS.md), a
// readers-writer lock striped as Counter is: every command takes its read
// side, on its client's stripe, so that commands on two CPUs do not move
// one lock word between their caches; the write side (EXEC, a slot
// migration's fence) takes every stripe's, in order.
type txLock struct {
	_       [cacheLine]byte
	stripes [stripes]struct {
		mu sync.RWMutex
		_  [cacheLine]byte
	}
}

// RLock takes the read side for client c.
func (l *txLock) RLock(c *Client) { l.stripes[stripe(c.ID)].mu.RLock() }

// RUnlock releases what RLock(c) took.
func (l *txLock) RUnlock(c *Client) { l.stripes[stripe(c.ID)].mu.RUnlock() }

// Lock takes the write side: every stripe, in order.
func (l *txLock) Lock() {
	for i := range l.stripes {
		l.stripes[i].mu.Lock()
	}
}

// Unlock releases the write side.
func (l *txLock) Unlock() {
	for i := range l.stripes {
		l.stripes[i].mu.Unlock()
	}
}
