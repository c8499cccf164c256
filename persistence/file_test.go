package persistence

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const snapName = "dump.aidb"

// load loads dir/snapName with the test key.
func load(t *testing.T, dir string) (*memSink, error) {
	t.Helper()
	sink := &memSink{}
	return sink, LoadFile(filepath.Join(dir, snapName), testKey, 1<<30, sink)
}

func leftovers(t *testing.T, dir string) []string {
	t.Helper()
	tmps, err := filepath.Glob(filepath.Join(dir, ".*.tmp-*"))
	if err != nil {
		t.Fatal(err)
	}
	return tmps
}

func TestSaveLoadFile(t *testing.T) {
	dir := t.TempDir()
	src := everything()
	if err := SaveFile(dir, snapName, testKey, src); err != nil {
		t.Fatal(err)
	}
	sink, err := load(t, dir)
	if err != nil {
		t.Fatal(err)
	}
	checkSame(t, src, sink)
	if tmps := leftovers(t, dir); len(tmps) > 0 {
		t.Errorf("temporary files left: %v", tmps)
	}
	// Saving again replaces the snapshot.
	src2 := goldenSource()
	if err := SaveFile(dir, snapName, testKey, src2); err != nil {
		t.Fatal(err)
	}
	if sink, err = load(t, dir); err != nil {
		t.Fatal(err)
	}
	checkSame(t, src2, sink)
}

// withHook installs saveHook for the duration of the test.
func withHook(t *testing.T, hook func(saveStep) error) {
	saveHook = hook
	t.Cleanup(func() { saveHook = nil })
}

// crash is the panic value that stands for the process dying.
type crash struct{}

// A crash at any step leaves the previous snapshot loadable: the new one
// only once renamed, the old one before that.
func TestSaveFileCrash(t *testing.T) {
	for _, at := range []saveStep{stepWritten, stepSynced, stepRenamed} {
		t.Run(string(at), func(t *testing.T) {
			dir := t.TempDir()
			old, next := goldenSource(), everything()
			if err := SaveFile(dir, snapName, testKey, old); err != nil {
				t.Fatal(err)
			}
			withHook(t, func(s saveStep) error {
				if s == at {
					panic(crash{})
				}
				return nil
			})
			func() {
				defer func() {
					if r := recover(); r != (crash{}) {
						t.Fatalf("recovered %v, want the simulated crash", r)
					}
				}()
				SaveFile(dir, snapName, testKey, next)
			}()
			saveHook = nil
			sink, err := load(t, dir)
			if err != nil {
				t.Fatalf("after a crash at %s: %v", at, err)
			}
			if at == stepRenamed {
				checkSame(t, next, sink)
			} else {
				checkSame(t, old, sink)
				if len(leftovers(t, dir)) != 1 {
					t.Errorf("a crash before the rename should leave its temporary file behind")
				}
			}
			// The next start clears what the crash left behind.
			if err := RemoveTemporaryFiles(dir, snapName); err != nil {
				t.Fatal(err)
			}
			if err := SaveFile(dir, snapName, testKey, next); err != nil {
				t.Fatal(err)
			}
			if tmps := leftovers(t, dir); len(tmps) > 0 {
				t.Errorf("temporary files left after the next save: %v", tmps)
			}
			if sink, err = load(t, dir); err != nil {
				t.Fatal(err)
			}
			checkSame(t, next, sink)
		})
	}
}

// A failure at any step before the rename removes the temporary file and
// leaves the previous snapshot untouched.
func TestSaveFileFailure(t *testing.T) {
	errInjected := errors.New("injected failure")
	for _, at := range []saveStep{stepWritten, stepSynced, stepRenamed} {
		t.Run(string(at), func(t *testing.T) {
			dir := t.TempDir()
			old, next := goldenSource(), everything()
			if err := SaveFile(dir, snapName, testKey, old); err != nil {
				t.Fatal(err)
			}
			withHook(t, func(s saveStep) error {
				if s == at {
					return errInjected
				}
				return nil
			})
			err := SaveFile(dir, snapName, testKey, next)
			if !errors.Is(err, errInjected) || !strings.Contains(err.Error(), filepath.Join(dir, snapName)) {
				t.Fatalf("got %v, want the injected error naming the file", err)
			}
			if tmps := leftovers(t, dir); len(tmps) > 0 {
				t.Errorf("temporary files left: %v", tmps)
			}
			sink, err := load(t, dir)
			if err != nil {
				t.Fatal(err)
			}
			if at == stepRenamed {
				checkSame(t, next, sink) // the rename is done; only its fsync failed
			} else {
				checkSame(t, old, sink)
			}
		})
	}
}

type failingSource struct{ memSource }

func (failingSource) Models(func(ModelRecord, []byte) error) error { return errSink }

// stillGolden checks that a save that failed left dir's snapshot as
// goldenSource saved it, and no temporary file.
func stillGolden(t *testing.T, dir string) {
	t.Helper()
	if tmps := leftovers(t, dir); len(tmps) > 0 {
		t.Errorf("temporary files left: %v", tmps)
	}
	sink, err := load(t, dir)
	if err != nil {
		t.Fatal(err)
	}
	checkSame(t, goldenSource(), sink)
}

func TestSaveFileSourceError(t *testing.T) {
	dir := t.TempDir()
	if err := SaveFile(dir, snapName, testKey, goldenSource()); err != nil {
		t.Fatal(err)
	}
	if err := SaveFile(dir, snapName, testKey, &failingSource{*everything()}); !errors.Is(err, errSink) {
		t.Fatalf("got %v, want the source's error", err)
	}
	stillGolden(t, dir)
}

// replacingSource is a Source whose Replacer refuses the rename, or runs
// it, as told.
type replacingSource struct {
	memSource
	refuse bool
}

var errRefused = errors.New("refused")

func (r *replacingSource) Replace(replace func() error) error {
	if r.refuse {
		return errRefused
	}
	return replace()
}

// A Replacer decides whether the file replaces the snapshot: refused, the
// previous snapshot stays and the temporary file goes; run, it replaces.
func TestSaveFileReplacer(t *testing.T) {
	dir := t.TempDir()
	if err := SaveFile(dir, snapName, testKey, goldenSource()); err != nil {
		t.Fatal(err)
	}
	if err := SaveFile(dir, snapName, testKey, &replacingSource{*everything(), true}); !errors.Is(err, errRefused) {
		t.Fatalf("got %v, want the Replacer's error", err)
	}
	stillGolden(t, dir)
	next := everything()
	if err := SaveFile(dir, snapName, testKey, &replacingSource{*next, false}); err != nil {
		t.Fatal(err)
	}
	sink, err := load(t, dir)
	if err != nil {
		t.Fatal(err)
	}
	checkSame(t, next, sink)
}

func TestLoadFileErrors(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, snapName)
	if err := LoadFile(path, testKey, 1<<30, &memSink{}); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: got %v", err)
	}
	b, _ := tampered(t)
	for _, c := range []struct {
		data []byte
		want error
	}{
		{[]byte("not a snapshot at all"), ErrNotSnapshot},
		{b[:len(b)-10], ErrTruncated},
		{append(b[:200:200], b[201:]...), ErrCorrupt},
	} {
		if err := os.WriteFile(path, c.data, 0o600); err != nil {
			t.Fatal(err)
		}
		err := LoadFile(path, testKey, 1<<30, &memSink{})
		if !errors.Is(err, c.want) || !strings.Contains(err.Error(), path) {
			t.Errorf("got %v, want %v naming %s", err, c.want, path)
		}
	}
}

// progressSink records the progress reports of a load.
type progressSink struct {
	memSink
	done, total []int64
}

func (p *progressSink) Progress(done, total int64) {
	p.done = append(p.done, done)
	p.total = append(p.total, total)
}

func TestProgress(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, snapName)
	if err := os.WriteFile(path, seal(t, everything(), minFrameSize), 0o600); err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(path)
	p := &progressSink{}
	if err := LoadFile(path, testKey, 1<<30, p); err != nil {
		t.Fatal(err)
	}
	if len(p.done) < 4 || p.done[len(p.done)-1] != st.Size() || p.total[0] != st.Size() {
		t.Fatalf("progress %v of %v, file is %d bytes", p.done, p.total, st.Size())
	}
	for i := 1; i < len(p.done); i++ {
		if p.done[i] <= p.done[i-1] {
			t.Fatalf("progress went backwards: %v", p.done)
		}
	}
}

// A temporary file that goes while RemoveTemporaryFiles removes the stale
// ones is no error: a superseded save removes its own as it stops, and the
// newer save failed on ENOENT (diff review: writes then got MISCONF).
func TestRemoveTemporaryFilesTakesOnesGoneMeanwhile(t *testing.T) {
	dir := t.TempDir()
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			for i := range 64 {
				os.WriteFile(filepath.Join(dir, fmt.Sprintf("%s%d", tempPrefix(snapName), i)), nil, 0o600)
			}
			for i := range 64 {
				os.Remove(filepath.Join(dir, fmt.Sprintf("%s%d", tempPrefix(snapName), i)))
			}
		}
	}()
	deadline := time.Now().Add(300 * time.Millisecond)
	for time.Now().Before(deadline) {
		if err := RemoveTemporaryFiles(dir, snapName); err != nil {
			close(stop)
			<-done
			t.Fatal(err)
		}
	}
	close(stop)
	<-done
}
