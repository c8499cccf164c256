//go:build cgo && !noort

package modelstore

import (
	"bytes"
	"crypto/sha256"
	"sync"
	"testing"
)

// Identical bytes and options share one Blob; different options do not.
// Each Blob's digest is the SHA-256 of its bytes, computed after the Blob
// is registered.
func TestRegistryDeduplicates(t *testing.T) {
	requireRuntime(t)
	r := NewRegistry(nil)
	data := readModel(t, "linear.onnx")
	a, err := r.AcquireIfRoom(data, Origin{}, SessionOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := r.AcquireIfRoom(append([]byte(nil), data...), Origin{}, SessionOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := r.AcquireIfRoom(data, Origin{}, SessionOptions{Optimize: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if a != b || a == c || r.Len() != 2 || a.Refs() != 2 {
		t.Fatalf("a==b %v, a==c %v, len %d, refs %d", a == b, a == c, r.Len(), a.Refs())
	}
	if r.Bytes() != int64(2*len(data)) {
		t.Errorf("bytes %d, want %d", r.Bytes(), 2*len(data))
	}
	for _, x := range []*Blob{a, c} {
		if sum, ok := x.SHA256(); !ok || sum != sha256.Sum256(data) {
			t.Errorf("digest %x %v, want %x", sum, ok, sha256.Sum256(data))
		}
	}
	a.Release()
	b.Release()
	c.Release()
	if r.Len() != 0 || r.Bytes() != 0 {
		t.Errorf("after release: len %d, bytes %d", r.Len(), r.Bytes())
	}
}

// Two users' models never share a Blob, even with equal bytes, whatever
// the engine (here in process, which has no placement groups): a shared
// one would tell each about the other's copy and runs. Models counts the
// Models holding a Blob, not the runs and readers that retain it.
func TestRegistryKeepsOwnersApart(t *testing.T) {
	requireRuntime(t)
	r := NewRegistry(nil)
	data := readModel(t, "linear.onnx")
	acquire := func(owner string) *Blob {
		b, err := r.AcquireIfRoom(data, Origin{Owner: owner}, SessionOptions{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	alice, bob, alice2 := NewModel(ModelMeta{}, acquire("alice")), NewModel(ModelMeta{}, acquire("bob")), NewModel(ModelMeta{}, acquire("alice"))
	if alice.Blob == bob.Blob || alice.Blob != alice2.Blob || r.Len() != 2 {
		t.Fatalf("alice's and bob's shared: %v; alice's two shared: %v; %d blobs", alice.Blob == bob.Blob, alice.Blob == alice2.Blob, r.Len())
	}
	alice.Blob.Retain() // a run in flight
	if n, m := alice.Blob.Models(), bob.Blob.Models(); n != 2 || m != 1 {
		t.Errorf("models: alice's blob %d, bob's %d; want 2 and 1", n, m)
	}
	alice.Blob.Release()
	alice2.Release()
	if n := alice.Blob.Models(); n != 1 {
		t.Errorf("models after one key went: %d, want 1", n)
	}
	alice.Release()
	bob.Release()
	if r.Len() != 0 || r.Bytes() != 0 {
		t.Errorf("len %d, bytes %d after release", r.Len(), r.Bytes())
	}
}

// Two different models of one length whose fingerprints collide are still
// told apart by their bytes (the collision is forced: the fingerprint is
// only 64 bits).
func TestRegistryFingerprintCollision(t *testing.T) {
	requireRuntime(t)
	r := NewRegistry(nil)
	lin := readModel(t, "linear.onnx")
	other := bytes.Replace(lin, []byte("enclaveai-gen_models"), []byte("enclaveai-gen_modelX"), 1)
	if bytes.Equal(lin, other) {
		t.Fatal("linear.onnx has no producer name to change")
	}
	same := Fingerprint(lin)
	a, err := r.acquire(lin, nil, same, nil, Origin{}, SessionOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := r.acquire(other, nil, same, nil, Origin{}, SessionOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	a2, err := r.acquire(lin, nil, same, nil, Origin{}, SessionOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if a == b || a2 != a || r.Len() != 2 {
		t.Fatalf("a==b %v, a2==a %v, len %d", a == b, a2 == a, r.Len())
	}
	if sum, _ := b.SHA256(); sum != sha256.Sum256(other) {
		t.Error("the second model's digest is not its own")
	}
	a.Release()
	if b.Refs() != 1 || a.Refs() != 1 {
		t.Errorf("refs a %d, b %d", a.Refs(), b.Refs())
	}
	a2.Release()
	b.Release()
	if r.Len() != 0 || r.Bytes() != 0 {
		t.Errorf("len %d, bytes %d after release", r.Len(), r.Bytes())
	}
}

// A model uploaded through a ModelBuffer: the fingerprint computed while it
// filled finds the blob, the digest is right, and releasing the blob while
// its digest may still be running frees the buffer once the digest stops.
func TestRegistryBuffer(t *testing.T) {
	requireRuntime(t)
	r := NewRegistry(nil)
	data := readModel(t, "linear.onnx")
	fill := func() *ModelBuffer {
		buf, err := NewModelBuffer(1<<20, int64(len(data)))
		if err != nil {
			t.Fatal(err)
		}
		fillChunks(t, buf, data)
		buf.Seal()
		return buf
	}
	buf := fill()
	a, err := r.AcquireBuffer(buf, Origin{}, SessionOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	buf2 := fill()
	b, err := r.AcquireBuffer(buf2, Origin{}, SessionOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	buf2.Unref()
	if a != b || buf2.Len() != 0 {
		t.Fatalf("a==b %v; the duplicate's buffer still holds %d bytes", a == b, buf2.Len())
	}
	if sum, ok := a.SHA256(); !ok || sum != sha256.Sum256(data) {
		t.Errorf("digest %x %v", sum, ok)
	}
	buf.Unref()
	a.Release()
	b.Release()
	<-a.sha.done
	if buf.Len() != 0 {
		t.Error("the buffer outlived its blob and digest")
	}
}

// Clients storing the same new model at once all end up with one blob,
// though several may compile it (the byte compare runs without the lock).
func TestRegistryConcurrentAcquire(t *testing.T) {
	requireRuntime(t)
	r := NewRegistry(nil)
	data := readModel(t, "linear.onnx")
	const n = 8
	got := make([]*Blob, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i], errs[i] = r.AcquireIfRoom(bytes.Clone(data), Origin{}, SessionOptions{}, nil)
		}()
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil || got[i] != got[0] {
			t.Fatalf("client %d: %v, same blob %v", i, errs[i], got[i] == got[0])
		}
	}
	if r.Len() != 1 || got[0].Refs() != n {
		t.Fatalf("%d blobs, %d refs", r.Len(), got[0].Refs())
	}
	for _, b := range got {
		b.Release()
	}
	if r.Len() != 0 || r.Bytes() != 0 {
		t.Errorf("len %d, bytes %d after release", r.Len(), r.Bytes())
	}
}

// A digest the caller verified (a snapshot's) is the blob's at once: no
// hashing goroutine runs for it.
func TestRegistryAcquireVerified(t *testing.T) {
	requireRuntime(t)
	r := NewRegistry(nil)
	data := readModel(t, "linear.onnx")
	b, err := r.AcquireVerified(data, sha256.Sum256(data), Origin{}, SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-b.sha.done:
	default:
		t.Fatal("the digest is not there at once")
	}
	if sum, ok := b.SHA256(); !ok || sum != sha256.Sum256(data) {
		t.Errorf("digest %x %v", sum, ok)
	}
	again, err := r.AcquireIfRoom(bytes.Clone(data), Origin{}, SessionOptions{}, nil)
	if err != nil || again != b {
		t.Fatalf("the same bytes uploaded: %v, same blob %v", err, again == b)
	}
	b.Release()
	again.Release()
	if r.Len() != 0 {
		t.Errorf("len %d after release", r.Len())
	}
}
