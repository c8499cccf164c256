package persistence

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// saveStep names a point in SaveFile at which saveHook runs.
type saveStep string

const (
	stepWritten saveStep = "written" // snapshot written, not yet fsynced
	stepSynced  saveStep = "synced"  // temporary file fsynced, not yet renamed
	stepRenamed saveStep = "renamed" // renamed, directory not yet fsynced
)

// saveHook, when set by a test, runs at each step of SaveFile. An error it
// returns fails that step; a panic stands for a crash of the process, which
// leaves the temporary file behind.
var saveHook func(saveStep) error

// SaveFile writes a snapshot of src to dir/name atomically: into a temporary
// file in dir, fsynced, closed, renamed over dir/name, and the directory
// fsynced. On any error the temporary file is removed and the previous
// snapshot, if any, is left as it was. Calls may overlap, each with a
// temporary file of its own; a Source that implements Replacer orders
// their renames. RemoveTemporaryFiles removes what a crash left behind.
func SaveFile(dir, name string, sealKey []byte, src Source) (err error) {
	if err := checkSealKey(sealKey); err != nil {
		return err
	}
	final := filepath.Join(dir, name)
	f, err := os.CreateTemp(dir, tempPrefix(name)+"*")
	if err != nil {
		return fmt.Errorf("persistence: save %s: %w", final, err)
	}
	tmp := f.Name()
	renamed := false
	defer func() {
		if err != nil {
			if !renamed {
				f.Close()
				os.Remove(tmp)
			}
			err = fmt.Errorf("persistence: save %s: %w", final, err)
		}
	}()
	var w io.Writer = f
	if p, ok := src.(Progress); ok {
		w = &countingWriter{w: f, p: p}
	}
	if err := Write(w, sealKey, src); err != nil {
		return err
	}
	if err := step(stepWritten); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := step(stepSynced); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	replace := func() error {
		if err := os.Rename(tmp, final); err != nil {
			return err
		}
		renamed = true
		if err := step(stepRenamed); err != nil {
			return err
		}
		// Without this the rename itself may not survive a power cut.
		if err := syncDir(dir); err != nil {
			return fmt.Errorf("snapshot in place, but fsync of its directory failed: %w", err)
		}
		return nil
	}
	if r, ok := src.(Replacer); ok {
		return r.Replace(replace)
	}
	return replace()
}

// Replacer is implemented by a Source that decides whether, and when, its
// snapshot takes dir/name's place once written, fsynced and closed:
// SaveFile hands Replace the rest of the save (the rename and the fsync of
// the directory), which Replace runs, under a lock of its own if it needs
// one, and whose error it returns; or it returns an error of its own
// without running it, and the temporary file is removed. The server
// abandons a background save that a newer one supersedes this way.
type Replacer interface {
	Replace(replace func() error) error
}

// tempPrefix begins the names of the temporary files of dir/name.
func tempPrefix(name string) string { return "." + name + ".tmp-" }

// RemoveTemporaryFiles removes the temporary files that saves of dir/name
// cut short by a crash left behind. It must not run while a save of
// dir/name that is to succeed is under way: its file would go too.
func RemoveTemporaryFiles(dir, name string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("persistence: save %s: %w", filepath.Join(dir, name), err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), tempPrefix(name)) {
			// Gone meanwhile is gone: a save that a newer one superseded
			// removes its own file as it stops (diff review: the newer
			// save failed on ENOENT, and writes got MISCONF).
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("persistence: removing stale temporary file: %w", err)
			}
		}
	}
	return nil
}

// Progress is implemented by a Source that wants to know how far SaveFile
// has got: Written is called with the bytes written so far, as they are.
type Progress interface {
	Written(n int64)
}

// countingWriter tells a Progress what went through it.
type countingWriter struct {
	w io.Writer
	p Progress
	n int64
}

func (c *countingWriter) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	c.n += int64(n)
	c.p.Written(c.n)
	return n, err
}

func step(s saveStep) error {
	if saveHook == nil {
		return nil
	}
	return saveHook(s)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	if err := d.Sync(); err != nil {
		d.Close()
		return err
	}
	return d.Close()
}

// LoadFile verifies the snapshot at path and hands its records to sink, as
// Read does; a sink that implements ProgressSink also learns the file size.
// Errors name the file and wrap the sentinel errors of Read.
func LoadFile(path string, sealKey []byte, maxBlob int64, sink Sink) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("persistence: load: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("persistence: load: %w", err)
	}
	if err := read(f, sealKey, maxBlob, sink, st.Size()); err != nil {
		return fmt.Errorf("persistence: load %s: %w", path, err)
	}
	return nil
}
