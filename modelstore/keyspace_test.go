package modelstore

import (
	"errors"
	"fmt"
	"maps"
	"math/rand"
	"slices"
	"strconv"
	"testing"
)

// other is a value of another type than a tensor (a model, for the keyspace).
type other struct{ size int64 }

func (o *other) TypeName() string { return "AI__MODEL" }
func (o *other) MemSize() int64   { return o.size }

func newU8(n int) *Tensor {
	return &Tensor{DType: Uint8, Shape: []int64{int64(n)}, Data: make([]byte, n)}
}

// clock is a fake keyspace clock.
type clock struct{ ms int64 }

func (c *clock) now() int64 { return c.ms }

func newTestKeyspace(t *testing.T, maxmemory int64) (*Keyspace, *clock) {
	t.Helper()
	k := NewKeyspace(func() int64 { return maxmemory })
	c := &clock{ms: 1_000_000}
	k.now = c.now
	t.Cleanup(func() { checkAccounting(t, k) })
	return k, c
}

// checkAccounting verifies the keyspace's counters against its map: Used
// is the sum of the entries' sizes and the TTL count is the number of
// entries with an expiry.
func checkAccounting(t *testing.T, k *Keyspace) {
	t.Helper()
	k.mu.RLock()
	defer k.mu.RUnlock()
	var used int64
	expires := 0
	for key, e := range k.m {
		used += entrySize(key, e.v)
		if e.expireAt != 0 {
			expires++
			if at, ok := k.ttl[key]; !ok || at != e.expireAt {
				t.Errorf("ttl[%q] = %d, %v; the entry expires at %d", key, at, ok, e.expireAt)
			}
		}
		if _, ok := k.order.Get(slot{k.scanHash(key), key}); !ok {
			t.Errorf("key %q is missing from the SCAN order", key)
		}
	}
	if got := k.Used(); got != used {
		t.Errorf("Used() = %d, entries add up to %d", got, used)
	}
	if len(k.ttl) != expires {
		t.Errorf("ttl holds %d keys, entries with a TTL: %d", len(k.ttl), expires)
	}
	if k.order.Len() != len(k.m) {
		t.Errorf("SCAN order holds %d keys, the map %d", k.order.Len(), len(k.m))
	}
	models := newModelCount()
	for key, e := range k.m {
		models.add(key, e, 1)
	}
	if !maps.Equal(k.models.bytes, models.bytes) {
		t.Errorf("model bytes by owner %v, the entries' models add up to %v", k.models.bytes, models.bytes)
	}
	if got, want := expiringModels(k.models), expiringModels(models); !maps.EqualFunc(got, want, slices.Equal) {
		t.Errorf("models with a TTL by owner %v, the entries hold %v", got, want)
	}
}

// expiringModels lists c's models with a TTL by owner, in order of expiry.
func expiringModels(c modelCount) map[string][]expiring {
	out := map[string][]expiring{}
	for owner, tr := range c.expiring {
		out[owner] = tr.Items()
	}
	return out
}

func TestSetSameType(t *testing.T) {
	k, _ := newTestKeyspace(t, 0)
	t1, t2, m := newU8(1), newU8(2), &other{100}
	if old, err := k.Set("t", t1, true); err != nil || old != nil {
		t.Fatalf("first Set: %v %v", old, err)
	}
	if old, err := k.Set("t", t2, true); err != nil || old != t1 {
		t.Fatalf("replacing a tensor: old %v, %v", old, err)
	}
	if _, err := k.Set("m", m, true); err != nil {
		t.Fatal(err)
	}
	if _, err := k.Set("m", t1, true); !errors.Is(err, ErrWrongType) {
		t.Fatalf("a tensor onto a model: %v, want ErrWrongType", err)
	}
	if v, _ := k.Get("m"); v != m {
		t.Fatal("a refused Set changed the key")
	}
	if _, err := k.GetTensor("m"); !errors.Is(err, ErrWrongType) {
		t.Fatalf("GetTensor of a model: %v", err)
	}
	if _, err := k.GetTensor("none"); !errors.Is(err, ErrNoTensor) {
		t.Fatalf("GetTensor of nothing: %v", err)
	}
	if old, err := k.Set("m", t1, false); err != nil || old != m {
		t.Fatalf("Set without the type check: old %v, %v", old, err)
	}
	if got, _ := k.GetTensor("m"); got != t1 {
		t.Fatal("Set without the type check did not replace")
	}
}

// A Set clears the key's TTL, as Redis's SET does.
func TestSetClearsTTL(t *testing.T) {
	k, c := newTestKeyspace(t, 0)
	k.Set("t", newU8(1), true)
	setExpire(k, "t", c.ms+1000)
	k.Set("t", newU8(2), true)
	if at, ok := k.Expiry("t"); !ok || at != 0 {
		t.Fatalf("Expiry after Set = %d %v, want none", at, ok)
	}
	if _, exp := k.Len(); exp != 0 {
		t.Fatalf("%d keys with a TTL, want 0", exp)
	}
}

func TestSetManyAllOrNothing(t *testing.T) {
	k, _ := newTestKeyspace(t, 0)
	k.Set("m", &other{10}, false)
	a, b := newU8(1), newU8(2)
	_, err := k.SetMany([]Write{{Key: "a", Value: a, SameType: true}, {Key: "m", Value: b, SameType: true}})
	if !errors.Is(err, ErrWrongType) {
		t.Fatalf("got %v, want ErrWrongType", err)
	}
	if _, ok := k.Get("a"); ok {
		t.Fatal("the first write of a refused SetMany was applied")
	}
	k.Set("a", a, true)
	old, err := k.SetMany([]Write{{Key: "a", Value: b, SameType: true}, {Key: "new", Value: a, SameType: true}})
	if err != nil || len(old) != 2 || old[0] != a || old[1] != nil {
		t.Fatalf("SetMany: %v %v", old, err)
	}
}

func TestMaxMemory(t *testing.T) {
	limit := entrySize("a", newU8(100)) + entrySize("b", newU8(100))
	k, _ := newTestKeyspace(t, limit)
	if _, err := k.Set("a", newU8(100), true); err != nil {
		t.Fatal(err)
	}
	if _, err := k.Set("b", newU8(100), true); err != nil {
		t.Fatalf("exactly at maxmemory: %v", err)
	}
	used := k.Used()
	if used != limit {
		t.Fatalf("Used() = %d, want %d", used, limit)
	}
	if _, err := k.Set("c", newU8(0), true); !errors.Is(err, ErrOOM) {
		t.Fatalf("past maxmemory: %v, want ErrOOM", err)
	}
	if _, err := k.Set("a", newU8(101), true); !errors.Is(err, ErrOOM) {
		t.Fatalf("growing a value past maxmemory: %v, want ErrOOM", err)
	}
	_, err := k.SetMany([]Write{{Key: "a", Value: newU8(10)}, {Key: "c", Value: newU8(200)}})
	if !errors.Is(err, ErrOOM) {
		t.Fatalf("SetMany past maxmemory: %v, want ErrOOM", err)
	}
	if k.Used() != used || len(k.Items()) != 2 {
		t.Fatal("a refused write changed the keyspace")
	}
	if got, _ := k.GetTensor("a"); len(got.Data) != 100 {
		t.Fatal("a refused SetMany replaced a value")
	}
	// Writes that shrink memory pass even over the limit.
	if _, err := k.Set("a", newU8(50), true); err != nil {
		t.Fatalf("shrinking a value: %v", err)
	}
	if err := k.CheckMemory(50); err != nil {
		t.Fatalf("CheckMemory within the limit: %v", err)
	}
	if err := k.CheckMemory(51); !errors.Is(err, ErrOOM) {
		t.Fatalf("CheckMemory past the limit: %v", err)
	}
}

func TestExpiry(t *testing.T) {
	k, c := newTestKeyspace(t, 0)
	v := newU8(3)
	k.Set("k", v, true)
	k.Set("p", newU8(1), true)
	if ok, _ := setExpire(k, "none", c.ms+10); ok {
		t.Fatal("SetExpire on a missing key")
	}
	if ok, removed := setExpire(k, "k", c.ms+100); !ok || removed != nil {
		t.Fatal("SetExpire in the future")
	}
	if at, ok := k.Expiry("k"); !ok || at != c.ms+100 {
		t.Fatalf("Expiry = %d %v", at, ok)
	}
	if n, exp := k.Len(); n != 2 || exp != 1 {
		t.Fatalf("Len = %d, %d", n, exp)
	}
	c.ms += 99
	if _, ok := k.Get("k"); !ok {
		t.Fatal("expired a millisecond early")
	}
	c.ms++
	if _, ok := k.Get("k"); ok {
		t.Fatal("still there at its expiry time")
	}
	if _, ok := k.Expiry("k"); ok {
		t.Fatal("Expiry of an expired key")
	}
	if ok, _ := setExpire(k, "k", 0); ok {
		t.Fatal("PERSIST revived an expired key")
	}
	if _, err := k.Rename(nil, "k", "k2"); !errors.Is(err, ErrNoKey) {
		t.Fatalf("Rename of an expired key: %v", err)
	}
	if items := k.Items(); len(items) != 1 || items[0].Key != "p" {
		t.Fatalf("Items = %v", items)
	}
	if n, _ := k.Len(); n != 2 {
		t.Fatalf("Len counts expired keys until they are swept, as Redis does; got %d", n)
	}
	if swept := k.SweepExpired(); len(swept) != 1 || swept[0] != v {
		t.Fatalf("SweepExpired = %v", swept)
	}
	if n, exp := k.Len(); n != 1 || exp != 0 {
		t.Fatalf("after the sweep: Len %d %d", n, exp)
	}
	// An expiry at or before now deletes at once and hands the value back.
	pv, _ := k.Get("p")
	if ok, removed := setExpire(k, "p", c.ms); !ok || removed != pv {
		t.Fatalf("SetExpire in the past: %v %v", ok, removed)
	}
	if n, _ := k.Len(); n != 0 {
		t.Fatal("not deleted")
	}
	// Removing a TTL.
	k.Set("q", newU8(1), true)
	setExpire(k, "q", c.ms+5)
	if ok, _ := setExpire(k, "q", 0); !ok {
		t.Fatal("PERSIST")
	}
	c.ms += 10
	if _, ok := k.Get("q"); !ok {
		t.Fatal("a persisted key expired")
	}
	if _, exp := k.Len(); exp != 0 {
		t.Fatalf("%d keys with a TTL after PERSIST", exp)
	}
}

func TestRenameKeepsTTL(t *testing.T) {
	k, c := newTestKeyspace(t, 0)
	v, w := newU8(1), newU8(2)
	k.Set("src", v, true)
	setExpire(k, "src", c.ms+500)
	k.Set("dst", w, true)
	replaced, err := k.Rename(nil, "src", "destination")
	if err != nil || replaced != nil {
		t.Fatalf("Rename: %v %v", replaced, err)
	}
	if at, ok := k.Expiry("destination"); !ok || at != c.ms+500 {
		t.Fatalf("renamed key's expiry = %d %v, want %d", at, ok, c.ms+500)
	}
	if _, ok := k.Get("src"); ok {
		t.Fatal("the source is still there")
	}
	if replaced, err = k.Rename(nil, "destination", "dst"); err != nil || replaced != w {
		t.Fatalf("Rename onto a key: replaced %v, %v", replaced, err)
	}
	if got, _ := k.Get("dst"); got != v {
		t.Fatal("Rename did not move the value")
	}
	if replaced, err = k.Rename(nil, "dst", "dst"); err != nil || replaced != nil {
		t.Fatalf("Rename onto itself: %v %v", replaced, err)
	}
	if at, _ := k.Expiry("dst"); at != c.ms+500 {
		t.Fatal("Rename onto itself lost the TTL")
	}
	if _, err := k.Rename(nil, "none", "x"); !errors.Is(err, ErrNoKey) {
		t.Fatalf("Rename of a missing key: %v", err)
	}
	if n, exp := k.Len(); n != 1 || exp != 1 {
		t.Fatalf("Len = %d, %d", n, exp)
	}
}

func TestDeleteAndDeleteIf(t *testing.T) {
	k, c := newTestKeyspace(t, 0)
	a, b := newU8(1), newU8(1)
	k.Set("a", a, true)
	k.Set("b", b, true)
	if got := del(k, "a", "none", "a"); len(got) != 1 || got[0] != a {
		t.Fatalf("Delete = %v", got)
	}
	if k.DeleteIf("b", a) {
		t.Fatal("DeleteIf with another value")
	}
	if !k.DeleteIf("b", b) {
		t.Fatal("DeleteIf with the value")
	}
	// An expired key counts as absent.
	k.Set("e", newU8(1), true)
	setExpire(k, "e", c.ms+1)
	c.ms += 1
	if got := del(k, "e"); len(got) != 0 {
		t.Fatalf("Delete of an expired key reported %v", got)
	}
}

// Every value that leaves the keyspace, however it leaves, is handed back
// exactly once by the call that removed it or by the next SweepExpired, so
// that the server can release it (a model's reference to its session).
func TestEveryRemovedValueIsHandedBack(t *testing.T) {
	k, c := newTestKeyspace(t, 0)
	rng := rand.New(rand.NewSource(1))
	live := map[Value]bool{} // values stored and not yet handed back
	back := func(op string, vs ...Value) {
		for _, v := range vs {
			if v == nil {
				continue
			}
			if !live[v] {
				t.Fatalf("%s handed back %p, which is not stored or was handed back already", op, v)
			}
			delete(live, v)
		}
	}
	key := func() string { return "k" + strconv.Itoa(rng.Intn(8)) }
	for i := 0; i < 5000; i++ {
		switch rng.Intn(8) {
		case 0, 1:
			v := newU8(rng.Intn(4))
			old, err := k.Set(key(), v, false)
			if err != nil {
				t.Fatal(err)
			}
			live[v] = true
			back("Set", old)
		case 2:
			ws := []Write{{Key: key(), Value: newU8(1)}, {Key: key() + "x", Value: &other{3}}}
			old, err := k.SetMany(ws)
			if err != nil {
				t.Fatal(err)
			}
			live[ws[0].Value], live[ws[1].Value] = true, true
			back("SetMany", old...)
		case 3:
			back("Delete", del(k, key(), key())...)
		case 4:
			if replaced, err := k.Rename(nil, key(), key()); err == nil {
				back("Rename", replaced)
			}
		case 5:
			_, removed := setExpire(k, key(), c.ms+int64(rng.Intn(5))-1)
			back("SetExpire", removed)
		case 6:
			c.ms += int64(rng.Intn(3))
		case 7:
			if rng.Intn(10) == 0 {
				back("SweepExpired", k.SweepExpired()...)
			}
		}
	}
	back("SweepExpired", k.SweepExpired()...)
	back("Flush", flush(k)...)
	if len(live) != 0 {
		t.Fatalf("%d values left the keyspace without being handed back", len(live))
	}
}

func TestScanCoversEveryKeyOnce(t *testing.T) {
	k, _ := newTestKeyspace(t, 0)
	const n = 1000
	for i := 0; i < n; i++ {
		k.Set(fmt.Sprintf("key:%d", i), newU8(0), true)
	}
	all := func(Item) bool { return true }
	for _, count := range []int{1, 7, 10, 999, 1000, 5000} {
		seen := map[string]int{}
		cursor, calls := uint64(0), 0
		for {
			keys, next := k.Scan(cursor, count, all)
			calls++
			if len(keys) > count {
				t.Fatalf("COUNT %d: a page of %d keys", count, len(keys))
			}
			for _, key := range keys {
				seen[key]++
			}
			if next == 0 {
				break
			}
			if next <= cursor {
				t.Fatalf("COUNT %d: cursor went from %d to %d", count, cursor, next)
			}
			cursor = next
		}
		if len(seen) != n {
			t.Fatalf("COUNT %d: %d keys seen, want %d", count, len(seen), n)
		}
		for key, times := range seen {
			if times != 1 {
				t.Fatalf("COUNT %d: %s seen %d times", count, key, times)
			}
		}
		if want := (n + count - 1) / count; calls != want {
			t.Errorf("COUNT %d: %d calls, want %d", count, calls, want)
		}
	}
}

// Keys present for the whole scan are returned even when others come and
// go between the calls; filtered keys still count towards COUNT.
func TestScanUnderChanges(t *testing.T) {
	k, c := newTestKeyspace(t, 0)
	for i := 0; i < 300; i++ {
		k.Set(fmt.Sprintf("stay:%d", i), newU8(0), true)
	}
	seen := map[string]bool{}
	cursor, i := uint64(0), 0
	for {
		keys, next := k.Scan(cursor, 10, func(it Item) bool { return it.Key[:4] == "stay" })
		for _, key := range keys {
			seen[key] = true
		}
		// Churn: add, delete and expire other keys.
		k.Set(fmt.Sprintf("tmp:%d", i), newU8(0), true)
		del(k, fmt.Sprintf("tmp:%d", i-3))
		setExpire(k, fmt.Sprintf("tmp:%d", i-1), c.ms+1)
		c.ms++
		i++
		if next == 0 {
			break
		}
		cursor = next
	}
	if len(seen) != 300 {
		t.Fatalf("%d of 300 stable keys seen", len(seen))
	}
	if keys, next := k.Scan(1<<62, 10, func(Item) bool { return true }); len(keys) != 0 || next != 0 {
		t.Fatalf("a cursor past every key: %v %d", keys, next)
	}
}

func TestFlushAndReplaceAccounting(t *testing.T) {
	k, c := newTestKeyspace(t, 0)
	var want int64
	for i := 0; i < 10; i++ {
		key := "k" + strconv.Itoa(i)
		v := newU8(i * 10)
		k.Set(key, v, true)
		want += entrySize(key, v)
	}
	setExpire(k, "k1", c.ms+100)
	if k.Used() != want {
		t.Fatalf("Used() = %d, want %d", k.Used(), want)
	}
	if k.Dirty() == 0 {
		t.Fatal("writes did not count as changes")
	}
	if old := flush(k); len(old) != 10 || k.Used() != 0 {
		t.Fatalf("Flush returned %d values, Used() %d", len(old), k.Used())
	}
	if n, exp := k.Len(); n != 0 || exp != 0 {
		t.Fatalf("after Flush: Len %d %d", n, exp)
	}
	k.Set("before", newU8(5), true)
	items := []Item{
		{Key: "a", Value: newU8(7)},
		{Key: "b", Value: &other{100}, ExpireAt: c.ms + 1000},
	}
	old := k.Replace(items)
	if len(old) != 1 {
		t.Fatalf("Replace returned %d values, want 1", len(old))
	}
	if want := entrySize("a", items[0].Value) + entrySize("b", items[1].Value); k.Used() != want {
		t.Fatalf("Used() after Replace = %d, want %d", k.Used(), want)
	}
	if n, exp := k.Len(); n != 2 || exp != 1 || k.Dirty() != 0 {
		t.Fatalf("after Replace: Len %d %d, Dirty %d", n, exp, k.Dirty())
	}
	if got := k.SortedKeys(func(Item) bool { return true }); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("SortedKeys = %v", got)
	}
	del(k, "a")
	k.Rename(nil, "b", "bb")
	if want := entrySize("bb", items[1].Value); k.Used() != want {
		t.Fatalf("Used() after Delete and Rename = %d, want %d", k.Used(), want)
	}
}

func newOwnedModel(owner string, n int) *Model {
	return &Model{ModelMeta: ModelMeta{Owner: owner}, Blob: &Blob{Data: make([]byte, n)}}
}

// ModelBytes is each owner's model bytes, kept in step with every change
// (checkAccounting checks them after every keyspace test), the model at
// the key excepted only when it is the owner's.
func TestModelBytes(t *testing.T) {
	k, c := newTestKeyspace(t, 0)
	want := func(owner, except string, n int64) {
		t.Helper()
		if got := k.ModelBytes(owner, except); got != n {
			t.Errorf("ModelBytes(%q, %q) = %d, want %d", owner, except, got, n)
		}
	}
	k.Set("a1", newOwnedModel("alice", 100), true)
	k.Set("a2", newOwnedModel("alice", 30), true)
	k.Set("b1", newOwnedModel("bob", 7), true)
	k.Set("t", newU8(1000), true)
	want("alice", "", 130)
	want("alice", "a2", 100)
	want("alice", "b1", 130) // bob's model is not alice's to replace
	want("bob", "", 7)
	want("carol", "", 0)
	k.Set("a1", newOwnedModel("alice", 10), true) // replaced
	want("alice", "", 40)
	k.Rename(nil, "a2", "b1") // alice's model over bob's
	want("alice", "", 40)
	want("bob", "", 0)
	del(k, "a1")
	want("alice", "", 30)
	// An expired model stops counting as its TTL passes, before active
	// expiry finds it: ModelBytes removes it, for the sweep to release.
	setExpire(k, "b1", c.ms+10)
	k.Set("a3", newOwnedModel("alice", 5), true)
	setExpire(k, "a3", c.ms+1000)
	want("alice", "", 35)
	c.ms += 20
	want("alice", "", 5)
	if _, ok := k.Expiry("b1"); ok {
		t.Error("the expired model is still there")
	}
	if keys, expires := k.Len(); keys != 2 || expires != 1 {
		t.Errorf("Len() = %d keys, %d with a TTL; want 2 (t, a3), 1", keys, expires)
	}
	if got := k.SweepExpired(); len(got) != 1 {
		t.Errorf("SweepExpired() = %v, want the expired model, for release", got)
	} else if m, ok := got[0].(*Model); !ok || len(m.Blob.Data) != 30 {
		t.Errorf("SweepExpired() = %v, want the expired model of 30 bytes", got)
	}
	setExpire(k, "a3", 0) // persisted: no longer expiring
	c.ms += 2000
	want("alice", "", 5)
	del(k, "a3")
	k.Set("m", newOwnedModel("", 5), true)
	k.Replace([]Item{{Key: "x", Value: newOwnedModel("bob", 3)}, {Key: "y", Value: newOwnedModel("bob", 4)}})
	want("", "", 0)
	want("bob", "", 7)
	flush(k)
	want("bob", "", 0)
}

// The keyspace operations with no Allow, as most tests use them.
func del(k *Keyspace, keys ...string) []Value {
	v, _ := k.Delete(nil, keys...)
	return v
}

func setExpire(k *Keyspace, key string, at int64) (bool, Value) {
	ok, v, _ := k.SetExpire(nil, key, at)
	return ok, v
}

func flush(k *Keyspace) []Value {
	v, _ := k.Flush(nil)
	return v
}

// An Allow that refuses one value stops every operation that would touch
// it, whole: nothing changes.
func TestAllowRefusesWhole(t *testing.T) {
	k, c := newTestKeyspace(t, 0)
	guarded, free := &other{size: 10}, newU8(4)
	k.Set("g", guarded, false)
	k.Set("f", free, false)
	errNo := errors.New("not yours")
	allow := func(v Value) error {
		if v == guarded {
			return errNo
		}
		return nil
	}
	if _, err := k.Delete(allow, "f", "g"); err != errNo {
		t.Errorf("Delete: %v", err)
	}
	if _, err := k.Rename(allow, "f", "g"); err != errNo {
		t.Errorf("Rename onto it: %v", err)
	}
	if _, err := k.Rename(allow, "g", "h"); err != errNo {
		t.Errorf("Rename it: %v", err)
	}
	if _, _, err := k.SetExpire(allow, "g", c.ms+10); err != errNo {
		t.Errorf("SetExpire: %v", err)
	}
	if _, err := k.Flush(allow); err != errNo {
		t.Errorf("Flush: %v", err)
	}
	if _, err := k.SetMany([]Write{{Key: "f", Value: newU8(1)}, {Key: "g", Value: newU8(1), Allow: allow}}); err != errNo {
		t.Errorf("SetMany: %v", err)
	}
	if v, _ := k.Get("g"); v != guarded {
		t.Error("the guarded value changed")
	}
	if v, _ := k.Get("f"); v != free {
		t.Error("a value beside it changed")
	}
	if exp, _ := k.Expiry("g"); exp != 0 {
		t.Error("the guarded value got a TTL")
	}
	// What allow lets through still works.
	if got, err := k.Delete(allow, "f", "none"); err != nil || len(got) != 1 {
		t.Errorf("Delete of an allowed key: %v %v", got, err)
	}
}

// Active expiry samples: one sweep over a keyspace where most keys with a
// TTL have expired removes many of them (it samples again while a quarter
// of a sample had expired), repeated sweeps remove them all, and keys that
// have not expired, or have no TTL, stay.
func TestSweepExpiredSamples(t *testing.T) {
	k, c := newTestKeyspace(t, 0)
	for i := range 1000 {
		key := strconv.Itoa(i)
		k.Set(key, newU8(1), false)
		switch {
		case i < 900:
			setExpire(k, key, c.ms+10) // will expire
		case i < 950:
			setExpire(k, key, c.ms+1_000_000)
		}
	}
	c.ms += 100
	first := len(k.SweepExpired())
	if first < 2*expireSample {
		t.Errorf("first sweep removed %d keys; it should sample again while most are expired", first)
	}
	total := first
	for range 1000 {
		total += len(k.SweepExpired())
	}
	if total != 900 {
		t.Fatalf("sweeps removed %d keys, want the 900 expired", total)
	}
	if n, ttl := k.Len(); n != 100 || ttl != 50 {
		t.Fatalf("Len = %d keys, %d with a TTL; want 100, 50", n, ttl)
	}
}

// The keyspace costs of issue 11: SCAN and active expiry per call at 10k
// and 1M keys (make bench, bench/run.sh go). Both should be flat.
func BenchmarkKeyspaceScan(b *testing.B) {
	for _, n := range []int{10_000, 1_000_000} {
		k := filledKeyspace(n, false)
		b.Run(strconv.Itoa(n)+"keys", func(b *testing.B) {
			var cursor uint64
			for b.Loop() {
				_, cursor = k.Scan(cursor, 10, func(Item) bool { return true })
			}
		})
	}
}

func BenchmarkKeyspaceSweepExpired(b *testing.B) {
	for _, n := range []int{10_000, 1_000_000} {
		k := filledKeyspace(n, true)
		b.Run(strconv.Itoa(n)+"keys", func(b *testing.B) {
			for b.Loop() {
				k.SweepExpired()
			}
		})
	}
}

// filledKeyspace holds n one-byte tensors; with ttl, each expires in an
// hour (so a sweep finds nothing to delete and must not walk them all).
func filledKeyspace(n int, ttl bool) *Keyspace {
	k := NewKeyspace(nil)
	t := newU8(1)
	at := k.Now() + 3_600_000
	for i := range n {
		key := "key:" + strconv.Itoa(i)
		k.Set(key, t, false)
		if ttl {
			k.SetExpire(nil, key, at)
		}
	}
	return k
}

func TestKeyWatch(t *testing.T) {
	k := NewKeyspace(nil)
	clock := int64(1000)
	k.now = func() int64 { return clock }
	tensor := func() Value { return &Tensor{} }
	k.Set("a", tensor(), false)
	k.Set("b", tensor(), false)
	watched := func(keys ...string) *KeyWatch {
		w := &KeyWatch{}
		for _, key := range keys {
			if err := k.Watch(nil, w, key); err != nil {
				t.Fatal(err)
			}
		}
		return w
	}
	for _, c := range []struct {
		name    string
		keys    []string
		change  func()
		changed bool
	}{
		{"nothing", []string{"a"}, func() {}, false},
		{"set", []string{"a"}, func() { k.Set("a", tensor(), false) }, true},
		{"another key", []string{"a"}, func() { k.Set("b", tensor(), false) }, false},
		{"created", []string{"new"}, func() { k.Set("new", tensor(), false) }, true},
		{"deleted", []string{"new"}, func() { k.Delete(nil, "new") }, true},
		{"absent deleted", []string{"new"}, func() { k.Delete(nil, "new") }, false},
		{"renamed onto", []string{"a"}, func() { k.Rename(nil, "b", "a") }, true},
		{"renamed from", []string{"a"}, func() { k.Rename(nil, "a", "b") }, true},
		{"ttl", []string{"b"}, func() { k.SetExpire(nil, "b", clock+10) }, true},
		{"expired", []string{"b"}, func() { clock += 20 }, true},
		{"flushed absent", []string{"zz"}, func() { k.Flush(nil) }, false},
	} {
		w := watched(c.keys...)
		c.change()
		if got := w.Dirty() || k.Expired(w); got != c.changed {
			t.Errorf("%s: changed %v, want %v", c.name, got, c.changed)
		}
		k.Unwatch(w)
		if w.Dirty() || w.Watching() {
			t.Errorf("%s: still watching after Unwatch", c.name)
		}
	}
	k.Set("c", tensor(), false)
	w := watched("c")
	k.Flush(nil)
	if !w.Dirty() {
		t.Error("flush of a watched key")
	}
	k.Unwatch(w)
	if len(k.watchers) != 0 {
		t.Errorf("watchers left: %v", k.watchers)
	}
	// Watching another user's value is refused.
	k.Set("d", tensor(), false)
	if err := k.Watch(func(Value) error { return ErrNoKey }, &KeyWatch{}, "d"); err != ErrNoKey {
		t.Errorf("watch refused by allow: %v", err)
	}
}

// AvgTTL follows the active expiry's samples, as Redis's avg_ttl: the keys'
// time to live, and 0 once no key has one (operator review: always 0).
func TestAvgTTL(t *testing.T) {
	k, c := newTestKeyspace(t, 0)
	if k.SweepExpired(); k.AvgTTL() != 0 {
		t.Fatalf("no TTL: %d", k.AvgTTL())
	}
	for i := range 10 {
		key := fmt.Sprint("k", i)
		k.Set(key, newU8(1), true)
		setExpire(k, key, c.ms+100_000)
	}
	k.SweepExpired()
	if got := k.AvgTTL(); got != 100_000 {
		t.Fatalf("first sample: %d, want 100000", got)
	}
	c.ms += 50_000
	for range 100 {
		k.SweepExpired()
	}
	if got := k.AvgTTL(); got <= 50_000 || got >= 100_000 {
		t.Fatalf("after 50 s: %d, want between the old 100000 and the new 50000", got)
	}
	for i := range 10 {
		setExpire(k, fmt.Sprint("k", i), 0)
	}
	if k.SweepExpired(); k.AvgTTL() != 0 {
		t.Fatalf("no TTL left: %d", k.AvgTTL())
	}
}

// callJournal records the journal calls, in order; Check refuses the key
// refuse.
type callJournal struct {
	calls  []string
	refuse string
}

func (j *callJournal) Set(k string, _ Value)    { j.calls = append(j.calls, "set "+k) }
func (j *callJournal) Delete(k string)          { j.calls = append(j.calls, "del "+k) }
func (j *callJournal) Expire(k string, _ int64) { j.calls = append(j.calls, "expire "+k) }
func (j *callJournal) Rename(a, b string)       { j.calls = append(j.calls, "rename "+a+" "+b) }
func (j *callJournal) Flush()                   { j.calls = append(j.calls, "flush") }
func (j *callJournal) Check(k string, _ Value) error {
	if k == j.refuse {
		return errRefused
	}
	return nil
}
func (j *callJournal) Begin() { j.calls = append(j.calls, "begin") }
func (j *callJournal) End()   { j.calls = append(j.calls, "end") }

// An update of several keys is one atomic unit of the journal (a replay
// applies all of it or none); an update of one key needs no unit.
func TestMultiKeyUpdatesAreJournaledAsOneUnit(t *testing.T) {
	k, _ := newTestKeyspace(t, 0)
	j := &callJournal{}
	k.SetJournal(j)
	check := func(what string, want ...string) {
		t.Helper()
		if !slices.Equal(j.calls, want) {
			t.Errorf("%s: journal heard %q, want %q", what, j.calls, want)
		}
		j.calls = nil
	}
	if _, err := k.SetMany([]Write{{Key: "a", Value: newU8(1)}, {Key: "b", Value: newU8(1)}}); err != nil {
		t.Fatal(err)
	}
	check("SetMany", "begin", "set a", "set b", "end")
	if err := k.Apply([]Write{{Key: "c", Value: newU8(1)}}); err != nil {
		t.Fatal(err)
	}
	check("Apply of one key", "set c")
	if _, err := k.Delete(nil, "a", "b", "missing"); err != nil {
		t.Fatal(err)
	}
	check("Delete", "begin", "del a", "del b", "end")
	if _, err := k.Delete(nil, "c"); err != nil {
		t.Fatal(err)
	}
	check("Delete of one key", "del c")
}

var errRefused = errors.New("refused")

// A value the journal cannot record is refused before anything changes,
// not found out by the journal once the change is made (the log then
// dropped its record, though the write was acknowledged): a SetMany of
// which one key is refused stores none, and a RENAME onto a refused key
// moves nothing.
func TestJournalCheckRefusesBeforeAnyChange(t *testing.T) {
	k, _ := newTestKeyspace(t, 0)
	j := &callJournal{refuse: "bad"}
	k.SetJournal(j)
	if _, err := k.SetMany([]Write{{Key: "a", Value: newU8(1)}, {Key: "bad", Value: newU8(1)}}); err != errRefused {
		t.Fatalf("SetMany: %v", err)
	}
	if err := k.Apply([]Write{{Key: "bad", Value: newU8(1)}}); err != errRefused {
		t.Fatalf("Apply: %v", err)
	}
	if n, _ := k.Len(); n != 0 || len(j.calls) != 0 {
		t.Fatalf("%d keys, journal heard %q; want nothing changed", n, j.calls)
	}
	if err := k.Apply([]Write{{Key: "a", Value: newU8(1)}}); err != nil {
		t.Fatal(err)
	}
	j.calls = nil
	if _, err := k.Rename(nil, "a", "bad"); err != errRefused {
		t.Fatalf("Rename: %v", err)
	}
	if _, ok := k.Get("a"); !ok || len(j.calls) != 0 {
		t.Fatalf("a renamed onto a refused key: journal heard %q", j.calls)
	}
}
