package commands

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/enclaveai/enclaveai/config"
)

// harness is a command layer with one client, driven by raw command lines.
type harness struct {
	t *testing.T
	s *App
	c *Client
}

func newHarness(t *testing.T) *harness { return newHarnessOpts(t, config.Default()) }

func newHarnessOpts(t *testing.T, opts *config.Options) *harness {
	t.Helper()
	s := NewApp(opts, slog.New(slog.NewTextHandler(io.Discard, nil)))
	// What the server holds outside Go's heap goes with the test: its
	// queue's workers, and its models' sessions (ONNX Runtime's memory,
	// 75 KB for linear.onnx). FuzzDispatch makes a server an input, and
	// its workers grew by 40 MB a second without this.
	t.Cleanup(func() {
		s.Queue.Close()
		removed, _ := s.Keys.Flush(nil)
		s.Release(removed)
	})
	return &harness{t: t, s: s, c: s.NewClient("127.0.0.1:50001", "127.0.0.1:6379", nil)}
}

// client connects another client to the same server.
func (h *harness) client(addr string) *harness {
	return &harness{t: h.t, s: h.s, c: h.s.NewClient(addr, "127.0.0.1:6379", nil)}
}

// do runs one command line, split as redis-cli and inline commands split
// it (config.SplitArgs: "double" and 'single' quotes, \xHH escapes), and
// returns the raw RESP reply bytes.
// setPairsInTransactions has h's client set tensors a and b of dtype to
// one value, i % mod for i = 1, 2, ..., each time in one MULTI / EXEC,
// until the function it returns is called (which waits for it to stop).
func (h *harness) setPairsInTransactions(dtype string, mod int) (stop func()) {
	quit := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 1; ; i++ {
			select {
			case <-quit:
				return
			default:
			}
			v := strconv.Itoa(i % mod)
			h.do("MULTI")
			h.do("AI.TENSORSET a " + dtype + " 1 VALUES " + v)
			h.do("AI.TENSORSET b " + dtype + " 1 VALUES " + v)
			h.do("EXEC")
		}
	}()
	return func() { close(quit); <-done }
}

func (h *harness) do(line string) []byte {
	h.t.Helper()
	args, err := config.SplitArgs(line)
	if err != nil || len(args) == 0 {
		h.t.Fatalf("bad command line %q: %v", line, err)
	}
	argv := make([][]byte, len(args))
	for i, a := range args {
		argv[i] = []byte(a)
	}
	h.s.Dispatch(h.c, argv, nil)
	h.s.CommitClient(h.c) // as the front end does before it sends replies
	out := bytes.Clone(h.c.W.Bytes())
	h.c.W.Reset()
	return out
}

// step is one table row: a command line and its reply rendered by render.
// want may be "~regexp" to match a pattern instead.
type step struct{ at, line, want string }

// row records the file and line it is called from, so a failing row
// reports its own position.
func row(line, want string) step {
	_, file, ln, _ := runtime.Caller(1)
	return step{filepath.Base(file) + ":" + strconv.Itoa(ln), line, want}
}

// run runs the steps in order on h's client.
func (h *harness) run(steps ...step) {
	h.t.Helper()
	for _, s := range steps {
		got := render(h.do(s.line))
		ok := got == s.want
		if strings.HasPrefix(s.want, "~") {
			ok = regexp.MustCompile(s.want[1:]).MatchString(got)
		}
		if !ok {
			h.t.Errorf("%s: %s\n got  %s\n want %s", s.at, s.line, got, s.want)
		}
	}
}

// render turns RESP replies into a compact, exact text: +simple, -error,
// :int, "bulk" (Go-quoted), nil ($-1), *nil (*-1), [array items],
// %{map k v}, ~[set], ,double, _ (RESP3 null), #t/#f, =“verbatim”, (big.
// Several replies are joined by " ; ".
func render(b []byte) string {
	var out []string
	for len(b) > 0 {
		s, rest, err := render1(b)
		if err != nil {
			return fmt.Sprintf("<bad RESP %q: %v>", b, err)
		}
		out = append(out, s)
		b = rest
	}
	return strings.Join(out, " ; ")
}

func render1(b []byte) (string, []byte, error) {
	i := bytes.Index(b, []byte("\r\n"))
	if i < 1 {
		return "", nil, fmt.Errorf("no line")
	}
	kind, line, rest := b[0], string(b[1:i]), b[i+2:]
	switch kind {
	case '+', '-', ':', ',', '(', '#':
		return string(kind) + line, rest, nil
	case '_':
		return "_", rest, nil
	case '$', '=':
		n, err := strconv.Atoi(line)
		if err != nil {
			return "", nil, err
		}
		if n < 0 {
			return "nil", rest, nil
		}
		if len(rest) < n+2 || string(rest[n:n+2]) != "\r\n" {
			return "", nil, fmt.Errorf("short bulk")
		}
		s := strconv.Quote(string(rest[:n]))
		if kind == '=' {
			s = "=" + s
		}
		return s, rest[n+2:], nil
	case '*', '%', '~':
		n, err := strconv.Atoi(line)
		if err != nil {
			return "", nil, err
		}
		if n < 0 {
			return "*nil", rest, nil
		}
		open, close := map[byte]string{'*': "[", '%': "%{", '~': "~["}[kind], map[byte]string{'*': "]", '%': "}", '~': "]"}[kind]
		if kind == '%' {
			n *= 2
		}
		items := make([]string, n)
		for j := range items {
			if items[j], rest, err = render1(rest); err != nil {
				return "", nil, err
			}
		}
		return open + strings.Join(items, " ") + close, rest, nil
	}
	return "", nil, fmt.Errorf("unknown type %q", kind)
}

func TestRender(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"+OK\r\n", "+OK"},
		{"-ERR x y\r\n", "-ERR x y"},
		{":-3\r\n", ":-3"},
		{"$3\r\na\nb\r\n", `"a\nb"`},
		{"$-1\r\n", "nil"},
		{"*-1\r\n", "*nil"},
		{"*2\r\n:1\r\n*1\r\n$0\r\n\r\n", `[:1 [""]]`},
		{"%1\r\n$1\r\nk\r\n,1.5\r\n", `%{"k" ,1.5}`},
		{"~1\r\n+a\r\n", "~[+a]"},
		{"=6\r\ntxt:ab\r\n", `="txt:ab"`},
		{"_\r\n+OK\r\n", "_ ; +OK"},
		{"$5\r\nab\r\n", `<bad RESP "$5\r\nab\r\n": short bulk>`},
	} {
		if got := render([]byte(c.in)); got != c.want {
			t.Errorf("render(%q) = %s, want %s", c.in, got, c.want)
		}
	}
}

// fakeModel stands for a model value: another type in the keyspace.
type fakeModel struct{ released int }

func (m *fakeModel) TypeName() string { return "AI__MODEL" }
func (m *fakeModel) MemSize() int64   { return 1000 }
func (m *fakeModel) Release()         { m.released++ }

// putModel stores a fake model at key.
func (h *harness) putModel(key string) *fakeModel {
	h.t.Helper()
	m := &fakeModel{}
	if _, err := h.s.Keys.Set(key, m, false); err != nil {
		h.t.Fatal(err)
	}
	return m
}

// loopClient runs body(c, i) for i = 0, 1, ... on a client of its own, in
// a goroutine counted by wg, until stop is closed.
func loopClient(s *App, name string, stop <-chan struct{}, wg *sync.WaitGroup, body func(c *Client, i int)) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		c := s.NewClient("127.0.0.1:"+name, "127.0.0.1:6379", nil)
		defer s.RemoveClient(c)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			body(c, i)
		}
	}()
}
