package server_test

import (
	"bytes"
	"testing"

	"github.com/enclaveai/enclaveai/commands"
	"github.com/enclaveai/enclaveai/server"
)

// repeatReader yields the same bytes forever: the socket of a client that
// pipelines one command without end.
type repeatReader struct {
	data []byte
	off  int
}

func (r *repeatReader) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		c := copy(p[n:], r.data[r.off:])
		n += c
		r.off = (r.off + c) % len(r.data)
	}
	return n, nil
}

// BenchmarkReader reads pipelined AI.TENSORSET commands of a 3136-byte
// blob (the size docs/BENCHMARKS.md measures end to end): the per-command
// cost of the RESP reader, the blob's allocation included.
func BenchmarkReader(b *testing.B) {
	blob := bytes.Repeat([]byte{0, 0, 128, 63}, 784)
	var cmd bytes.Buffer
	cmd.WriteString("*6\r\n$12\r\nAI.TENSORSET\r\n$1\r\nt\r\n$5\r\nFLOAT\r\n$3\r\n784\r\n$4\r\nBLOB\r\n$3136\r\n")
	cmd.Write(blob)
	cmd.WriteString("\r\n")
	lim := server.Limits{Limits: commands.Limits{MaxArgs: 1 << 20, MaxBulk: 512 << 20, MaxQuery: 1 << 30}}
	classify := func([]byte) server.Limits { return lim }
	rd := server.NewReader(&repeatReader{data: cmd.Bytes()})
	b.SetBytes(int64(cmd.Len()))
	b.ReportAllocs()
	for b.Loop() {
		c, err := rd.ReadCommand(lim, classify)
		if err != nil {
			b.Fatal(err)
		}
		if len(c.Args) != 6 || len(c.Args[5]) != len(blob) {
			b.Fatalf("read %d args", len(c.Args))
		}
	}
}
