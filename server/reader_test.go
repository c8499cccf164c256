package server

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/enclaveai/enclaveai/commands"
	"github.com/enclaveai/enclaveai/config"
)

// here is the file:line of the table row that calls it, so that a failing
// row reports its own position.
func here() string {
	_, file, line, _ := runtime.Caller(1)
	return filepath.Base(file) + ":" + strconv.Itoa(line)
}

// open is generous enough never to refuse the commands in the tables.
var open = Limits{Limits: commands.Limits{MaxArgs: 1 << 20, MaxBulk: 1 << 30, MaxQuery: 1 << 32}}

// transcript reads commands until an error and renders what came out:
// commands as their %q-quoted arguments, separated by " | ", then the
// error: "EOF" for the end of input (clean or mid-command), "-<text>" for
// a ProtocolError, "!<text>" for a RefusedError (after which reading goes
// on, as the connection does).
func transcript(r *Reader, pre Limits, classify func([]byte) Limits) string {
	defer r.Close() // a socket's poll ends (fdSource), so the socket can close
	var out []string
	for range 1000 {
		cmd, err := r.ReadCommand(pre, classify)
		var pe *ProtocolError
		var re *RefusedError
		switch {
		case err == nil:
			args := make([]string, len(cmd.Args))
			for i, a := range cmd.Args {
				args[i] = strconv.Quote(string(a))
			}
			out = append(out, strings.Join(args, " "))
			continue
		case errors.As(err, &re) && re.Close:
			out = append(out, "!"+re.Error()+" (close)")
		case errors.As(err, &re):
			out = append(out, "!"+re.Error())
			continue
		case errors.As(err, &pe):
			out = append(out, "-"+pe.Error())
		case err == io.EOF || err == io.ErrUnexpectedEOF:
			out = append(out, "EOF")
		default:
			out = append(out, "error "+err.Error())
		}
		break
	}
	return strings.Join(out, " | ")
}

func TestReadCommand(t *testing.T) {
	big := strings.Repeat("x", 70000)
	rows := []struct {
		at, in, want string
	}{
		// Multibulk.
		{here(), "*1\r\n$4\r\nPING\r\n", `"PING" | EOF`},
		{here(), "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\n", `"SET" "k" "" | EOF`},
		{here(), "*2\r\n$4\r\nECHO\r\n$6\r\na\r\nb\x00c\r\n", `"ECHO" "a\r\nb\x00c" | EOF`},
		{here(), "*1\n$4\nPING\r\n", `"PING" | EOF`}, // LF-only headers are accepted
		{here(), "*0\r\n*-1\r\n*1\r\n$4\r\nPING\r\n", `"PING" | EOF`},
		// Pipelined, multibulk and inline mixed.
		{here(), "*1\r\n$4\r\nPING\r\n*2\r\n$4\r\nECHO\r\n$2\r\nhi\r\nPING\r\nECHO 'a b'\r\n*1\r\n$4\r\nQUIT\r\n",
			`"PING" | "ECHO" "hi" | "PING" | "ECHO" "a b" | "QUIT" | EOF`},
		// Malformed multibulk, with Redis's texts.
		{here(), "*x\r\n", `-Protocol error: invalid multibulk length`},
		{here(), "*\r\n", `-Protocol error: invalid multibulk length`},
		{here(), "*+1\r\n$4\r\nPING\r\n", `-Protocol error: invalid multibulk length`},
		{here(), "*01\r\n$4\r\nPING\r\n", `-Protocol error: invalid multibulk length`},
		{here(), "*-0\r\n", `-Protocol error: invalid multibulk length`},
		{here(), "* 1\r\n", `-Protocol error: invalid multibulk length`},
		{here(), "*9223372036854775808\r\n", `-Protocol error: invalid multibulk length`},
		{here(), "*2147483648\r\n", `-Protocol error: invalid multibulk length`},
		{here(), "*1\r\n$04\r\nPING\r\n", `-Protocol error: invalid bulk length`},
		{here(), "*1\r\n$+4\r\nPING\r\n", `-Protocol error: invalid bulk length`},
		{here(), "*1\r\n$-1\r\n", `-Protocol error: invalid bulk length`},
		{here(), "*1\r\n$\r\n", `-Protocol error: invalid bulk length`},
		{here(), "*1\r\n$x\r\n", `-Protocol error: invalid bulk length`},
		{here(), "*1\r\n$9223372036854775808\r\n", `-Protocol error: invalid bulk length`},
		{here(), "*1\r\n\r\n", `-Protocol error: expected '$', got ' '`},
		{here(), "*1\r\n+PING\r\n", `-Protocol error: expected '$', got '+'`},
		{here(), "*2\r\n$4\r\nECHO\r\n:1\r\n", `-Protocol error: expected '$', got ':'`},
		{here(), "*1\r\n$4\r\nPINGxx", `-Protocol error: invalid bulk terminator`},
		{here(), "*1\r\n$4\r\nPING\n\r", `-Protocol error: invalid bulk terminator`},
		{here(), "*" + big + "\r\n", `-Protocol error: too big mbulk count string`},
		{here(), "*1\r\n$" + big + "\r\n", `-Protocol error: too big bulk count string`},
		// Inline commands: sdssplitargs quoting.
		{here(), "PING\r\n", `"PING" | EOF`},
		{here(), "PING\n", `"PING" | EOF`},
		{here(), "  SET   k \t v  \r\n", `"SET" "k" "v" | EOF`},
		{here(), "ECHO \"a b\"\r\n", `"ECHO" "a b" | EOF`},
		{here(), "ECHO 'a b'\r\n", `"ECHO" "a b" | EOF`},
		{here(), `ECHO "a\x41\n\"\\"` + "\r\n", `"ECHO" "aA\n\"\\" | EOF`},
		{here(), `ECHO 'it\'s' '\n'` + "\r\n", `"ECHO" "it's" "\\n" | EOF`},
		{here(), "ECHO a\"b c\"\r\n", `"ECHO" "ab c" | EOF`},
		{here(), "ECHO \"\" ''\r\n", `"ECHO" "" "" | EOF`},
		{here(), "ECHO \"a\"b\r\n", `-Protocol error: unbalanced quotes in request`},
		{here(), "ECHO \"ab\r\n", `-Protocol error: unbalanced quotes in request`},
		{here(), "ECHO 'ab\r\n", `-Protocol error: unbalanced quotes in request`},
		{here(), "\r\n\n   \r\nPING\r\n", `"PING" | EOF`}, // blank lines are skipped
		{here(), "   \r\n", `EOF`},
		{here(), big + "\r\n", `-Protocol error: too big inline request`},
		// End of input in the middle of a command.
		{here(), "", `EOF`},
		{here(), "*", `EOF`},
		{here(), "*1", `EOF`},
		{here(), "*1\r\n", `EOF`},
		{here(), "*1\r\n$4", `EOF`},
		{here(), "*1\r\n$4\r\n", `EOF`},
		{here(), "*1\r\n$4\r\nPI", `EOF`},
		{here(), "*1\r\n$4\r\nPING", `EOF`},
		{here(), "*1\r\n$4\r\nPING\r", `EOF`},
		{here(), "*2\r\n$4\r\nECHO\r\n", `EOF`},
		{here(), "PING", `EOF`}, // an inline command needs its newline
		{here(), "*1\r\n$4\r\nPING\r\n*2\r\n$4\r\nECHO\r\n$3\r\nab", `"PING" | EOF`},
	}
	readers := []struct {
		name string
		open func(string) io.Reader
	}{
		{"whole", func(in string) io.Reader { return strings.NewReader(in) }},
		{"bytewise", func(in string) io.Reader { return iotest.OneByteReader(strings.NewReader(in)) }},
		{"halves", func(in string) io.Reader { return iotest.HalfReader(strings.NewReader(in)) }},
		// A socket: the reader waits holding no buffer (inbuf.go).
		{"socket", func(in string) io.Reader { return overSocket(t, in, 4096) }},
	}
	for _, row := range rows {
		for _, rd := range readers {
			got := transcript(NewReader(rd.open(row.in)), open, nil)
			if got != row.want {
				t.Errorf("%s (%s): %q\n got  %s\n want %s", row.at, rd.name, trim(row.in), got, row.want)
			}
		}
	}
}

func trim(s string) string {
	if len(s) > 60 {
		return s[:60] + "..."
	}
	return s
}

// A clean end of input between commands is io.EOF itself, which the
// connection takes as a normal close.
func TestReadCommandCleanEOF(t *testing.T) {
	r := NewReader(strings.NewReader("*1\r\n$4\r\nPING\r\n"))
	if _, err := r.ReadCommand(open, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := r.ReadCommand(open, nil); err != io.EOF {
		t.Fatalf("got %v, want io.EOF", err)
	}
}

// readCounter counts its reads.
type readCounter struct {
	rd    io.Reader
	reads int
}

func (c *readCounter) Read(p []byte) (int, error) {
	c.reads++
	return c.rd.Read(p)
}

// headerOnly serves its data, then counts the reads that ask for more: a
// refused header must be answered without waiting for its payload, that
// is without a read past the data.
type headerOnly struct {
	data  []byte
	extra int
}

func (h *headerOnly) Read(p []byte) (int, error) {
	if len(h.data) == 0 {
		h.extra++
		return 0, io.EOF
	}
	n := copy(p, h.data)
	h.data = h.data[n:]
	return n, nil
}

func TestLimitsRefuseOnHeader(t *testing.T) {
	// Each argument costs argCost beyond its bytes.
	small := Limits{Limits: commands.Limits{MaxArgs: 4, MaxBulk: 100, MaxQuery: 150 + 3*argCost}}
	narrow := func(name []byte) Limits {
		if string(name) == "NARROW" {
			return Limits{Limits: commands.Limits{MaxArgs: 2, MaxBulk: 10, MaxQuery: 20 + 2*argCost}}
		}
		return small
	}
	x100 := strings.Repeat("x", 100)
	rows := []struct {
		at, in, want string
	}{
		{here(), "*5\r\n", `-Protocol error: invalid multibulk length`},
		{here(), "*2\r\n$4\r\nECHO\r\n$101\r\n", `-Protocol error: invalid bulk length`},
		{here(), "*2\r\n$1073741824\r\n", `-Protocol error: invalid bulk length`},
		{here(), "*3\r\n$4\r\nECHO\r\n$100\r\n" + x100 + "\r\n$47\r\n", `-Protocol error: command exceeds client-query-buffer-limit`},
		// The command's own limits apply once its name is read.
		{here(), "*3\r\n$6\r\nNARROW\r\n", `-Protocol error: invalid multibulk length`},
		{here(), "*2\r\n$6\r\nNARROW\r\n$11\r\n", `-Protocol error: invalid bulk length`},
		{here(), "*2\r\n$6\r\nNARROW\r\n$10\r\n0123456789\r\n", `"NARROW" "0123456789" | EOF`},
		// Before AUTH the refusal says so, in Redis's words.
		{here(), "UNAUTH*5\r\n", `-Protocol error: unauthenticated multibulk length`},
		{here(), "UNAUTH*2\r\n$4\r\nECHO\r\n$101\r\n", `-Protocol error: unauthenticated bulk length`},
		// Just within the limits: read in full.
		{here(), "*3\r\n$4\r\nECHO\r\n$100\r\n" + x100 + "\r\n$46\r\n" + x100[:46] + "\r\n", `"ECHO" "` + x100 + `" "` + x100[:46] + `" | EOF`},
	}
	for _, row := range rows {
		h := &headerOnly{data: []byte(row.in)}
		pre, classify := small, narrow
		if strings.HasPrefix(row.in, "UNAUTH") {
			pre.Unauth, classify = true, nil
			row.in = row.in[len("UNAUTH"):]
			h.data = h.data[len("UNAUTH"):]
		}
		if got := transcript(NewReader(h), pre, classify); got != row.want {
			t.Errorf("%s: %q\n got  %s\n want %s", row.at, trim(row.in), got, row.want)
		}
		if strings.HasPrefix(row.want, "-") && h.extra > 0 {
			t.Errorf("%s: %q: the reader waited for the refused payload", row.at, trim(row.in))
		}
	}
}

// Each argument costs argCost beyond its bytes: a flood of empty
// arguments (BLOB chunks of 0 bytes) is bounded by client-query-buffer-limit
// like a big argument, on the count when it can be.
func TestManyEmptyArgumentsAreBounded(t *testing.T) {
	lim := Limits{Limits: commands.Limits{MaxArgs: 1 << 30, MaxBulk: 100, MaxQuery: 12 * argCost}}
	empties := func(n int) string { return fmt.Sprintf("*%d\r\n", n) + strings.Repeat("$0\r\n\r\n", n) }
	h := &headerOnly{data: []byte(empties(13))}
	if got := transcript(NewReader(h), lim, nil); got != "-Protocol error: command exceeds client-query-buffer-limit" || h.extra > 0 {
		t.Errorf("13 empty arguments: %s (read %d payload bytes)", got, h.extra)
	}
	if got := transcript(NewReader(strings.NewReader(empties(12))), lim, nil); !strings.HasPrefix(got, `"" "" ""`) {
		t.Errorf("12 empty arguments: %s", got)
	}
	// Counted as they come where the count alone fits.
	in := "*12\r\n" + strings.Repeat("$1\r\nx\r\n", 12)
	if got := transcript(NewReader(strings.NewReader(in)), lim, nil); got != "-Protocol error: command exceeds client-query-buffer-limit" {
		t.Errorf("12 one-byte arguments: %s", got)
	}
}

// A refused multi-gigabyte header costs no allocation of its size.
func TestLimitsRefuseWithoutAllocating(t *testing.T) {
	in := []byte("*2\r\n$4\r\nECHO\r\n$4294967296\r\n")
	lim := Limits{Limits: commands.Limits{MaxArgs: 10, MaxBulk: 512 << 20, MaxQuery: 1 << 30}}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range 10 {
		r := NewReader(bytes.NewReader(in))
		if _, err := r.ReadCommand(lim, nil); !IsProtocol(err) {
			t.Fatalf("got %v, want a protocol error", err)
		}
	}
	runtime.ReadMemStats(&after)
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 10<<20 {
		t.Fatalf("refusing 10 headers allocated %d bytes", grew)
	}
}

func bulkCmd(args ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	return b.String()
}

// Arguments of 64 KiB and more get their own allocation that a handler may
// keep; smaller ones live in an arena the next command reuses.
func TestOwnership(t *testing.T) {
	bigA := strings.Repeat("a", smallArg)
	bigB := strings.Repeat("b", smallArg+1)
	under := strings.Repeat("u", smallArg-1)
	in := bulkCmd("SET", "k", bigA, under) + "ECHO inline\r\n" + bulkCmd("SET", "k2", bigB) + bulkCmd("SET", "k3", "small")
	r := NewReader(strings.NewReader(in))

	cmd, err := r.ReadCommand(open, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []bool{false, false, true, false} {
		if got := cmd.Owned(i); got != want {
			t.Errorf("command 1: Owned(%d) = %v, want %v", i, got, want)
		}
		// Owned arguments up to 64 KiB are buffers a tensor may recycle.
		if got := cmd.Pooled(i); got != want {
			t.Errorf("command 1: Pooled(%d) = %v, want %v", i, got, want)
		}
	}
	if cmd.Owned(4) || cmd.Pooled(4) {
		t.Errorf("Owned and Pooled out of range must be false")
	}
	kept := cmd.Args[2]
	if len(kept) != smallArg || cap(kept) != smallArg {
		t.Errorf("big argument: len %d cap %d, want exactly %d", len(kept), cap(kept), smallArg)
	}

	cmd, err = r.ReadCommand(open, nil)
	if err != nil || cmd.Owned(0) || cmd.Owned(1) {
		t.Fatalf("inline command: %v, owned %v %v", err, cmd.Owned(0), cmd.Owned(1))
	}
	cmd, err = r.ReadCommand(open, nil)
	if err != nil || !cmd.Owned(2) || string(cmd.Args[2]) != bigB {
		t.Fatalf("command 3: %v, owned %v", err, cmd.Owned(2))
	}
	cmd, err = r.ReadCommand(open, nil)
	if err != nil || cmd.Owned(2) || string(cmd.Args[2]) != "small" {
		t.Fatalf("command 4: %v", err)
	}
	if string(kept) != bigA {
		t.Fatal("an owned argument was overwritten by later commands")
	}
}

type sinkCall struct {
	i int
	n int64
}

// A Sink gives the destination of an argument: the reader fills it
// directly, and the argument is that very memory.
func TestSinkFillsDestination(t *testing.T) {
	var calls []sinkCall
	dst := make([]byte, 5, 64)
	lim := open
	lim.Sink = func(a SinkArg) ([]byte, error) {
		calls = append(calls, sinkCall{a.Index, a.Size})
		if a.Count != 4 || len(a.Prev) != a.Index || string(a.Prev[0]) != "UPLOAD" {
			t.Errorf("Sink(%d): count %d, %d args before it", a.Index, a.Count, len(a.Prev))
		}
		if a.Index == 2 {
			return dst, nil
		}
		return nil, nil // allocate as usual
	}
	classify := func(name []byte) Limits { return lim }
	r := NewReader(strings.NewReader(bulkCmd("UPLOAD", "key", "hello", "tail") + bulkCmd("PING")))
	cmd, err := r.ReadCommand(open, classify)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(calls); got != "[{1 3} {2 5} {3 4}]" {
		t.Errorf("Sink calls %s, want [{1 3} {2 5} {3 4}] (the name is read before the command's limits are known)", got)
	}
	a := cmd.Args[2]
	if string(a) != "hello" || &a[0] != &dst[0] || cap(a) != 5 {
		t.Errorf("argument 2 = %q (cap %d), want the sink's own memory holding hello", a, cap(a))
	}
	if !cmd.Owned(2) || cmd.Owned(1) || cmd.Owned(3) {
		t.Errorf("Owned = %v %v %v, want false true false", cmd.Owned(1), cmd.Owned(2), cmd.Owned(3))
	}
	if cmd, err = r.ReadCommand(open, classify); err != nil || string(cmd.Args[0]) != "PING" {
		t.Fatalf("next command: %v", err)
	}
}

var errTooManyModels = errors.New("ERR max-models reached")

// A Sink's error refuses the command: the rest of it, even a large
// payload, is skipped unread into memory, and the next command reads fine.
func TestSinkRefusalSkipsCommand(t *testing.T) {
	var calls []sinkCall
	lim := open
	lim.MaxSkip = 4 << 20
	lim.Sink = func(a SinkArg) ([]byte, error) {
		calls = append(calls, sinkCall{a.Index, a.Size})
		if a.Index == 2 {
			return nil, errTooManyModels
		}
		return nil, nil
	}
	classify := func(name []byte) Limits {
		if string(name) == "UPLOAD" {
			return lim
		}
		return open
	}
	payload := strings.Repeat("m", 3<<20)
	in := bulkCmd("UPLOAD", "key", "BLOB", payload, "more") + bulkCmd("ECHO", "after") + bulkCmd("UPLOAD", "k")
	reads := &readCounter{rd: iotest.HalfReader(strings.NewReader(in))}
	r := NewReader(reads)
	var ms0, ms1 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	_, err := r.ReadCommand(open, classify)
	runtime.ReadMemStats(&ms1)
	var re *RefusedError
	if !errors.As(err, &re) || !errors.Is(err, errTooManyModels) || err.Error() != errTooManyModels.Error() {
		t.Fatalf("got %v, want a RefusedError wrapping errTooManyModels", err)
	}
	if grew := ms1.TotalAlloc - ms0.TotalAlloc; grew > 1<<20 {
		t.Errorf("skipping a refused 3 MiB argument allocated %d bytes", grew)
	}
	// Half a buffer a read (HalfReader): about 100 reads, not one a byte.
	if reads.reads > 2*(3<<20)/(inSize/2) {
		t.Errorf("skipping a refused 3 MiB argument took %d reads", reads.reads)
	}
	if got := fmt.Sprint(calls); got != "[{1 3} {2 4}]" {
		t.Errorf("Sink calls %s, want [{1 3} {2 4}]: none after the refusal", got)
	}
	if got := transcript(r, open, classify); got != `"ECHO" "after" | "UPLOAD" "k" | EOF` {
		t.Errorf("after the refusal: %s", got)
	}
}

// A refused command's remaining headers are still checked: a malformed
// one is a protocol error, not a silent desynchronisation; and only
// MaxSkip bytes of it are skipped: beyond, the refusal closes the
// connection at once.
func TestSinkRefusalStillChecksHeaders(t *testing.T) {
	lim := Limits{Limits: commands.Limits{MaxArgs: 10, MaxBulk: 100, MaxQuery: 1000}, MaxSkip: 100}
	lim.Sink = func(SinkArg) ([]byte, error) { return nil, errTooManyModels }
	for in, want := range map[string]string{
		"*3\r\n$6\r\nUPLOAD\r\n$1\r\nk\r\n$-2\r\n":  `-Protocol error: invalid bulk length`,
		"*3\r\n$6\r\nUPLOAD\r\n$1\r\nk\r\n$100\r\n": `!ERR max-models reached (close)`,
	} {
		h := &headerOnly{data: []byte(in)}
		refusals := 0
		r := NewReader(h)
		r.OnRefuse = func() { refusals++ }
		got := transcript(r, lim, func([]byte) Limits { return lim })
		if got != want || h.extra > 0 || refusals != 1 {
			t.Errorf("%q: got %s after %d extra reads, %d refusals; want %s at once", in, got, h.extra, refusals, want)
		}
	}
}

// countingReader counts the bytes handed to the bufio layer.
type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

// isMultibulk reports whether the command that the reader returned from
// seg (the bytes it consumed) came from a multibulk request: leading blank
// inline lines and empty multibulks (*0, *-1), which the reader skips, are
// passed over first.
func isMultibulk(seg []byte) bool {
	for len(seg) > 0 {
		line := seg
		if i := bytes.IndexByte(seg, '\n'); i >= 0 {
			line, seg = seg[:i], seg[i+1:]
		} else {
			seg = nil
		}
		line = bytes.TrimSuffix(line, []byte("\r"))
		if len(line) > 0 && line[0] == '*' {
			if n, ok := parseLen(line[1:]); ok && n <= 0 {
				continue
			}
			return true
		}
		if f, err := config.SplitArgs(string(line)); err == nil && len(f) == 0 {
			continue
		}
		return false
	}
	return false
}

// FuzzReader feeds arbitrary bytes to the reader under small limits. It
// must never panic, every multibulk command it returns must respect the
// limits (and survive a re-encoding round trip), inline commands must fit
// in the inline buffer, and a refused command must leave the stream in
// step.
func FuzzReader(f *testing.F) {
	seeds := []string{
		"*1\r\n$4\r\nPING\r\n",
		"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\n",
		"*2\r\n$4\r\nECHO\r\n$9\r\n123456789\r\nPING\r\n",
		"ECHO \"a\\x41\" 'b\\'c' d\"e f\"\r\n",
		"*0\r\n*-1\r\n\r\n  \r\n*1\r\n$1\r\nx\r\n",
		"*2\r\n$6\r\nREFUSE\r\n$13\r\n0123456789abc\r\n*1\r\n$4\r\nPING\r\n",
		"*3\r\n$6\r\nNARROW\r\n$2\r\nab\r\n$1\r\nc\r\n",
		"*9\r\n", "*1\r\n$65\r\n", "*+1\r\n", "*1\r\n$04\r\n", "*1\r\n\r\n", "*1\r\n$1\r\nxyz",
		"\"unbalanced\r\n", "*1\r\n$4\r\nPI",
		strings.Repeat("a ", 40) + "\r\n",
		"*5\r\n$1\r\na\r\n$64\r\n" + strings.Repeat("b", 64) + "\r\n$64\r\n" + strings.Repeat("c", 64) + "\r\n$64\r\n",
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	pre := Limits{Limits: commands.Limits{MaxArgs: 8, MaxBulk: 64, MaxQuery: 200}}
	refuse := errors.New("refused")
	classify := func(name []byte) Limits {
		switch string(name) {
		case "NARROW":
			return Limits{Limits: commands.Limits{MaxArgs: 2, MaxBulk: 4, MaxQuery: 6}}
		case "REFUSE":
			l := pre
			l.Sink = func(a SinkArg) ([]byte, error) {
				if a.Size == 13 {
					return nil, refuse
				}
				if a.Size == 7 {
					return make([]byte, a.Size), nil
				}
				return nil, nil
			}
			return l
		}
		return pre
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cr := &countingReader{r: bytes.NewReader(data)}
		r := NewReader(cr)
		for {
			start := cr.n - r.Buffered()
			cmd, err := r.ReadCommand(pre, classify)
			end := cr.n - r.Buffered()
			if err != nil {
				var re *RefusedError
				if errors.As(err, &re) {
					if !errors.Is(err, refuse) {
						t.Fatalf("RefusedError wraps %v", re.Err)
					}
					continue
				}
				if err != io.EOF && err != io.ErrUnexpectedEOF && !IsProtocol(err) {
					t.Fatalf("unexpected error %v", err)
				}
				return
			}
			if len(cmd.Args) == 0 {
				t.Fatal("empty command returned")
			}
			var total int64 // bytes the reader stored itself: a Sink's do not count
			for i, a := range cmd.Args {
				if i > 0 && len(a) == 7 && string(cmd.Args[0]) == "REFUSE" {
					continue
				}
				total += int64(len(a))
			}
			if !isMultibulk(data[start:end]) {
				if total > inlineMax {
					t.Fatalf("inline command of %d bytes", total)
				}
				continue
			}
			lim := classify(cmd.Args[0])
			if n := int64(len(cmd.Args)); n > pre.MaxArgs || n > lim.MaxArgs {
				t.Fatalf("%d arguments, limits %d/%d", n, pre.MaxArgs, lim.MaxArgs)
			}
			// The name is bounded by pre, the rest by the command's limits.
			for i, a := range cmd.Args {
				if max := map[bool]int64{true: pre.MaxBulk, false: lim.MaxBulk}[i == 0]; int64(len(a)) > max {
					t.Fatalf("argument %d of %d bytes, limit %d", i, len(a), max)
				}
			}
			if max := map[bool]int64{true: pre.MaxQuery, false: lim.MaxQuery}[len(cmd.Args) == 1]; total > max {
				t.Fatalf("command of %d bytes, limit %d", total, max)
			}
			// Round trip: the arguments re-encoded read back the same.
			args := make([]string, len(cmd.Args))
			for i, a := range cmd.Args {
				args[i] = string(a)
			}
			back, err := NewReader(strings.NewReader(bulkCmd(args...))).ReadCommand(open, nil)
			if err != nil || len(back.Args) != len(args) {
				t.Fatalf("round trip of %q: %v", args, err)
			}
			for i := range args {
				if string(back.Args[i]) != args[i] {
					t.Fatalf("round trip of %q: argument %d is %q", args, i, back.Args[i])
				}
			}
		}
	})
}

// An argument larger than the read buffer is read into memory of its own
// that Go has not cleared (modelstore.BlobBuffer): it must come back byte
// for byte and owned (not pooled), and a cut-off one must be an error,
// never an argument holding what the memory held before.
func TestLargeArgumentUncleared(t *testing.T) {
	for _, size := range []int{64<<10 + 1, 1 << 20, 3<<20 + 7} {
		payload := make([]byte, size)
		for i := range payload {
			payload[i] = byte(i*7 + i>>9)
		}
		var in bytes.Buffer
		fmt.Fprintf(&in, "*2\r\n$4\r\nECHO\r\n$%d\r\n", size)
		in.Write(payload)
		in.WriteString("\r\n")
		cmd, err := NewReader(iotest.HalfReader(bytes.NewReader(in.Bytes()))).ReadCommand(open, nil)
		if err != nil {
			t.Fatalf("size %d: %v", size, err)
		}
		if !bytes.Equal(cmd.Args[1], payload) || !cmd.Owned(1) || cmd.Pooled(1) || cap(cmd.Args[1]) != size {
			t.Fatalf("size %d: argument of %d bytes (cap %d, owned %v) is not the payload",
				size, len(cmd.Args[1]), cap(cmd.Args[1]), cmd.Owned(1))
		}
		cut := in.Bytes()[:in.Len()-size/2]
		if cmd, err := NewReader(bytes.NewReader(cut)).ReadCommand(open, nil); err != io.ErrUnexpectedEOF {
			t.Fatalf("size %d cut in half: got %v, %v; want io.ErrUnexpectedEOF", size, cmd, err)
		}
	}
}

// parseLen's fast path agrees with its strconv path (parseLenSlow) on
// every kind of header: signs, zeros, overflow, junk.
func TestParseLen(t *testing.T) {
	cases := []string{"", "0", "00", "01", "1", "-1", "-0", "+1", "12a", "a12", "3136", " 1", "1 ",
		"999999999999999999", "1000000000000000000", "9223372036854775807", "9223372036854775808",
		"-9223372036854775808", "-9223372036854775809", "99999999999999999999", "123456789012345678901"}
	rng := rand.New(rand.NewPCG(1, 2))
	const alphabet = "0123456789-+ a"
	for range 20000 {
		b := make([]byte, rng.IntN(22))
		for i := range b {
			if rng.IntN(8) == 0 {
				b[i] = alphabet[rng.IntN(len(alphabet))]
			} else {
				b[i] = '0' + byte(rng.IntN(10))
			}
		}
		cases = append(cases, string(b))
	}
	for _, c := range cases {
		gn, gok := parseLen([]byte(c))
		wn, wok := parseLenSlow([]byte(c))
		if gn != wn || gok != wok {
			t.Fatalf("parseLen(%q) = %d, %v; want %d, %v", c, gn, gok, wn, wok)
		}
	}
	if n, ok := parseLen([]byte("3136")); !ok || n != 3136 {
		t.Fatalf("parseLen(3136) = %d, %v", n, ok)
	}
}
