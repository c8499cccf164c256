package modelstore

import (
	"bytes"
	"testing"
	"time"
)

func TestBlobClass(t *testing.T) {
	for _, n := range []int{-1, 0, maxPooled + 1, 1 << 20} {
		if _, _, ok := blobClass(n); ok || PooledSize(n) {
			t.Errorf("size %d is pooled", n)
		}
	}
	prevClass, prevSize := -1, 0
	for n := 1; n <= maxPooled; n++ {
		class, size, ok := blobClass(n)
		if !ok || class < 0 || class >= numClasses {
			t.Fatalf("size %d: class %d, ok %v", n, class, ok)
		}
		if size < n || (n > minPooled && size-n > n/16) {
			t.Fatalf("size %d: class size %d", n, size)
		}
		// Classes grow with the size, and a class's own size is in it.
		if class < prevClass || (class == prevClass) != (size == prevSize) {
			t.Fatalf("size %d: class %d of %d after class %d of %d", n, class, size, prevClass, prevSize)
		}
		if c, s, _ := blobClass(size); c != class || s != size {
			t.Fatalf("size %d: its class size %d is in class %d of %d", n, size, c, s)
		}
		prevClass, prevSize = class, size
	}
	if prevClass != numClasses-1 {
		t.Fatalf("last class %d of %d", prevClass, numClasses)
	}
}

// blobOf returns a pooled buffer holding b.
func blobOf(b []byte) []byte {
	buf := BlobBuffer(len(b))
	if len(buf) != len(b) || cap(buf) != len(b) {
		panic("BlobBuffer: wrong length or capacity")
	}
	copy(buf, b)
	return buf
}

// held stores a tensor of a pooled buffer of n bytes of v at key.
func held(t *testing.T, k *Keyspace, key string, n int, v byte) *Tensor {
	t.Helper()
	x, err := NewTensorFromBuffer(Uint8, []int64{int64(n)}, blobOf(bytes.Repeat([]byte{v}, n)))
	if err != nil || x.hold == nil {
		t.Fatalf("NewTensorFromBuffer: %v, hold %v", err, x.hold)
	}
	if err := k.Apply([]Write{{Key: key, Value: x, SameType: true}}); err != nil {
		t.Fatal(err)
	}
	return x
}

// intact reports whether x still holds n bytes of v.
func intact(x *Tensor, n int, v byte) bool { return bytes.Equal(x.Data, bytes.Repeat([]byte{v}, n)) }

type holdingJournal struct{ held []*Tensor }

func (j *holdingJournal) Set(_ string, v Value) {
	if t, ok := v.(*Tensor); ok {
		t.Hold()
		j.held = append(j.held, t)
	}
}
func (*holdingJournal) Delete(string)             {}
func (*holdingJournal) Expire(string, int64)      {}
func (*holdingJournal) Rename(string, string)     {}
func (*holdingJournal) Flush()                    {}
func (*holdingJournal) Check(string, Value) error { return nil }
func (*holdingJournal) Begin()                    {}
func (*holdingJournal) End()                      {}

// A replaced tensor's buffer is recycled only once nothing holds it, and
// never after a reader that does not count its hold had it.
func TestTensorBufferRecycling(t *testing.T) {
	const n = 3136
	k := NewKeyspace(nil)

	// Replaced by Apply, held by nothing else: recycled, its Data gone.
	a := held(t, k, "t", n, 1)
	held(t, k, "t", n, 2)
	if a.Data != nil || a.hold.n.Load() != 0 {
		t.Fatalf("replaced tensor not recycled: %d bytes, count %d", len(a.Data), a.hold.n.Load())
	}

	// Read by Get (GetTensor, Items, Scan): pinned, kept.
	for name, read := range map[string]func(){
		"GetTensor": func() { k.GetTensor("t") },
		"Items":     func() { k.Items() },
		"Scan":      func() { k.Scan(0, 10, func(Item) bool { return true }) },
	} {
		x := held(t, k, "t", n, 3)
		read()
		held(t, k, "t", n, 4)
		if !intact(x, n, 3) || x.hold.n.Load() != pinned {
			t.Fatalf("%s: a tensor read and replaced lost its data (count %d)", name, x.hold.n.Load())
		}
	}

	// Looked at by Allowed or Expiry (EXPIRE's owner check, a migrating
	// slot's routing): not pinned, recycled when replaced (diff review:
	// EXPIRE pinned every tensor it touched, through Get).
	for name, look := range map[string]func(){
		"Allowed": func() { k.Allowed(func(Value) error { return nil }, "t") },
		"Expiry":  func() { k.Expiry("t") },
	} {
		x := held(t, k, "t", n, 3)
		look()
		held(t, k, "t", n, 4)
		if x.Data != nil || x.hold.n.Load() != 0 {
			t.Fatalf("%s: a tensor looked at was not recycled (count %d)", name, x.hold.n.Load())
		}
	}

	// Read by ReadTensor: no hold counted, the replacement waits for the
	// read, and the buffer is recycled after it.
	b := held(t, k, "t", n, 5)
	reading, replaced := make(chan struct{}), make(chan struct{})
	var whole bool
	go func() {
		if err := k.ReadTensor("t", func(x *Tensor) error {
			close(reading)
			time.Sleep(20 * time.Millisecond) // an AI.TENSORSET arrives meanwhile
			whole = x == b && b.hold.n.Load() == 1 && intact(x, n, 5)
			return nil
		}); err != nil {
			t.Error(err)
		}
	}()
	<-reading
	c6, err := NewTensorFromBuffer(Uint8, []int64{n}, blobOf(bytes.Repeat([]byte{6}, n)))
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		if err := k.Apply([]Write{{Key: "t", Value: c6, SameType: true}}); err != nil {
			t.Error(err)
		}
		close(replaced)
	}()
	<-replaced
	if !whole {
		t.Fatal("a tensor read by ReadTensor was replaced, held or recycled during the read")
	}
	if b.Data != nil {
		t.Fatal("a tensor read by ReadTensor, then replaced, was not recycled")
	}
	if err := k.ReadTensor("missing", nil); err != ErrNoTensor {
		t.Fatalf("ReadTensor of a missing key: %v", err)
	}
	if _, err := k.Set("s", &other{1}, true); err != nil {
		t.Fatal(err)
	}
	if err := k.ReadTensor("s", nil); err != ErrWrongType {
		t.Fatalf("ReadTensor of a model: %v", err)
	}

	// Replaced by SetMany (which hands the old value back), deleted,
	// renamed over, copied with another owner: kept for good.
	c := held(t, k, "t", n, 7)
	if _, err := k.SetMany([]Write{{Key: "t", Value: NewZeroTensor(Uint8, []int64{1})}}); err != nil {
		t.Fatal(err)
	}
	d := held(t, k, "u", n, 8)
	if _, err := k.Delete(nil, "u"); err != nil {
		t.Fatal(err)
	}
	e := held(t, k, "v", n, 9)
	held(t, k, "w", n, 10)
	if _, err := k.Rename(nil, "w", "v"); err != nil {
		t.Fatal(err)
	}
	f := held(t, k, "x", n, 11)
	f2 := f.WithOwner("alice")
	held(t, k, "x", n, 12)
	if !intact(c, n, 7) || !intact(d, n, 8) || !intact(e, n, 9) || !intact(f, n, 11) || !intact(f2, n, 11) {
		t.Fatal("a tensor removed other than by Apply lost its data")
	}

	// Held by the journal (the log's pending record): recycled only once
	// the journal releases it.
	j := &holdingJournal{}
	k.SetJournal(j)
	g := held(t, k, "y", n, 13)
	held(t, k, "y", n, 14)
	if !intact(g, n, 13) {
		t.Fatal("a tensor held by the journal lost its data when replaced")
	}
	for _, x := range j.held {
		x.Done()
	}
	if g.Data != nil {
		t.Fatal("a tensor released by the journal was not recycled")
	}

	// Stored twice at one key by one Apply: the keyspace's one hold is
	// not given up.
	r := held(t, k, "z", n, 15)
	if err := k.Apply([]Write{{Key: "z", Value: r}}); err != nil || !intact(r, n, 15) {
		t.Fatalf("a tensor stored again at its key lost its data (%v)", err)
	}

	// The server releases every value it removes by a method of this name
	// (commands.App.Release): a tensor must not have it, or DEL would give
	// up the keyspace's hold, twice for a key named twice in one write.
	if _, ok := any(r).(interface{ Release() }); ok {
		t.Fatal("Tensor has a Release method")
	}

	// A plain tensor (NewTensorFromBlob) and a size out of the pool count
	// nothing.
	p, _ := NewTensorFromBlob(Uint8, []int64{n}, make([]byte, n))
	q, _ := NewTensorFromBuffer(Uint8, []int64{100000}, BlobBuffer(100000))
	if p.hold != nil || q.hold != nil {
		t.Fatal("a tensor that is not of a pooled buffer counts its holders")
	}
}

// A recycled buffer comes back for a blob of its class, and its old bytes
// past the length asked for are out of reach.
func TestBlobBufferReuse(t *testing.T) {
	k := NewKeyspace(nil)
	seen := map[*byte]bool{}
	reused := false
	for i := 0; i < 200 && !reused; i++ {
		x := held(t, k, "t", 3136, byte(i))
		seen[&x.Data[0]] = true
		b := BlobBuffer(3100) // same class (3200)
		if cap(b) != 3100 {
			t.Fatalf("cap %d", cap(b))
		}
		reused = seen[&b[0]]
	}
	if !reused {
		t.Fatal("no buffer came back in 200 replacements")
	}
}
