//go:build !linux

package persistence

import "os"

// directWriter writes buffered where there is no O_DIRECT (direct.go).
type directWriter struct {
	f   *os.File
	buf []byte
}

func openDirect(name string, _ int) (*directWriter, error) {
	f, err := os.OpenFile(name, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, err
	}
	return &directWriter{f: f}, nil
}

func (w *directWriter) Stage() []byte { return w.buf }

func (w *directWriter) Commit(b []byte) error {
	w.buf = b[:0]
	_, err := w.f.Write(b)
	return err
}

func (w *directWriter) Flush() error { return nil }
