package modelstore

import (
	"bytes"
	"testing"

	"golang.org/x/sys/unix"
)

// A shareable buffer, once sealed, is fixed for good through any
// descriptor: an engine worker given one cannot shrink the file under the
// server's mapping (a SIGBUS at the server's next read of it: AI.MODELGET,
// SAVE) nor change the model's bytes (engine review). The server's own
// mapping still reads them.
func TestSharedBufferSealed(t *testing.T) {
	ShareBuffers(true)
	defer ShareBuffers(false)
	model := bytes.Repeat([]byte("model bytes "), 100000)
	b, err := CopyToBuffer(model)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Unref()
	if !b.Shareable() {
		t.Skip("no memfd here")
	}
	// What a worker holds: another descriptor of the same file.
	fd, err := unix.Dup(b.FD())
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := unix.Ftruncate(fd, 4096); err == nil {
		t.Error("the sealed model file was shrunk")
	}
	if err := unix.Ftruncate(fd, int64(len(model))*2); err == nil {
		t.Error("the sealed model file was grown")
	}
	if _, err := unix.Pwrite(fd, []byte("X"), 0); err == nil {
		t.Error("the sealed model file was written")
	}
	if _, err := unix.Mmap(fd, 0, len(model), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED); err == nil {
		t.Error("the sealed model file was mapped writable")
	}
	if !bytes.Equal(b.Bytes(), model) {
		t.Error("the buffer's bytes changed")
	}
}
