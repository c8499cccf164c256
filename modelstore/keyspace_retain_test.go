package modelstore

import (
	"slices"
	"testing"
	"time"
)

// ItemsRetained calls retain on every live value it returns, and no delete
// can complete while it runs: a snapshot's references are counted before a
// concurrent DEL releases the value it removed.
func TestItemsRetainedHoldsOffDeletes(t *testing.T) {
	k, c := newTestKeyspace(t, 0)
	m := &other{size: 10}
	for _, key := range []string{"a", "b", "m"} {
		v := Value(newU8(4))
		if key == "m" {
			v = m
		}
		if _, err := k.Set(key, v, false); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := k.Set("gone", newU8(1), false); err != nil {
		t.Fatal(err)
	}
	setExpire(k, "gone", c.ms-1)

	deleted := make(chan []Value, 1)
	var retained []Value
	items := k.ItemsRetained(func(v Value) {
		if len(retained) == 0 {
			go func() { deleted <- del(k, "m") }()
			select {
			case <-deleted:
				t.Error("a delete completed while ItemsRetained was running")
			case <-time.After(20 * time.Millisecond):
			}
		}
		retained = append(retained, v)
	})
	var keys []string
	for _, it := range items {
		keys = append(keys, it.Key)
	}
	slices.Sort(keys)
	if !slices.Equal(keys, []string{"a", "b", "m"}) {
		t.Fatalf("items %v, want a b m (not the expired key)", keys)
	}
	if len(retained) != len(items) || !slices.Contains(retained, Value(m)) {
		t.Fatalf("retain called on %d values for %d items", len(retained), len(items))
	}
	select {
	case vs := <-deleted:
		if len(vs) != 1 || vs[0] != Value(m) {
			t.Fatalf("delete removed %v", vs)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("delete still blocked after ItemsRetained returned")
	}
	if got := k.Items(); len(got) != 2 {
		t.Fatalf("Items after delete: %d items, want 2", len(got))
	}
}
