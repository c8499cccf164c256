//go:build linux

package persistence

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// LockName is the lock file LockDir holds in a data directory.
const LockName = "enclaveai.lock"

// ErrNoLock is what LockDir returns where the file system cannot lock
// files: the directory is then not protected from a second server.
var ErrNoLock = errors.New("persistence: this file system does not lock files")

// LockDir takes an exclusive lock on dir (a flock on dir/enclaveai.lock,
// which the kernel drops when the process dies, kill -9 included) so that
// two servers never write the same snapshot and log: each would seal
// records the other's next start cannot authenticate. It fails at once,
// without waiting, when another process holds the lock. release gives it
// back; it may be called more than once.
func LockDir(dir string) (release func(), err error) {
	name := filepath.Join(dir, LockName)
	f, err := os.OpenFile(name, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("persistence: lock file: %w", err)
	}
	err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
	switch {
	case err == nil:
	case errors.Is(err, unix.EWOULDBLOCK):
		f.Close()
		return nil, fmt.Errorf("persistence: %s is in use by another server (it holds %s)", dir, name)
	case errors.Is(err, unix.ENOSYS), errors.Is(err, unix.EOPNOTSUPP), errors.Is(err, unix.EINVAL), errors.Is(err, unix.ENOLCK):
		f.Close()
		return func() {}, ErrNoLock
	default:
		f.Close()
		return nil, fmt.Errorf("persistence: locking %s: %w", name, err)
	}
	done := false
	return func() {
		if !done {
			done = true
			f.Close() // closing the last descriptor drops the flock
		}
	}, nil
}
