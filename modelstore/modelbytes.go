package modelstore

// Each owner's model bytes, for max-model-bytes-per-user (commands/
// policy.go): a count kept in step with the key map, so that a check
// costs O(1) however many keys there are, and each owner's models that
// have a TTL in the order they expire, so that a model whose TTL has
// passed stops counting the moment it has (it is gone for every command,
// whether or not active expiry has found it yet) at a cost of O(log n)
// per model expired, not of a walk over the owner's keys.

import "github.com/tidwall/btree"

// expiring is a model with a TTL in its owner's order of expiry.
type expiring struct {
	at  int64 // unix ms
	key string
}

// modelCount is the keyspace's account of its models by owner
// (Model.Owner). Keyspace.mu guards it.
type modelCount struct {
	bytes    map[string]int64                   // owner -> bytes of its model blobs
	expiring map[string]*btree.BTreeG[expiring] // owner -> its models with a TTL
}

func newModelCount() modelCount {
	return modelCount{bytes: map[string]int64{}, expiring: map[string]*btree.BTreeG[expiring]{}}
}

// add adds (sign 1) or takes away (-1) e, the entry at key, if it holds a
// model. An entry taken away must be as it was added: a change of its
// TTL takes the old entry away and adds the new one.
func (c modelCount) add(key string, e entry, sign int64) {
	m, ok := e.v.(*Model)
	if !ok || m.Blob == nil {
		return
	}
	if n := c.bytes[m.Owner] + sign*int64(len(m.Blob.Data)); n == 0 {
		delete(c.bytes, m.Owner)
	} else {
		c.bytes[m.Owner] = n
	}
	if e.expireAt == 0 {
		return
	}
	t := c.expiring[m.Owner]
	if sign > 0 {
		if t == nil {
			// Keyspace.mu guards it: the tree's own lock would be a second one.
			t = btree.NewBTreeGOptions(func(a, b expiring) bool {
				return a.at < b.at || (a.at == b.at && a.key < b.key)
			}, btree.Options{NoLocks: true})
			c.expiring[m.Owner] = t
		}
		t.Set(expiring{e.expireAt, key})
		return
	}
	if t != nil {
		t.Delete(expiring{e.expireAt, key})
		if t.Len() == 0 {
			delete(c.expiring, m.Owner)
		}
	}
}

// expiredLocked reports whether a model of owner's has a TTL that has
// passed. Keyspace.mu is held (either side).
func (k *Keyspace) expiredLocked(owner string, now *instant) bool {
	t := k.models.expiring[owner]
	if t == nil {
		return false
	}
	first, ok := t.Min()
	return ok && first.at <= now.at()
}

// expireModelsLocked removes owner's models whose TTL has passed, as
// active expiry would have: they are not journaled (expiry times are
// absolute: a replay expires them by itself), and their values wait in
// dropped for SweepExpired to hand back for release. Keyspace.mu is held
// for writing.
func (k *Keyspace) expireModelsLocked(owner string, now *instant) {
	for k.expiredLocked(owner, now) {
		first, _ := k.models.expiring[owner].Min()
		v, _ := k.deleteLocked(first.key)
		k.dropped = append(k.dropped, v)
	}
}

// ModelBytes is the bytes of the model blobs at owner's keys (a blob that
// several keys share counts at each), but for the model at key except, if
// it is owner's. A model whose TTL has passed does not count: it is
// removed here if active expiry has not removed it yet, as a write to its
// key would.
func (k *Keyspace) ModelBytes(owner, except string) int64 {
	now := k.instant()
	k.mu.RLock()
	if !k.expiredLocked(owner, now) {
		defer k.mu.RUnlock()
		return k.modelBytesLocked(owner, except)
	}
	k.mu.RUnlock()
	k.mu.Lock()
	defer k.mu.Unlock()
	k.expireModelsLocked(owner, now)
	return k.modelBytesLocked(owner, except)
}

// modelBytesLocked is ModelBytes once owner's expired models are gone.
func (k *Keyspace) modelBytesLocked(owner, except string) int64 {
	n := k.models.bytes[owner]
	if e, ok := k.m[except]; ok {
		if m, ok := e.v.(*Model); ok && m.Owner == owner && m.Blob != nil {
			n -= int64(len(m.Blob.Data))
		}
	}
	return n
}
