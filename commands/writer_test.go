package commands

import (
	"math"
	"strings"
	"testing"
)

// Every reply type in RESP2 and RESP3: RESP3-only types fall back to
// their RESP2 equivalents.
func TestWriter(t *testing.T) {
	rows := []struct {
		name         string
		write        func(w *Writer)
		resp2, resp3 string
	}{
		{"OK", func(w *Writer) { w.OK() }, "+OK\r\n", "+OK\r\n"},
		{"Simple", func(w *Writer) { w.Simple("PONG") }, "+PONG\r\n", "+PONG\r\n"},
		{"Error", func(w *Writer) { w.Error("ERR a\r\nb\nc") }, "-ERR a  b c\r\n", "-ERR a  b c\r\n"},
		{"Int", func(w *Writer) { w.Int(-5) }, ":-5\r\n", ":-5\r\n"},
		{"Bulk", func(w *Writer) { w.Bulk([]byte("a\r\nb")) }, "$4\r\na\r\nb\r\n", "$4\r\na\r\nb\r\n"},
		{"empty Bulk", func(w *Writer) { w.Bulk(nil) }, "$0\r\n\r\n", "$0\r\n\r\n"},
		{"BulkString", func(w *Writer) { w.BulkString("xyz") }, "$3\r\nxyz\r\n", "$3\r\nxyz\r\n"},
		{"Null", func(w *Writer) { w.Null() }, "$-1\r\n", "_\r\n"},
		{"Array", func(w *Writer) { w.Array(2); w.Int(1); w.Int(2) }, "*2\r\n:1\r\n:2\r\n", "*2\r\n:1\r\n:2\r\n"},
		{"Map", func(w *Writer) { w.Map(1); w.BulkString("k"); w.Int(1) }, "*2\r\n$1\r\nk\r\n:1\r\n", "%1\r\n$1\r\nk\r\n:1\r\n"},
		{"empty Map", func(w *Writer) { w.Map(0) }, "*0\r\n", "%0\r\n"},
		{"Set", func(w *Writer) { w.Set(1); w.Simple("a") }, "*1\r\n+a\r\n", "~1\r\n+a\r\n"},
		{"Double", func(w *Writer) { w.Double(1.5) }, "$3\r\n1.5\r\n", ",1.5\r\n"},
		{"integral Double", func(w *Writer) { w.Double(1e6) }, "$7\r\n1000000\r\n", ",1000000\r\n"},
		{"float32 Double", func(w *Writer) { w.Double(float64(float32(0.1))) }, "$19\r\n0.10000000149011612\r\n", ",0.10000000149011612\r\n"},
		{"inf", func(w *Writer) { w.Double(math.Inf(1)) }, "$3\r\ninf\r\n", ",inf\r\n"},
		{"-inf", func(w *Writer) { w.Double(math.Inf(-1)) }, "$4\r\n-inf\r\n", ",-inf\r\n"},
		{"nan", func(w *Writer) { w.Double(math.NaN()) }, "$3\r\nnan\r\n", ",nan\r\n"},
		{"Verbatim", func(w *Writer) { w.Verbatim("a\r\nb") }, "$4\r\na\r\nb\r\n", "=8\r\ntxt:a\r\nb\r\n"},
		{"StringList", func(w *Writer) { w.StringList([]string{"a", ""}) }, "*2\r\n$1\r\na\r\n$0\r\n\r\n", "*2\r\n$1\r\na\r\n$0\r\n\r\n"},
	}
	for _, r := range rows {
		for proto, want := range map[int]string{2: r.resp2, 3: r.resp3} {
			w := NewWriter()
			if proto == 3 {
				w.proto = 3
			}
			r.write(w)
			if got := string(w.Bytes()); got != want {
				t.Errorf("%s in RESP%d: %q, want %q", r.name, proto, got, want)
			}
			if w.Len() != len(want) {
				t.Errorf("%s in RESP%d: Len %d", r.name, proto, w.Len())
			}
		}
	}
}

func TestWriterReset(t *testing.T) {
	w := NewWriter()
	w.BulkString("abc")
	w.Reset()
	if w.Len() != 0 || cap(w.buf) == 0 {
		t.Errorf("Reset of a small buffer: len %d cap %d, want it kept", w.Len(), cap(w.buf))
	}
	w.BulkString(strings.Repeat("x", 2<<20))
	w.Reset()
	if w.Len() != 0 || cap(w.buf) > 1<<20 {
		t.Errorf("Reset of a big buffer: cap %d, want it dropped", cap(w.buf))
	}
	w.OK()
	if string(w.Bytes()) != "+OK\r\n" {
		t.Errorf("after Reset: %q", w.Bytes())
	}
}

// An idle connection keeps a small reply buffer, pools a middling one and
// drops a large one; pending bytes are never released; the round trip
// through the pool allocates nothing.
func TestWriterRelease(t *testing.T) {
	w := NewWriter()
	w.OK()
	w.Reset()
	w.Release()
	if w.buf == nil {
		t.Fatal("a small buffer was released")
	}
	for _, size := range []int{16 << 10, 512 << 10} {
		w := NewWriter()
		w.BulkString(strings.Repeat("x", size))
		w.Release()
		if len(w.Bytes()) == 0 {
			t.Fatalf("%d bytes pending were released", size)
		}
		w.Reset()
		w.Release()
		if w.buf != nil || w.held != nil {
			t.Fatalf("a buffer of %d bytes kept after Release", size)
		}
		w.Acquire() // the pool's buffer, or none: the next write allocates
		w.OK()
		if got := string(w.Bytes()); got != "+OK\r\n" {
			t.Fatalf("after Acquire, wrote %q", got)
		}
	}
	w = NewWriter()
	reply := strings.Repeat("y", 20<<10)
	allocs := testing.AllocsPerRun(100, func() {
		w.Acquire()
		w.BulkString(reply)
		w.Reset()
		w.Release()
	})
	// Under -race sync.Pool drops a share of its Puts on purpose: the
	// make test race step failed here once at 1.00 (2026-12-07).
	if allocs >= 1 && !raceEnabled {
		t.Fatalf("%.2f allocations a reply through the pool", allocs)
	}
}

// A double's reply allocates nothing once the buffer has room, in RESP2
// (a bulk string) and RESP3.
func TestWriterDoubleAllocs(t *testing.T) {
	for _, proto := range []int{2, 3} {
		w := &Writer{proto: proto, buf: make([]byte, 0, 64)}
		if got := testing.AllocsPerRun(100, func() {
			w.Reset()
			w.Double(0.1)
		}); got != 0 {
			t.Errorf("RESP%d: %.0f allocations a double", proto, got)
		}
		if want := map[int]string{2: "$3\r\n0.1\r\n", 3: ",0.1\r\n"}[proto]; string(w.Bytes()) != want {
			t.Errorf("RESP%d: %q, want %q", proto, w.Bytes(), want)
		}
	}
}
