package persistence

import (
	"io"
	"os"
)

// FS is the file layer the append-only log writes through. OSFS is the
// real one; tests wrap it to make writes short, fail with ENOSPC or EIO,
// fail fsync, or stop between a write and a rename.
type FS interface {
	// OpenFile opens a file as os.OpenFile does.
	OpenFile(name string, flag int, perm os.FileMode) (File, error)
	Rename(oldpath, newpath string) error
	Remove(name string) error
	// SyncDir fsyncs a directory, so that entries created, renamed or
	// removed in it survive a power cut.
	SyncDir(dir string) error
}

// File is an open file of an FS.
type File interface {
	io.Writer
	io.Reader
	Sync() error
	Truncate(size int64) error
	Close() error
}

// OSFS is the operating system's file layer.
type OSFS struct{}

// OpenFile implements FS.
func (OSFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	return os.OpenFile(name, flag, perm)
}

// Rename implements FS.
func (OSFS) Rename(oldpath, newpath string) error { return os.Rename(oldpath, newpath) }

// Remove implements FS.
func (OSFS) Remove(name string) error { return os.Remove(name) }

// SyncDir implements FS.
func (OSFS) SyncDir(dir string) error { return syncDir(dir) }
