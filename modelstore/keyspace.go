// Package modelstore is EnclaveAI's storage engine: the keyspace of
// immutable tensors and models, and model inference through ONNX Runtime.
// It knows nothing of RESP.
//
// Concurrency rules:
//   - Keyspace.mu guards the key maps only. It is held for map operations,
//     never for inference, model compilation or I/O.
//   - Values (Tensor, Model) are immutable once stored: a write replaces the
//     value, so a reader may keep using a value it fetched after the lock is
//     released.
//   - Lock order: docs/LOCKS.md. Under Keyspace.mu only the Journal hook
//     (the log's queue lock) and retain callbacks (the registry's lock) run.
package modelstore

import (
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tidwall/btree"
)

// Value is anything stored under a key.
type Value interface {
	// TypeName is what TYPE replies: AI_TENSOR or AI__MODEL.
	TypeName() string
	// MemSize is the memory the value accounts for, in bytes.
	MemSize() int64
}

// TypeName implements Value.
func (t *Tensor) TypeName() string { return "AI_TENSOR" }

// MemSize implements Value.
func (t *Tensor) MemSize() int64 { return int64(len(t.Data)) + int64(len(t.Shape))*8 + 64 }

type entry struct {
	v        Value
	expireAt int64 // unix milliseconds; 0 = persistent
}

// Keyspace is the single database of keys.
//
// Besides the key map it keeps, as Redis does, what makes SCAN and active
// expiry cost O(keys returned or sampled) rather than O(keys): order, every
// key sorted by (hash, key), which SCAN walks from its cursor; and ttl, the
// keys that have an expiry (Redis's expires dict), which SweepExpired
// samples.
type Keyspace struct {
	mu    sync.RWMutex
	m     map[string]entry
	order *btree.BTreeG[slot]
	ttl   map[string]int64 // key -> expireAt, for keys with a TTL
	// avgTTL estimates the keys' time to live in ms, from the active
	// expiry's samples (SweepExpired; INFO keyspace's avg_ttl).
	avgTTL atomic.Int64
	// dropped holds the values of expired, not yet swept keys that a write
	// or DEL removed: SweepExpired hands them back for release with the rest.
	dropped []Value

	used atomic.Int64 // bytes accounted for values and keys
	// models is the bytes of the model blobs at each owner's keys
	// (Model.Owner), kept in step with m: a quota on them is checked, and
	// reserved against, in O(1), not by a walk of every key; and the
	// owner's models that have a TTL, which stop counting once it passes
	// (modelbytes.go).
	models    modelCount
	dirty     atomic.Int64 // writes since the last snapshot
	maxmemory func() int64
	now       func() int64 // unix ms; replaceable in tests
	seed      maphash.Seed
	journal   Journal // nil: changes are not recorded
	// watchers are the WATCHes of each watched key (keywatch.go).
	watchers map[string][]*KeyWatch
}

// Journal hears of every change to the keyspace, in the order the changes
// happen, while the keyspace lock is held: an append-only log records them
// through it. It must be quick and must not call back into the keyspace.
// Expiry that removes a key is not reported: expiry times are absolute,
// so a replay expires the key by itself.
type Journal interface {
	// Set: key now holds v, with no TTL.
	Set(key string, v Value)
	// Delete: key is gone.
	Delete(key string)
	// Expire: key's expiry is now at (unix ms; 0 = none).
	Expire(key string, at int64)
	// Rename: src's value and TTL moved to dst.
	Rename(src, dst string)
	// Flush: every key is gone.
	Flush()
	// Check refuses, before anything changes, a value that cannot be
	// recorded at key (too large for a record): the journal hears of a
	// change only once it is made, and one it could not record would be
	// lost though acknowledged.
	Check(key string, v Value) error
	// Begin and End bracket the changes of one atomic update of several
	// keys (SetMany, Delete): a replay must apply all of them or none.
	// They nest (a transaction around such an update).
	Begin()
	End()
}

// SetJournal makes j hear of every change from now on (nil: none). Set
// it before the keyspace is shared.
func (k *Keyspace) SetJournal(j Journal) {
	k.mu.Lock()
	k.journal = j
	k.mu.Unlock()
}

// NewKeyspace returns an empty keyspace; maxmemory (may be nil) is consulted
// on every write that grows memory.
func NewKeyspace(maxmemory func() int64) *Keyspace {
	if maxmemory == nil {
		maxmemory = func() int64 { return 0 }
	}
	return &Keyspace{m: make(map[string]entry), order: newOrder(), ttl: map[string]int64{}, models: newModelCount(), maxmemory: maxmemory,
		now: func() int64 { return time.Now().UnixMilli() }, seed: maphash.MakeSeed()}
}

// live: e holds a value whose TTL, if it has one, has not passed.
func (e entry) live(now *instant) bool {
	return e.v != nil && (e.expireAt == 0 || e.expireAt > now.at())
}

// instant is one operation's reading of the clock, taken when first
// needed: most keys have no TTL, and reading the clock on every access
// cost 2% of a pipelined TENSORSET's CPU.
type instant struct {
	now func() int64
	ms  int64
	set bool
}

// instant returns a reading of k's clock, not yet taken.
func (k *Keyspace) instant() *instant { return &instant{now: k.now} }

// at is the time of the reading in unix ms.
func (i *instant) at() int64 {
	if !i.set {
		i.ms, i.set = i.now(), true
	}
	return i.ms
}

func entrySize(key string, v Value) int64 { return int64(len(key)) + v.MemSize() + 48 }

// Get returns the live value at key.
func (k *Keyspace) Get(key string) (Value, bool) {
	now := k.instant()
	k.mu.RLock()
	e, ok := k.m[key]
	if ok && e.live(now) {
		pinValue(e.v)
	}
	k.mu.RUnlock()
	if !ok || !e.live(now) {
		return nil, false
	}
	return e.v, true
}

// TypeName returns the type name of the live value at key, false if there
// is none. It keeps nothing, so it does not pin a tensor as Get does
// (TYPE: a client that asked for a key's type before each AI.TENSORSET
// of it had no buffer recycled).
func (k *Keyspace) TypeName(key string) (string, bool) {
	now := k.instant()
	k.mu.RLock()
	e, ok := k.m[key]
	k.mu.RUnlock()
	if !ok || !e.live(now) {
		return "", false
	}
	return e.v.TypeName(), true
}

// ReadTensor calls read with the live tensor at key and returns read's
// error, or ErrNoTensor or ErrWrongType without calling it. read is done
// with the tensor when it returns (AI.TENSORGET copies the data into its
// reply): it must not keep the tensor or its Data, wait, or take a lock.
// A tensor whose buffer may be recycled (tensorbuf.go) is read under the
// keyspace's read lock, which keeps the buffer its own (AI.TENSORSET
// replaces the tensor under the write lock) without counting a hold:
// readers of one key on two CPUs counting theirs fought over the count's
// cache line (BenchmarkTensorGetParallel in package commands: 538 against
// 375 ns an AI.TENSORGET on the 2-CPU machine of docs/BENCHMARKS.md). Any
// other tensor's memory is never reused: read runs after the lock is
// released.
func (k *Keyspace) ReadTensor(key string, read func(*Tensor) error) error {
	now := k.instant()
	k.mu.RLock()
	e, ok := k.m[key]
	if !ok || !e.live(now) {
		k.mu.RUnlock()
		return ErrNoTensor
	}
	t, ok := e.v.(*Tensor)
	if !ok {
		k.mu.RUnlock()
		return ErrWrongType
	}
	if t.hold == nil {
		k.mu.RUnlock()
		return read(t)
	}
	defer k.mu.RUnlock()
	return read(t)
}

// GetTensor returns the tensor at key, ErrNoTensor or ErrWrongType.
func (k *Keyspace) GetTensor(key string) (*Tensor, error) {
	v, ok := k.Get(key)
	if !ok {
		return nil, ErrNoTensor
	}
	t, ok := v.(*Tensor)
	if !ok {
		return nil, ErrWrongType
	}
	return t, nil
}

// Allow decides whether a command may act on a value that is in the
// keyspace (values belong to users: commands/owner.go); nil allows all.
// The keyspace calls it under its lock, so the decision holds for the
// operation it guards.
type Allow func(Value) error

// Write is one key's part of an atomic multi-key update.
type Write struct {
	Key string
	// Value replaces the key's value; its TTL is cleared, as Redis's SET does.
	Value Value
	// SameType, when true, refuses to replace a value of another type
	// (ErrWrongType); otherwise any value is replaced.
	SameType bool
	// Allow, if set, is asked about the value replaced.
	Allow Allow
}

// Set stores v at key, replacing a value of the same type (or any type
// when sameType is false). It returns the value it replaced, if any.
func (k *Keyspace) Set(key string, v Value, sameType bool) (Value, error) {
	old, err := k.SetMany([]Write{{Key: key, Value: v, SameType: sameType}})
	if err != nil {
		return nil, err
	}
	return old[0], nil
}

// SetMany applies all writes or none: every type and memory check passes
// before the first key changes. It returns the replaced values.
func (k *Keyspace) SetMany(ws []Write) ([]Value, error) {
	old := make([]Value, len(ws))
	if err := k.setMany(ws, old); err != nil {
		return nil, err
	}
	return old, nil
}

// Apply is SetMany for a caller that has no use for the replaced values
// (AI.TENSORSET): it allocates nothing for them, and the keyspace gives
// up its hold of a replaced tensor, whose buffer may then be recycled
// (tensorbuf.go). A tensor must be in ws once at most: stored at two keys,
// it would be recycled when either is replaced.
func (k *Keyspace) Apply(ws []Write) error { return k.setMany(ws, nil) }

// setMany is SetMany, storing the replaced values in old when it is not
// nil (len(old) == len(ws)).
func (k *Keyspace) setMany(ws []Write, old []Value) error {
	now := k.instant()
	k.mu.Lock()
	defer k.mu.Unlock()
	var grow int64
	for i, w := range ws {
		e, ok := k.m[w.Key]
		if ok && e.live(now) {
			if w.SameType && e.v.TypeName() != w.Value.TypeName() {
				return ErrWrongType
			}
			if w.Allow != nil {
				if err := w.Allow(e.v); err != nil {
					return err
				}
			}
			if old != nil {
				old[i] = e.v
			}
			grow -= entrySize(w.Key, e.v)
		}
		grow += entrySize(w.Key, w.Value)
		if k.journal != nil {
			if err := k.journal.Check(w.Key, w.Value); err != nil {
				return err
			}
		}
	}
	if max := k.maxmemory(); max > 0 && grow > 0 && k.used.Load()+grow > max {
		return ErrOOM
	}
	if k.journal != nil && len(ws) > 1 {
		k.journal.Begin()
		defer k.journal.End()
	}
	for _, w := range ws {
		k.dropIfExpired(w.Key, now)
		prev, had := k.m[w.Key]
		k.setLocked(w.Key, entry{v: w.Value})
		if old == nil && had && prev.live(now) && prev.v != w.Value {
			doneValue(prev.v)
		}
		k.touchLocked(w.Key)
		if k.journal != nil {
			k.journal.Set(w.Key, w.Value)
		}
	}
	k.dirty.Add(int64(len(ws)))
	return nil
}

// CheckMemory reports ErrOOM if adding n bytes would pass maxmemory. It is
// an early check before expensive work; Set checks again atomically.
func (k *Keyspace) CheckMemory(n int64) error {
	if max := k.maxmemory(); max > 0 && k.used.Load()+n > max {
		return ErrOOM
	}
	return nil
}

// setLocked replaces key's entry, keeping used, order and ttl in step.
func (k *Keyspace) setLocked(key string, e entry) {
	if prev, ok := k.m[key]; ok {
		k.used.Add(-entrySize(key, prev.v))
		k.models.add(key, prev, -1)
	} else {
		k.order.Set(slot{k.scanHash(key), key})
	}
	k.m[key] = e
	k.used.Add(entrySize(key, e.v))
	k.models.add(key, e, 1)
	k.setTTLLocked(key, e.expireAt)
}

func (k *Keyspace) deleteLocked(key string) (Value, bool) {
	e, ok := k.m[key]
	if !ok {
		return nil, false
	}
	delete(k.m, key)
	k.order.Delete(slot{k.scanHash(key), key})
	delete(k.ttl, key)
	k.used.Add(-entrySize(key, e.v))
	k.models.add(key, e, -1)
	return e.v, true
}

// Delete removes keys and returns the live values removed. If allow
// refuses one of them, nothing is removed and its error is returned.
func (k *Keyspace) Delete(allow Allow, keys ...string) ([]Value, error) {
	now := k.instant()
	var out []Value
	k.mu.Lock()
	defer k.mu.Unlock()
	if err := k.allowedLocked(allow, now, keys...); err != nil {
		return nil, err
	}
	if k.journal != nil && len(keys) > 1 {
		k.journal.Begin()
		defer k.journal.End()
	}
	for _, key := range keys {
		if e, ok := k.m[key]; ok {
			k.dropIfExpired(key, now)
			k.deleteLocked(key)
			if e.live(now) {
				out = append(out, e.v)
				k.dirty.Add(1)
				k.touchLocked(key)
				if k.journal != nil {
					k.journal.Delete(key)
				}
			}
		}
	}
	return out, nil
}

// Allowed asks allow about the live values of keys, under the keyspace's
// read lock, without pinning them (Get pins a pooled tensor for good).
func (k *Keyspace) Allowed(allow Allow, keys ...string) error {
	now := k.instant()
	k.mu.RLock()
	defer k.mu.RUnlock()
	return k.allowedLocked(allow, now, keys...)
}

// allowedLocked asks allow about the live values of keys. k.mu is held.
func (k *Keyspace) allowedLocked(allow Allow, now *instant, keys ...string) error {
	if allow == nil {
		return nil
	}
	for _, key := range keys {
		if e, ok := k.m[key]; ok && e.live(now) {
			if err := allow(e.v); err != nil {
				return err
			}
		}
	}
	return nil
}

// DeleteIf removes key only while it still holds v (compare-and-delete).
func (k *Keyspace) DeleteIf(key string, v Value) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if e, ok := k.m[key]; ok && e.v == v {
		k.deleteLocked(key)
		k.touchLocked(key)
		k.dirty.Add(1)
		if k.journal != nil {
			k.journal.Delete(key)
		}
		return true
	}
	return false
}

// Rename moves src's value and TTL to dst, replacing dst. It returns the
// value dst held before, if any. allow is asked about both values.
func (k *Keyspace) Rename(allow Allow, src, dst string) (Value, error) {
	now := k.instant()
	k.mu.Lock()
	defer k.mu.Unlock()
	e, ok := k.m[src]
	if !ok || !e.live(now) {
		return nil, ErrNoKey
	}
	if err := k.allowedLocked(allow, now, src, dst); err != nil {
		return nil, err
	}
	if src == dst {
		return nil, nil
	}
	if k.journal != nil {
		// What a rewrite's base will hold: the value at dst.
		if err := k.journal.Check(dst, e.v); err != nil {
			return nil, err
		}
	}
	var replaced Value
	if d, ok := k.m[dst]; ok && d.live(now) {
		replaced = d.v
	}
	k.dropIfExpired(dst, now)
	k.deleteLocked(src)
	k.setLocked(dst, e)
	k.touchLocked(src)
	k.touchLocked(dst)
	k.dirty.Add(1)
	if k.journal != nil {
		k.journal.Rename(src, dst)
	}
	return replaced, nil
}

// Len returns the number of keys and of keys with a TTL (expired keys not
// yet swept may be counted, as Redis counts them).
func (k *Keyspace) Len() (keys, expires int) {
	k.mu.RLock()
	defer k.mu.RUnlock()
	return len(k.m), len(k.ttl)
}

// Used is the memory accounted to keys and values.
func (k *Keyspace) Used() int64 { return k.used.Load() }

// Dirty is the number of changes since ResetDirty.
func (k *Keyspace) Dirty() int64 { return k.dirty.Load() }

// ResetDirty subtracts n changes (those a snapshot has covered).
func (k *Keyspace) ResetDirty(n int64) { k.dirty.Add(-n) }

// Flush removes every key and returns the values removed; if allow refuses
// one of them, it removes nothing.
func (k *Keyspace) Flush(allow Allow) ([]Value, error) {
	k.mu.Lock()
	if allow != nil {
		now := k.instant()
		for _, e := range k.m {
			if e.live(now) {
				if err := allow(e.v); err != nil {
					k.mu.Unlock()
					return nil, err
				}
			}
		}
	}
	old := k.m
	k.m = make(map[string]entry)
	k.order, k.ttl, k.models = newOrder(), map[string]int64{}, newModelCount()
	k.touchAllLocked(old)
	k.used.Store(0)
	k.dirty.Add(int64(len(old)))
	if k.journal != nil {
		k.journal.Flush()
	}
	k.mu.Unlock()
	out := make([]Value, 0, len(old))
	for _, e := range old {
		out = append(out, e.v)
	}
	return out, nil
}
