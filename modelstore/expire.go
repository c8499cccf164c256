package modelstore

// Expiry: per-key TTLs in absolute unix milliseconds, lazy expiry on
// access and active expiry that samples only the keys with a TTL (Redis's
// expires dict and activeExpireCycle).

import "time"

// setTTLLocked records key's expiry (0: none) in ttl.
func (k *Keyspace) setTTLLocked(key string, at int64) {
	if at == 0 {
		delete(k.ttl, key)
	} else {
		k.ttl[key] = at
	}
}

// dropIfExpired queues the value of key, if it is there but expired, for
// the next SweepExpired: a write is about to replace it.
func (k *Keyspace) dropIfExpired(key string, now *instant) {
	if e, ok := k.m[key]; ok && !e.live(now) {
		k.dropped = append(k.dropped, e.v)
	}
}

// SetExpire sets key's absolute expiry in unix ms (0 removes it). It
// returns false if the key does not exist. An expiry in the past deletes
// the key and returns the value removed.
func (k *Keyspace) SetExpire(allow Allow, key string, at int64) (bool, Value, error) {
	return k.SetExpireIf(allow, key, at, nil)
}

// SetExpireIf is SetExpire when cond, given the key's expiry now (0:
// none), allows it (nil: always): the expiry is read and changed in one
// step, under the keyspace's lock, as EXPIRE's NX, XX, GT and LT and
// PERSIST need (two EXPIRE k n NX side by side both set it). allow is
// asked first: another user's key is refused whatever cond would answer.
func (k *Keyspace) SetExpireIf(allow Allow, key string, at int64, cond func(cur int64) bool) (bool, Value, error) {
	now := k.instant()
	k.mu.Lock()
	defer k.mu.Unlock()
	e, ok := k.m[key]
	if !ok || !e.live(now) {
		return false, nil, nil
	}
	if err := k.allowedLocked(allow, now, key); err != nil {
		return false, nil, err
	}
	if cond != nil && !cond(e.expireAt) {
		return false, nil, nil
	}
	k.dirty.Add(1)
	k.touchLocked(key)
	if at != 0 && at <= now.at() {
		k.deleteLocked(key)
		if k.journal != nil {
			k.journal.Delete(key)
		}
		return true, e.v, nil
	}
	if k.journal != nil {
		k.journal.Expire(key, at)
	}
	k.models.add(key, e, -1)
	e.expireAt = at
	k.m[key] = e
	k.models.add(key, e, 1)
	k.setTTLLocked(key, at)
	return true, nil, nil
}

// Expiry returns key's expiry in unix ms (0 = none) and whether it exists.
func (k *Keyspace) Expiry(key string) (int64, bool) {
	now := k.instant()
	k.mu.RLock()
	e, ok := k.m[key]
	k.mu.RUnlock()
	if !ok || !e.live(now) {
		return 0, false
	}
	return e.expireAt, true
}

// Now is the keyspace clock in unix milliseconds.
func (k *Keyspace) Now() int64 { return k.now() }

// Active expiry, as Redis's activeExpireCycle: each SweepExpired samples
// expireSample keys that have a TTL and deletes the expired ones, and
// samples again while more than a quarter of a sample had expired, for
// expireBudget at most. Keys nobody samples yet expire when read (every
// read checks the expiry), so the cost per sweep does not grow with the
// keyspace while memory of expired keys is still reclaimed.
const (
	expireSample = 20
	expireBudget = time.Millisecond
)

// SweepExpired deletes expired keys (a bounded sample of them, above) and
// returns the values removed, including those of expired keys that writes
// or DEL removed meanwhile.
func (k *Keyspace) SweepExpired() []Value {
	now := k.instant()
	start := time.Now()
	k.mu.Lock()
	defer k.mu.Unlock()
	out := k.dropped
	k.dropped = nil
	var ttlSum, ttlN int64
	for len(k.ttl) > 0 {
		sampled, expired := 0, 0
		// Go starts every range over a map at a random place.
		for key, at := range k.ttl {
			if sampled == expireSample {
				break
			}
			sampled++
			if at <= now.at() {
				v, _ := k.deleteLocked(key)
				out = append(out, v)
				expired++
			} else {
				ttlSum, ttlN = ttlSum+at-now.at(), ttlN+1
			}
		}
		if expired*4 <= sampled || time.Since(start) > expireBudget {
			break
		}
	}
	k.noteTTL(ttlSum, ttlN)
	return out
}

// noteTTL folds a sample of live keys' times to live into avgTTL, as
// Redis's activeExpireCycle does: a fiftieth of the new average each
// time, so that one sample moves it little. No key with a TTL: 0.
func (k *Keyspace) noteTTL(sum, n int64) {
	switch avg := k.avgTTL.Load(); {
	case len(k.ttl) == 0:
		k.avgTTL.Store(0)
	case n == 0:
	case avg == 0:
		k.avgTTL.Store(sum / n)
	default:
		k.avgTTL.Store(avg/50*49 + sum/n/50)
	}
}

// AvgTTL is the estimate of the keys' time to live in ms (0: no key has
// one), as INFO keyspace's avg_ttl.
func (k *Keyspace) AvgTTL() int64 { return k.avgTTL.Load() }
