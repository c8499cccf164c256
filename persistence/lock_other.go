//go:build !linux

package persistence

import "errors"

// LockName is the lock file LockDir holds in a data directory.
const LockName = "enclaveai.lock"

// ErrNoLock is what LockDir returns where the file system cannot lock
// files: the directory is then not protected from a second server.
var ErrNoLock = errors.New("persistence: this build does not lock files")

// LockDir locks nothing where flock is not built in (lock.go).
func LockDir(string) (func(), error) { return func() {}, ErrNoLock }
