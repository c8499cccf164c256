//go:build linux

package persistence

import (
	"bytes"
	"math/rand"
	"os"
	"path/filepath"
	"testing"
)

// directWriter writes exactly the bytes committed, whole blocks with
// O_DIRECT and the tail buffered, whatever the sizes.
func TestDirectWriter(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	for _, sizes := range [][]int{{100}, {4096}, {5000, 3}, {70000, 1, 4095, 4097, 65536}} {
		name := filepath.Join(t.TempDir(), "f")
		w, err := openDirect(name, 70000+directAlign)
		if err != nil {
			t.Fatal(err)
		}
		if !w.direct {
			t.Skip("this file system refuses O_DIRECT: the buffered fallback is what runs")
		}
		var want []byte
		wrote := false
		for _, n := range sizes {
			p := make([]byte, n)
			r.Read(p)
			want = append(want, p...)
			if err := w.Commit(append(w.Stage(), p...)); err != nil {
				t.Fatal(err)
			}
			wrote = wrote || len(want) >= directAlign
			if len(w.Stage()) >= directAlign || len(w.Stage()) != len(want)%directAlign {
				t.Fatalf("%d bytes pending after %d committed", len(w.Stage()), len(want))
			}
		}
		if wrote && !w.direct {
			t.Fatal("a direct write fell back to buffered on a file system that took O_DIRECT")
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		w.f.Close()
		got, _ := os.ReadFile(name)
		if !bytes.Equal(got, want) {
			t.Fatalf("sizes %v: the file holds %d bytes, not the %d committed", sizes, len(got), len(want))
		}
	}
}
