package modelstore

import "sync/atomic"

// KeyWatch is one client's watched keys (Redis's WATCH, optimistic locking):
// Dirty turns true once any of them is written, deleted, renamed from or
// onto, given or stripped of a TTL, flushed or replaced by a loaded
// snapshot, from the moment it is watched. A watched key that held a live
// value and has expired since counts as changed too (Expired): expiry
// happens lazily, without a write to notice.
type KeyWatch struct {
	dirty atomic.Bool
	keys  map[string]bool // key -> live when watched; changed under Keyspace.mu by its client's commands only
}

// Dirty reports whether a watched key has changed.
func (w *KeyWatch) Dirty() bool { return w.dirty.Load() }

// Watching reports whether w watches any key.
func (w *KeyWatch) Watching() bool { return w.keys != nil }

// Watch adds key to w. allow, when not nil, is asked about the key's live
// value: watching another user's value is refused as reading it is.
func (k *Keyspace) Watch(allow Allow, w *KeyWatch, key string) error {
	now := k.instant()
	k.mu.Lock()
	defer k.mu.Unlock()
	e, ok := k.m[key]
	live := ok && e.live(now)
	if live && allow != nil {
		if err := allow(e.v); err != nil {
			return err
		}
	}
	if _, ok := w.keys[key]; ok {
		return nil
	}
	if w.keys == nil {
		w.keys = map[string]bool{}
	}
	w.keys[key] = live
	if k.watchers == nil {
		k.watchers = map[string][]*KeyWatch{}
	}
	k.watchers[key] = append(k.watchers[key], w)
	return nil
}

// Unwatch forgets w's keys and clears its Dirty flag.
func (k *Keyspace) Unwatch(w *KeyWatch) {
	k.mu.Lock()
	for key := range w.keys {
		ws := k.watchers[key]
		for i, x := range ws {
			if x == w {
				ws[i] = ws[len(ws)-1]
				ws = ws[:len(ws)-1]
				break
			}
		}
		if len(ws) == 0 {
			delete(k.watchers, key)
		} else {
			k.watchers[key] = ws
		}
	}
	w.keys = nil
	k.mu.Unlock()
	w.dirty.Store(false)
}

// Expired reports whether a key w watched while it held a live value has
// expired since.
func (k *Keyspace) Expired(w *KeyWatch) bool {
	now := k.instant()
	k.mu.RLock()
	defer k.mu.RUnlock()
	for key, live := range w.keys {
		if e, ok := k.m[key]; live && (!ok || !e.live(now)) {
			return true
		}
	}
	return false
}

// touchLocked marks the watches of key dirty. k.mu is held.
func (k *Keyspace) touchLocked(key string) {
	for _, w := range k.watchers[key] {
		w.dirty.Store(true)
	}
}

// touchAllLocked marks dirty every watch of a key that old held (FLUSHALL,
// a loaded snapshot) or that now holds. k.mu is held.
func (k *Keyspace) touchAllLocked(old map[string]entry) {
	for key, ws := range k.watchers {
		_, was := old[key]
		_, is := k.m[key]
		if was || is {
			for _, w := range ws {
				w.dirty.Store(true)
			}
		}
	}
}
