//go:build cgo && !noort

package main

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/enclaveai/enclaveai/bench/benchproc"
)

// TestGoFloors: both Go floors answer SET, PING, GET and DBSIZE as Redis
// does, for commands pipelined and split across writes, and close a
// connection that sends what is not RESP.
func TestGoFloors(t *testing.T) {
	for _, mode := range []string{"goroutines", "loop"} {
		t.Run(mode, func(t *testing.T) {
			port, err := benchproc.FreePort()
			if err != nil {
				t.Fatal(err)
			}
			addr := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(port))
			go func() { t.Log(serveGoFloor(mode, addr)) }()
			var c net.Conn
			for range 1000 { // up to 10 s for the floor to listen, on a loaded machine
				if c, err = net.Dial("tcp", addr.String()); err == nil {
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			v := bytes.Repeat([]byte{7}, 3136)
			set := fmt.Appendf(nil, "*3\r\n$3\r\nSET\r\n$1\r\na\r\n$%d\r\n%s\r\n", len(v), v)
			rest := "*1\r\n$4\r\nPING\r\n*2\r\n$3\r\nget\r\n$1\r\na\r\n*2\r\n$3\r\nGET\r\n$1\r\nb\r\n*1\r\n$6\r\nDBSIZE\r\n"
			// The SET in two parts, its value cut: the floor waits for the rest.
			for _, part := range [][]byte{set[:100], append(set[100:], rest...)} {
				if _, err := c.Write(part); err != nil {
					t.Fatal(err)
				}
				time.Sleep(20 * time.Millisecond)
			}
			want := fmt.Appendf(nil, "+OK\r\n+PONG\r\n$%d\r\n%s\r\n$-1\r\n:1\r\n", len(v), v)
			got := make([]byte, len(want))
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			if _, err := io.ReadFull(c, got); err != nil || !bytes.Equal(got, want) {
				t.Fatalf("replies %q (%v), want %q", got, err, want)
			}
			if _, err := c.Write([]byte("GET a\r\n")); err != nil {
				t.Fatal(err)
			}
			if n, err := c.Read(got); err != io.EOF {
				t.Fatalf("after an inline command: %d bytes %q, %v; want EOF", n, got[:n], err)
			}
		})
	}
}
