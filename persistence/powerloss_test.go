package persistence

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"sync"
	"testing"
)

// powerFS wraps OSFS, without its fsyncs, and keeps what a power loss
// would leave of the files written through it: a file's durable content
// is what it held at its last fsync, a directory's durable entries those
// it held at its last SyncDir, and what the directory held when powerFS
// was made counts as durable.
type powerFS struct {
	OSFS
	mu  sync.Mutex
	cur map[string]*powerInode // the names as they are now
	dur map[string]*powerInode // the names a power loss keeps
}

// powerInode is a file as a power loss sees it.
type powerInode struct {
	durable []byte // its content at its last fsync
	last    []byte // its content when its last name went (its pages may not have)
}

func newPowerFS(t *testing.T, dir string) *powerFS {
	t.Helper()
	p := &powerFS{cur: map[string]*powerInode{}, dur: map[string]*powerInode{}}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		p.cur[path] = &powerInode{durable: b}
		p.dur[path] = p.cur[path]
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

type powerFile struct {
	*os.File
	fs   *powerFS
	node *powerInode
	path string
}

func (p *powerFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	n := p.cur[name]
	if n == nil {
		n = &powerInode{}
		p.cur[name] = n
	}
	return powerFile{f, p, n, name}, nil
}

// Sync records the file's content as durable; it does not fsync (the
// power loss is the test's), nor does SyncDir.
func (f powerFile) Sync() error {
	b, err := os.ReadFile(f.path) // not renamed before its fsync, here
	f.fs.mu.Lock()
	f.node.durable = b
	f.fs.mu.Unlock()
	return err
}

func (p *powerFS) Rename(a, b string) error {
	old, _ := os.ReadFile(b)
	if err := os.Rename(a, b); err != nil {
		return err
	}
	p.mu.Lock()
	p.gone(b, old)
	p.cur[b] = p.cur[a]
	delete(p.cur, a)
	p.mu.Unlock()
	return nil
}

func (p *powerFS) Remove(name string) error {
	b, _ := os.ReadFile(name)
	if err := os.Remove(name); err != nil {
		return err
	}
	p.mu.Lock()
	p.gone(name, b)
	delete(p.cur, name)
	p.mu.Unlock()
	return nil
}

// gone notes that the file named name, which held b, has lost its name;
// p.mu is held.
func (p *powerFS) gone(name string, b []byte) {
	if n := p.cur[name]; n != nil {
		n.last = b
	}
}

func (p *powerFS) SyncDir(dir string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for name := range p.dur {
		if filepath.Dir(name) == dir {
			delete(p.dur, name)
		}
	}
	for name, n := range p.cur {
		if filepath.Dir(name) == dir {
			p.dur[name] = n
		}
	}
	return nil
}

// powerImage is one directory a power loss may leave: a file's content by
// its path relative to the log's directory.
type powerImage map[string][]byte

// images returns every directory a power loss now may leave of dir, as
// far as the contents of its files go, under the rule that writes reach
// the disk in order within a file but in any order between files: each
// file that the names kept (dur) lead to holds its durable content, or
// that and part of what was written after it (cut inside a frame: half
// of it, or all but its last byte), or everything written. A file written
// over (a truncation, O_TRUNC) holds its durable content or its new one.
func (p *powerFS) images(t *testing.T, dir string) []powerImage {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	var names []string
	choices := map[string][][]byte{}
	for name, n := range p.dur {
		now := n.last
		for path, m := range p.cur {
			if m == n { // the file under the name it has now
				var err error
				if now, err = os.ReadFile(path); err != nil {
					t.Fatal(err)
				}
			}
		}
		opts := [][]byte{n.durable}
		if len(now) > len(n.durable) && string(now[:len(n.durable)]) == string(n.durable) {
			more := len(now) - len(n.durable)
			opts = append(opts, now[:len(n.durable)+more/2], now[:len(now)-1])
		}
		if string(now) != string(n.durable) {
			opts = append(opts, now)
		}
		rel, _ := filepath.Rel(dir, name)
		names = append(names, rel)
		choices[rel] = opts
	}
	sort.Strings(names)
	imgs := []powerImage{{}}
	for _, name := range names {
		var next []powerImage
		for _, img := range imgs {
			for _, c := range choices[name] {
				n := powerImage{name: c}
				for k, v := range img {
					n[k] = v
				}
				next = append(next, n)
			}
		}
		imgs = next
	}
	return imgs
}

// write lays img out in a new directory and returns it.
func (img powerImage) write(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, modelsDir), 0o700); err != nil {
		t.Fatal(err)
	}
	for name, b := range img {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// powerRun drives a log through a powerFS, appending records with keys
// k0, k1, ..., and checks after each step that every directory a power
// loss could leave starts, with the records up to some point in order,
// at least those the policy promised on disk by then.
type powerRun struct {
	t    *testing.T
	dir  string
	fs   *powerFS
	l    *Log
	seqs []uint64 // the sequence number of each key's record
	base int      // keys a finished rewrite's base holds
}

// commit appends and commits records for the next n keys.
func (r *powerRun) commit(n int) {
	r.append(n)
	if err := r.l.Commit(r.l.Seq()); err != nil {
		r.t.Fatal(err)
	}
}

// append appends records for the next n keys, without a commit.
func (r *powerRun) append(n int) {
	for range n {
		i := len(r.seqs)
		r.seqs = append(r.seqs, r.l.Append(tensorOp(fmt.Sprint("k", i), fmt.Sprint(i))))
	}
}

// state is the keys k0 to k(n-1), as a replay of their records leaves them.
func state(n int) *logState {
	st := newLogState()
	for i := range n {
		st.Tensor(*tensorOp(fmt.Sprint("k", i), fmt.Sprint(i)).Tensor)
	}
	return st
}

// check applies every power loss that could strike now and replays each.
func (r *powerRun) check(step string) {
	r.t.Helper()
	promised := r.base
	for i, seq := range r.seqs {
		if seq <= r.l.Fsynced() {
			promised = max(promised, i+1)
		}
	}
	var refused, gap bool // each reported once
	for _, img := range r.fs.images(r.t, r.dir) {
		l := openTestLog(r.t, img.write(r.t), noSyncFS{})
		st := newLogState()
		_, err := l.Replay(st, true)
		l.Close()
		n := len(st.keys)
		switch {
		case err != nil && !refused:
			refused = true
			r.t.Errorf("%s: a power loss leaving %s: the start fails: %v", step, img, err)
		case err == nil && !gap && (n < promised || !reflect.DeepEqual(st.keys, state(n).keys)):
			gap = true
			r.t.Errorf("%s: a power loss leaving %s: %d keys back, not the first %d or more in order: %v", step, img, n, promised, st.keys)
		}
	}
	if refused || gap {
		r.t.FailNow()
	}
}

// noSyncFS is OSFS without fsyncs, which a power loss's image has no use
// for: they made the test's many replays take seconds.
type noSyncFS struct{ OSFS }

type noSyncFile struct{ *os.File }

func (noSyncFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return noSyncFile{f}, nil
}

func (noSyncFS) SyncDir(string) error { return nil }

func (noSyncFile) Sync() error { return nil }

// String names each file's size, for the failure's message.
func (img powerImage) String() string {
	var names []string
	for name, b := range img {
		names = append(names, fmt.Sprintf("%s %d bytes", name, len(b)))
	}
	sort.Strings(names)
	return fmt.Sprint(names)
}

// A power loss at any moment of a rewrite leaves a log that starts with
// the records up to some point, in order, and at least those the policy
// had on disk: under everysec and no the old incr file was left unsynced
// while appends went on in the new one, so the kernel could write the new
// file back first; a power loss then left the old file torn behind frames
// of the new one, and the start refused it ("a write cut short ..., yet
// incr.2.log after it is not a bare header"), or ended it at a frame and
// replayed the new one's records after a gap.
func TestLogPowerLossDuringRewrite(t *testing.T) {
	for _, p := range []FsyncPolicy{FsyncAlways, FsyncEverysec, FsyncNo} {
		t.Run(p.String(), func(t *testing.T) {
			dir := t.TempDir()
			l := openTestLog(t, dir, nil)
			if err := l.Create(newLogState().source()); err != nil {
				t.Fatal(err)
			}
			l.Close()
			r := &powerRun{t: t, dir: dir, fs: newPowerFS(t, dir)}
			r.l = openTestLog(t, dir, r.fs)
			if _, err := r.l.Replay(newLogState(), false); err != nil {
				t.Fatal(err)
			}
			defer r.l.Close()
			r.l.SetPolicy(p)
			r.commit(2)
			r.l.SyncEverysec() // promised from here on, whatever the policy
			r.commit(2)
			r.check("before the rewrite")
			cut, err := r.l.BeginRewrite()
			if err != nil {
				t.Fatal(err)
			}
			r.commit(1)
			r.check("rewrite begun")
			r.append(1) // queued before the cut: written to the old file
			r.l.Append(cut)
			cutAt := len(r.seqs)
			r.check("cut appended")
			r.commit(2) // the switch, then two records in the new file
			r.check("switched")
			r.commit(1)
			r.check("more after the switch")
			if err := r.l.FinishRewrite(cut, state(cutAt).source(), nil); err != nil {
				t.Fatal(err)
			}
			r.base = cutAt
			r.check("rewrite finished")
			r.commit(2)
			r.check("appended after the rewrite")
			if err := r.l.SyncEverysec(); err != nil {
				t.Fatal(err)
			}
			r.check("fsynced after the rewrite")
		})
	}
}

// A power loss after a start that cut a torn tail off an incr file, and
// appends in the next one, leaves a log that starts: the cut was not
// fsynced, so the torn tail could come back behind the next file's
// frames, and the start refused it as damage. The torn file is the last,
// or one before a rewrite's incr file with only its header.
func TestLogPowerLossAfterATornTailIsCut(t *testing.T) {
	for _, begun := range []bool{false, true} {
		t.Run(fmt.Sprint("rewrite begun ", begun), func(t *testing.T) {
			dir := t.TempDir()
			l := createdLog(t, dir)
			for i := range 4 { // k3 is torn
				commitAll(t, l, tensorOp(fmt.Sprint("k", i), fmt.Sprint(i)))
			}
			if begun {
				rewriteBegunThenClosed(t, l, false)
			} else {
				l.Close()
			}
			path := filepath.Join(dir, "incr.1.log")
			b := mustRead(t, path)
			if err := os.WriteFile(path, b[:len(b)-7], 0o600); err != nil {
				t.Fatal(err)
			}
			// k0 to k2 are on disk; their records come first.
			r := &powerRun{t: t, dir: dir, fs: newPowerFS(t, dir), seqs: make([]uint64, 3)}
			r.l = openTestLog(t, dir, r.fs)
			if info, err := r.l.Replay(newLogState(), true); err != nil || info.CutFile != "incr.1.log" {
				t.Fatalf("%+v, %v", info, err)
			}
			defer r.l.Close()
			r.l.SetPolicy(FsyncEverysec)
			r.check("started")
			r.commit(2)
			r.check("appended after the start")
		})
	}
}
