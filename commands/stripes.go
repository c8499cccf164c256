package commands

import (
	"sync"
	"sync/atomic"
)

// striped holds one T per stripe, each on cache lines of its own: what
// every command writes (its counters, the transaction lock's read side)
// is written in the stripe of the command's client, so that commands on
// two CPUs do not move one word between their caches. One atomic.Int64
// that every command added to (the commands processed, each command's
// calls and time), and the transaction lock's one lock word, did, on
// every command two CPUs dispatched at once: BenchmarkTensorGetParallel
// took 375 ns an AI.TENSORGET with them, 140 striped, on the 2-CPU machine
// of docs/BENCHMARKS.md. Redis, in its one thread, pays nothing of the
// kind.
type striped[T any] struct {
	_ [cacheLine]byte // nor with what lies before it
	s [stripes]struct {
		v T
		_ [cacheLine]byte // v on lines of its own, however the array lies
	}
}

// stripes is the number of stripes (a power of two): two clients on two
// CPUs share one with odds of 1 in stripes.
const stripes = 8

// cacheLine is the size of the CPU's cache line (x86-64, arm64's 64 bytes):
// the padding after a stripe's value, so that no line holds two stripes'
// values whatever the alignment.
const cacheLine = 64

// of is the stripe of the client with id id.
func (s *striped[T]) of(id int64) *T { return &s.s[uint64(id)%stripes].v }

// each calls f with every stripe, in order.
func (s *striped[T]) each(f func(*T)) {
	for i := range s.s {
		f(&s.s[i].v)
	}
}

// Counter is a sum that connections on several CPUs add to (striped): each
// adds to its client's stripe, and Load adds the stripes up.
type Counter struct{ s striped[atomic.Int64] }

// Add adds d on behalf of the client with id id.
func (c *Counter) Add(id, d int64) { c.s.of(id).Add(d) }

// Load is the sum.
func (c *Counter) Load() int64 {
	var n int64
	c.s.each(func(x *atomic.Int64) { n += x.Load() })
	return n
}

// Store sets the sum to n (CONFIG RESETSTAT's 0).
func (c *Counter) Store(n int64) {
	c.s.each(func(x *atomic.Int64) { x.Store(0) })
	c.s.of(0).Store(n)
}

// txLock is the transaction lock (App.tx; docs/LOCKS.md), a readers-writer
// lock striped: every command takes the read side of its client's stripe;
// the write side (EXEC, a slot migration's fence) takes every stripe's, in
// order.
type txLock struct{ s striped[sync.RWMutex] }

// RLock takes the read side for client c.
func (l *txLock) RLock(c *Client) { l.s.of(c.ID).RLock() }

// RUnlock releases what RLock(c) took.
func (l *txLock) RUnlock(c *Client) { l.s.of(c.ID).RUnlock() }

// Lock takes the write side: every stripe, in order.
func (l *txLock) Lock() { l.s.each((*sync.RWMutex).Lock) }

// Unlock releases the write side.
func (l *txLock) Unlock() { l.s.each((*sync.RWMutex).Unlock) }
