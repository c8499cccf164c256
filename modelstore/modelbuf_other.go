//go:build !linux

package modelstore

import "errors"

// Elsewhere model buffers are Go memory (see NewModelBuffer).
func mapAnon(size int64) ([]byte, error)           { return nil, errors.ErrUnsupported }
func trimAnon(mem []byte, n int) []byte            { return mem }
func unmapAnon(mem []byte)                         {}
func populateAnon(mem []byte) error                { return errors.ErrUnsupported }
func mapShared(size int64) ([]byte, int, error)    { return nil, -1, errors.ErrUnsupported }
func trimShared(mem []byte, fd, n int) []byte      { return mem }
func mapReadOnly(fd int, size int) ([]byte, error) { return nil, errors.ErrUnsupported }
