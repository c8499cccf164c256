package modelstore

// Iteration: the stable order SCAN walks, consistent copies of the key map
// for snapshots (Items, Cut) and the swap of a loaded snapshot (Replace).

import (
	"hash/maphash"
	"slices"

	"github.com/tidwall/btree"
)

// slot is a key's place in Keyspace.order.
type slot struct {
	h   uint64
	key string
}

func newOrder() *btree.BTreeG[slot] {
	// Keyspace.mu guards it: the tree's own lock would be a second one.
	return btree.NewBTreeGOptions(func(a, b slot) bool {
		return a.h < b.h || (a.h == b.h && a.key < b.key)
	}, btree.Options{NoLocks: true})
}

// scanHash is key's SCAN order. Hashes live in [1, 2^62) so that a cursor
// is a positive int64 and 0 can mean "start" and "done".
func (k *Keyspace) scanHash(key string) uint64 { return maphash.String(k.seed, key)>>2 | 1 }

// Item is one key as seen by Items and Scan.
type Item struct {
	Key      string
	Value    Value
	ExpireAt int64
}

// Items copies the key→value map (not the values): a consistent view of
// the whole keyspace at one instant, used by snapshots and KEYS.
func (k *Keyspace) Items() []Item { return k.ItemsRetained(nil) }

// ItemsRetained is Items, calling retain (if not nil) on each value it
// returns while the keyspace is still locked. Deletes release the values
// they remove only after unlocking, so a reference taken in retain is
// counted before any concurrent delete can drop the last one: a snapshot
// that retains model blobs here never reads one already freed.
func (k *Keyspace) ItemsRetained(retain func(Value)) []Item {
	now := k.instant()
	k.mu.RLock()
	defer k.mu.RUnlock()
	return k.itemsLocked(now, retain)
}

// ItemRetained is ItemsRetained for one key: its live value and expiry,
// false when it has none.
func (k *Keyspace) ItemRetained(key string, retain func(Value)) (Item, bool) {
	now := k.instant()
	k.mu.RLock()
	defer k.mu.RUnlock()
	e, ok := k.m[key]
	if !ok || !e.live(now) {
		return Item{}, false
	}
	return itemLocked(key, e, retain), true
}

// itemLocked is one live entry as an Item, its value pinned and given to
// retain (if not nil) while the keyspace is locked.
func itemLocked(key string, e entry, retain func(Value)) Item {
	pinValue(e.v)
	if retain != nil {
		retain(e.v)
	}
	return Item{key, e.v, e.expireAt}
}

func (k *Keyspace) itemsLocked(now *instant, retain func(Value)) []Item {
	out := make([]Item, 0, len(k.m))
	for key, e := range k.m {
		if e.live(now) {
			out = append(out, itemLocked(key, e, retain))
		}
	}
	return out
}

// Cut is ItemsRetained that also runs at while the keyspace is still
// locked against writes: what at does (a log's switch to a new file)
// happens at the very instant of the copy.
func (k *Keyspace) Cut(retain func(Value), at func()) []Item {
	now := k.instant()
	k.mu.Lock()
	defer k.mu.Unlock()
	out := k.itemsLocked(now, retain)
	at()
	return out
}

// Replace swaps in a whole new set of keys (a loaded snapshot) and returns
// the values it replaced.
func (k *Keyspace) Replace(items []Item) []Value {
	m := make(map[string]entry, len(items))
	order, ttl, models := newOrder(), map[string]int64{}, newModelCount()
	var used int64
	for _, it := range items {
		e := entry{v: it.Value, expireAt: it.ExpireAt}
		m[it.Key] = e
		order.Set(slot{k.scanHash(it.Key), it.Key})
		used += entrySize(it.Key, it.Value)
		models.add(it.Key, e, 1)
		if it.ExpireAt != 0 {
			ttl[it.Key] = it.ExpireAt
		}
	}
	k.mu.Lock()
	old := k.m
	k.m, k.order, k.ttl, k.models = m, order, ttl, models
	k.touchAllLocked(old)
	k.used.Store(used)
	k.dirty.Store(0)
	k.mu.Unlock()
	out := make([]Value, 0, len(old))
	for _, e := range old {
		out = append(out, e.v)
	}
	return out
}

// Scan returns up to about count keys whose hash is at or after cursor,
// and the cursor to continue from (0 when done). Like Redis's SCAN, every
// key present for the whole iteration is returned at least once; keys
// added or removed meanwhile may or may not be. accept filters keys
// (MATCH, TYPE) after they are counted, as Redis does. It walks count keys
// of order from the cursor: its cost does not grow with the keyspace.
func (k *Keyspace) Scan(cursor uint64, count int, accept func(Item) bool) ([]string, uint64) {
	now := k.instant()
	var items []Item
	var next uint64
	counted := 0
	var last uint64
	k.mu.RLock()
	k.order.Ascend(slot{h: cursor}, func(s slot) bool {
		// Never split keys of equal hash across two replies.
		if counted >= count && s.h != last {
			next = s.h
			return false
		}
		if e, ok := k.m[s.key]; ok && e.live(now) {
			items = append(items, Item{s.key, e.v, e.expireAt})
			pinValue(e.v)
			counted++
			last = s.h
		}
		return true
	})
	k.mu.RUnlock()
	var keys []string
	for _, it := range items {
		if accept(it) {
			keys = append(keys, it.Key)
		}
	}
	return keys, next
}

// SortedKeys returns the live keys that accept admits, sorted.
func (k *Keyspace) SortedKeys(accept func(Item) bool) []string {
	var out []string
	for _, it := range k.Items() {
		if accept(it) {
			out = append(out, it.Key)
		}
	}
	slices.Sort(out)
	return out
}
