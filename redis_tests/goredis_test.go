// Package redis_tests holds EnclaveAI's black-box tests. This file drives
// the real server binary with go-redis v9 over RESP3, as a Go application
// would; the Python files next to it do the same with redis-py, raw
// sockets and redis-cli.
//
// The binary is $ENCLAVEAI_SERVER (make test-go sets it to the binary it
// has just built), else one built here from the working tree with
// `go build` into a temporary directory, never a bin/enclaveai-server that
// may be older than the code under test.
package redis_tests

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// ---------------------------------------------------------------------------
// Harness: one server process per test binary, shared by the tests.

var (
	shared     *server
	sharedErr  error
	sharedOnce sync.Once

	buildOnce sync.Once
	buildDir  string
	builtBin  string
	buildErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if shared != nil {
		if err := shared.stop(); err != nil {
			fmt.Fprintln(os.Stderr, "server:", err)
			code = 1
		}
	}
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// serverBinary returns the binary under test: $ENCLAVEAI_SERVER, or the
// working tree built once per test binary.
func serverBinary() (string, error) {
	if p := os.Getenv("ENCLAVEAI_SERVER"); p != "" {
		return p, nil
	}
	buildOnce.Do(func() {
		repo, err := filepath.Abs("..")
		if err != nil {
			buildErr = err
			return
		}
		if buildDir, buildErr = os.MkdirTemp("", "enclaveai-bin-"); buildErr != nil {
			return
		}
		builtBin = filepath.Join(buildDir, "enclaveai-server")
		cmd := exec.Command("go", "build", "-o", builtBin, "./cmd/enclaveai-server")
		cmd.Dir = repo
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	return builtBin, buildErr
}

// lockedBuffer collects the server's stderr.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

type server struct {
	cmd    *exec.Cmd
	addr   string
	dir    string
	stderr *lockedBuffer
	exited chan struct{}
	err    error // from Wait, once exited is closed
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// startServer starts the binary with extra flags and polls until it
// answers (PING, then DBSIZE until it is no longer -LOADING). The port is
// found free by listening on it and closing it, so another process may
// take it before the server listens: a start that fails on a port in use
// is retried on a new one.
func startServer(args ...string) (*server, error) {
	for attempt := 1; ; attempt++ {
		s, err := startServerOnce(args)
		if errors.Is(err, errPortInUse) && attempt < 5 {
			continue
		}
		return s, err
	}
}

var errPortInUse = errors.New("port in use")

func startServerOnce(args []string) (*server, error) {
	bin, err := serverBinary()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "enclaveai-gotest-")
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	s := &server{addr: fmt.Sprintf("127.0.0.1:%d", port), dir: dir, stderr: &lockedBuffer{}, exited: make(chan struct{})}
	s.cmd = exec.Command(bin, append([]string{"--port", strconv.Itoa(port), "--dir", dir}, args...)...)
	s.cmd.Dir = dir
	s.cmd.Stderr = s.stderr
	s.cmd.Env = os.Environ()
	if os.Getenv("ENCLAVEAI_ONNXRUNTIME_LIB") == "" {
		// A binary built here has no ONNX Runtime next to it: use make's copy.
		if libs, _ := filepath.Glob("../.cache/onnxruntime/*/libonnxruntime.so.1"); len(libs) > 0 {
			abs, _ := filepath.Abs(libs[0])
			s.cmd.Env = append(s.cmd.Env, "ENCLAVEAI_ONNXRUNTIME_LIB="+abs)
		}
	}
	if err := s.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { s.err = s.cmd.Wait(); close(s.exited) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		select {
		case <-s.exited:
			os.RemoveAll(dir)
			if strings.Contains(s.stderr.String(), "address already in use") {
				return nil, fmt.Errorf("%w: %s", errPortInUse, s.addr)
			}
			return nil, fmt.Errorf("server exited before it was ready (%v); stderr:\n%s", s.err, s.stderr)
		default:
		}
		if s.ready() {
			return s, nil
		}
		if time.Now().After(deadline) {
			s.cmd.Process.Kill()
			<-s.exited
			os.RemoveAll(dir)
			return nil, fmt.Errorf("server not ready after 10s; stderr:\n%s", s.stderr)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (s *server) ready() bool {
	c, err := net.DialTimeout("tcp", s.addr, time.Second)
	if err != nil {
		return false
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("*1\r\n$4\r\nPING\r\n*1\r\n$6\r\nDBSIZE\r\n")); err != nil {
		return false
	}
	br := bufio.NewReader(c)
	l1, err1 := br.ReadString('\n')
	l2, err2 := br.ReadString('\n')
	return err1 == nil && err2 == nil && l1 == "+PONG\r\n" && strings.HasPrefix(l2, ":")
}

// stop sends SHUTDOWN NOSAVE (SIGTERM if that fails) and reports a crash:
// a non-zero exit status or panic text on stderr.
func (s *server) stop() error {
	defer os.RemoveAll(s.dir)
	select {
	case <-s.exited:
		return fmt.Errorf("server had exited (%v); stderr:\n%s", s.err, s.stderr)
	default:
	}
	if c, err := net.DialTimeout("tcp", s.addr, time.Second); err == nil {
		c.Write([]byte("*2\r\n$8\r\nSHUTDOWN\r\n$6\r\nNOSAVE\r\n"))
		c.Close()
	}
	select {
	case <-s.exited:
	case <-time.After(5 * time.Second):
		s.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-s.exited:
		case <-time.After(10 * time.Second):
			s.cmd.Process.Kill()
			<-s.exited
			return fmt.Errorf("server did not stop; killed; stderr:\n%s", s.stderr)
		}
	}
	if s.err != nil {
		return fmt.Errorf("server exit: %v; stderr:\n%s", s.err, s.stderr)
	}
	if strings.Contains(s.stderr.String(), "panic:") {
		return fmt.Errorf("panic on stderr:\n%s", s.stderr)
	}
	return nil
}

// sharedServer is the package's server, started on first use. Each test
// gets it with an empty keyspace.
func sharedServer(t *testing.T) *server {
	t.Helper()
	sharedOnce.Do(func() { shared, sharedErr = startServer() })
	if sharedErr != nil {
		t.Fatal(sharedErr)
	}
	select {
	case <-shared.exited:
		t.Fatalf("server died: %v\n%s", shared.err, shared.stderr)
	default:
	}
	return shared
}

// client returns a go-redis client speaking RESP3 to a fresh keyspace.
func client(t *testing.T, proto int) (*redis.Client, context.Context) {
	t.Helper()
	s := sharedServer(t)
	rdb := redis.NewClient(&redis.Options{Addr: s.addr, Protocol: proto, DialTimeout: 5 * time.Second,
		ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second})
	t.Cleanup(func() { rdb.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	if err := rdb.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	return rdb, ctx
}

// wantErr checks an error reply's exact text.
func wantErr(t *testing.T, err error, text string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want %q", text)
	}
	if err.Error() != text {
		t.Fatalf("error %q, want %q", err.Error(), text)
	}
}

// ok fails the test on a command's error and returns the command, for
// its typed Val().
func ok[C interface{ Err() error }](t *testing.T, c C) C {
	t.Helper()
	if err := c.Err(); err != nil {
		t.Fatal(err)
	}
	return c
}

// Typed results of a generic Do command.
func text(t *testing.T, c *redis.Cmd) string {
	t.Helper()
	v, err := c.Text()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func slice(t *testing.T, c *redis.Cmd) []any {
	t.Helper()
	v, err := c.Slice()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// floats reads float VALUES, which RESP3 sends as doubles (go-redis's own
// Float64Slice does not take float64 elements).
func floats(t *testing.T, c *redis.Cmd) []float64 {
	t.Helper()
	var out []float64
	for i, v := range slice(t, c) {
		f, isFloat := v.(float64)
		if !isFloat {
			t.Fatalf("element %d is %T (%v), want a RESP3 double", i, v, v)
		}
		out = append(out, f)
	}
	return out
}

func ints(t *testing.T, c *redis.Cmd) []int64 {
	t.Helper()
	v, err := c.Int64Slice()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func strs(t *testing.T, c *redis.Cmd) []string {
	t.Helper()
	v, err := c.StringSlice()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func eq[T comparable](t *testing.T, got, want T) {
	t.Helper()
	if got != want {
		t.Fatalf("got %#v, want %#v", got, want)
	}
}

// ---------------------------------------------------------------------------
// Tests

func TestHandshake(t *testing.T) {
	rdb, ctx := client(t, 3)
	eq(t, ok(t, rdb.Ping(ctx)).Val(), "PONG")
	// go-redis sent HELLO 3 and CLIENT SETINFO on connect: the server
	// recorded them for this connection.
	info := text(t, rdb.Do(ctx, "CLIENT", "INFO"))
	fields := map[string]string{}
	for _, f := range strings.Fields(info) {
		k, v, _ := strings.Cut(f, "=")
		fields[k] = v
	}
	eq(t, fields["resp"], "3")
	if !strings.HasPrefix(fields["lib-name"], "go-redis") {
		t.Fatalf("lib-name %q, want go-redis...", fields["lib-name"])
	}
	eq(t, fields["lib-ver"], "9.23.0")
	hello := ok(t, rdb.Do(ctx, "HELLO", "3")).Val()
	m, isMap := hello.(map[any]any)
	if !isMap {
		t.Fatalf("HELLO 3 reply is %T, want a map", hello)
	}
	eq(t, m["proto"], any(int64(3)))
	eq(t, m["server"], any("redis"))
	eq(t, m["mode"], any("standalone"))
	eq(t, m["role"], any("master"))
	eq(t, m["id"], any(ok(t, rdb.ClientID(ctx)).Val()))
}

func TestTensorSetGetRESP3(t *testing.T) {
	rdb, ctx := client(t, 3)
	eq(t, text(t, rdb.Do(ctx, "AI.TENSORSET", "t", "FLOAT", 2, 2, "VALUES", 1, 0.1, -2.5, "inf")), "OK")
	vals := slice(t, rdb.Do(ctx, "AI.TENSORGET", "t", "VALUES"))
	want := []float64{1, float64(float32(0.1)), -2.5, math.Inf(1)}
	if len(vals) != len(want) {
		t.Fatalf("VALUES %v", vals)
	}
	for i, v := range vals {
		f, ok := v.(float64)
		if !ok {
			t.Fatalf("VALUES[%d] is %T (%v), want a RESP3 double", i, v, v)
		}
		if f != want[i] {
			t.Fatalf("VALUES[%d] = %v, want %v", i, f, want[i])
		}
	}
	eq(t, text(t, rdb.Do(ctx, "AI.TENSORSET", "d", "DOUBLE", 3, "VALUES", "0.1", "1e-300", "-0")), "OK")
	d := floats(t, rdb.Do(ctx, "AI.TENSORGET", "d", "VALUES"))
	if !slices.Equal(d, []float64{0.1, 1e-300, 0}) || !math.Signbit(d[2]) {
		t.Fatalf("DOUBLE VALUES %v", d)
	}
	eq(t, text(t, rdb.Do(ctx, "AI.TENSORSET", "i", "INT64", 3, "VALUES", math.MinInt64, 0, math.MaxInt64)), "OK")
	ints := ints(t, rdb.Do(ctx, "AI.TENSORGET", "i", "VALUES"))
	if !slices.Equal(ints, []int64{math.MinInt64, 0, math.MaxInt64}) {
		t.Fatalf("INT64 VALUES %v", ints)
	}
	eq(t, text(t, rdb.Do(ctx, "AI.TENSORSET", "s", "STRING", 2, "VALUES", "ab", "c")), "OK")
	strs := strs(t, rdb.Do(ctx, "AI.TENSORGET", "s", "VALUES"))
	if !slices.Equal(strs, []string{"ab", "c"}) {
		t.Fatalf("STRING VALUES %v", strs)
	}
}

func TestTensorMetaAndBlob(t *testing.T) {
	rdb, ctx := client(t, 3)
	blob := []byte{1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 5, 0, 0, 0, 6, 0, 0, 0}
	eq(t, text(t, rdb.Do(ctx, "AI.TENSORSET", "t", "INT32", 2, 3, "BLOB", blob)), "OK")
	meta := slice(t, rdb.Do(ctx, "AI.TENSORGET", "t", "META"))
	if fmt.Sprint(meta) != "[dtype INT32 shape [2 3]]" {
		t.Fatalf("META %#v", meta)
	}
	full := slice(t, rdb.Do(ctx, "AI.TENSORGET", "t"))
	if len(full) != 6 || full[4] != "blob" || full[5] != string(blob) {
		t.Fatalf("META BLOB %#v", full)
	}
	mv := slice(t, rdb.Do(ctx, "AI.TENSORGET", "t", "META", "VALUES"))
	if fmt.Sprint(mv) != "[dtype INT32 shape [2 3] values [1 2 3 -1 5 6]]" {
		t.Fatalf("META VALUES %#v", mv)
	}
	eq(t, text(t, rdb.Do(ctx, "AI.TENSORGET", "t", "BLOB")), string(blob))
}

func TestFloatValuesOverRESP2(t *testing.T) {
	rdb, ctx := client(t, 2)
	eq(t, text(t, rdb.Do(ctx, "AI.TENSORSET", "t", "FLOAT", 3, "VALUES", 0.1, 1, "-inf")), "OK")
	vals := strs(t, rdb.Do(ctx, "AI.TENSORGET", "t", "VALUES"))
	if !slices.Equal(vals, []string{"0.10000000149011612", "1", "-inf"}) {
		t.Fatalf("RESP2 VALUES %q, want RedisAI's bulk strings", vals)
	}
}

func TestPipeline(t *testing.T) {
	rdb, ctx := client(t, 3)
	cmds, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := 0; i < 100; i++ {
			p.Do(ctx, "AI.TENSORSET", fmt.Sprintf("k%d", i), "INT16", 1, "VALUES", i)
		}
		for i := 0; i < 100; i++ {
			p.Do(ctx, "AI.TENSORGET", fmt.Sprintf("k%d", i), "VALUES")
		}
		p.Do(ctx, "AI.TENSORGET", "nokey")
		return nil
	})
	if err == nil {
		t.Fatal("pipeline with a failing command returned no error")
	}
	eq(t, len(cmds), 201)
	for i := 0; i < 100; i++ {
		eq(t, text(t, cmds[i].(*redis.Cmd)), "OK")
		got := ints(t, cmds[100+i].(*redis.Cmd))
		if !slices.Equal(got, []int64{int64(i)}) {
			t.Fatalf("k%d VALUES %v", i, got)
		}
	}
	wantErr(t, cmds[200].Err(), "ERR tensor key is empty or in a different shard")
	eq(t, ok(t, rdb.DBSize(ctx)).Val(), int64(100))
}

func TestTxPipelined(t *testing.T) {
	rdb, ctx := client(t, 3)
	var get *redis.Cmd
	cmds, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Do(ctx, "AI.TENSORSET", "a", "DOUBLE", 2, "VALUES", 1.5, 2.5)
		get = p.Do(ctx, "AI.TENSORGET", "a", "VALUES")
		p.Del(ctx, "a")
		p.Exists(ctx, "a")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	eq(t, len(cmds), 4)
	vals := floats(t, get)
	if !slices.Equal(vals, []float64{1.5, 2.5}) {
		t.Fatalf("values in EXEC %v", vals)
	}
	eq(t, ok(t, cmds[2].(*redis.IntCmd)).Val(), int64(1))
	eq(t, ok(t, cmds[3].(*redis.IntCmd)).Val(), int64(0))

	// A command that fails at run time does not abort the others.
	cmds, err = rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Do(ctx, "AI.TENSORSET", "b", "FLOAT", 1)
		p.Do(ctx, "AI.TENSORSET", "c", "NOTATYPE", 1)
		return nil
	})
	wantErr(t, err, "ERR invalid data type")
	eq(t, text(t, cmds[0].(*redis.Cmd)), "OK")
	eq(t, ok(t, rdb.Exists(ctx, "b", "c")).Val(), int64(1))

	// An arity error aborts the whole transaction (a RedisAI command's
	// does not: RedisAI checks its own count when it runs).
	_, err = rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Do(ctx, "AI.TENSORSET", "d", "FLOAT", 1)
		p.Do(ctx, "DEL")
		return nil
	})
	if err == nil || !strings.Contains(err.Error(), "EXECABORT") && !strings.Contains(err.Error(), "wrong number of arguments") {
		t.Fatalf("aborted transaction: err %v", err)
	}
	eq(t, ok(t, rdb.Exists(ctx, "d", "e")).Val(), int64(0))
}

// go-redis's optimistic transaction: Watch, read, write in TxPipelined;
// redis.TxFailedErr when another client changed the key in between.
func TestWatch(t *testing.T) {
	for _, proto := range []int{2, 3} {
		rdb, ctx := client(t, proto)
		other, _ := client(t, proto)
		key := fmt.Sprintf("watched%d", proto)
		ok(t, rdb.Do(ctx, "AI.TENSORSET", key, "INT64", 1, "VALUES", 1))
		bump := func(interfere bool) error {
			return rdb.Watch(ctx, func(tx *redis.Tx) error {
				v := ints(t, tx.Do(ctx, "AI.TENSORGET", key, "VALUES"))
				if interfere {
					ok(t, other.Do(ctx, "AI.TENSORSET", key, "INT64", 1, "VALUES", 100))
				}
				_, err := tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
					p.Do(ctx, "AI.TENSORSET", key, "INT64", 1, "VALUES", v[0]+1)
					return nil
				})
				return err
			}, key)
		}
		if err := bump(false); err != nil {
			t.Fatal(err)
		}
		eq(t, ints(t, rdb.Do(ctx, "AI.TENSORGET", key, "VALUES"))[0], int64(2))
		if err := bump(true); err != redis.TxFailedErr {
			t.Fatalf("RESP%d: a watched key changed by another client: err %v", proto, err)
		}
		eq(t, ints(t, rdb.Do(ctx, "AI.TENSORGET", key, "VALUES"))[0], int64(100))
	}
}

func TestKeyCommands(t *testing.T) {
	rdb, ctx := client(t, 3)
	for _, k := range []string{"a", "b", "c"} {
		eq(t, text(t, rdb.Do(ctx, "AI.TENSORSET", k, "FLOAT", 1)), "OK")
	}
	eq(t, ok(t, rdb.Type(ctx, "a")).Val(), "AI_TENSOR")
	eq(t, ok(t, rdb.Type(ctx, "nokey")).Val(), "none")
	eq(t, ok(t, rdb.Exists(ctx, "a", "b", "nokey")).Val(), int64(2))
	eq(t, ok(t, rdb.Del(ctx, "a", "nokey")).Val(), int64(1))
	eq(t, ok(t, rdb.Unlink(ctx, "b")).Val(), int64(1))
	eq(t, ok(t, rdb.Rename(ctx, "c", "d")).Val(), "OK")
	eq(t, ok(t, rdb.Expire(ctx, "d", time.Minute)).Val(), true)
	ttl := ok(t, rdb.TTL(ctx, "d")).Val()
	if ttl < 59*time.Second || ttl > time.Minute {
		t.Fatalf("TTL %v", ttl)
	}
	eq(t, ok(t, rdb.Persist(ctx, "d")).Val(), true)
	eq(t, ok(t, rdb.TTL(ctx, "d")).Val(), time.Duration(-1))
	eq(t, ok(t, rdb.Keys(ctx, "*")).Val()[0], "d")
	eq(t, ok(t, rdb.DBSize(ctx)).Val(), int64(1))
	wantErr(t, rdb.Rename(ctx, "nokey", "x").Err(), "ERR no such key")
}

func TestScanIterator(t *testing.T) {
	rdb, ctx := client(t, 3)
	want := map[string]bool{}
	_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := 0; i < 300; i++ {
			k := fmt.Sprintf("key:%03d", i)
			want[k] = true
			p.Do(ctx, "AI.TENSORSET", k, "UINT8", 1)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	it := rdb.Scan(ctx, 0, "", 10).Iterator()
	for it.Next(ctx) {
		if seen[it.Val()] {
			t.Fatalf("SCAN returned %q twice", it.Val())
		}
		seen[it.Val()] = true
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	eq(t, len(seen), len(want))
	for k := range want {
		if !seen[k] {
			t.Fatalf("SCAN missed %q", k)
		}
	}
	n := 0
	it = rdb.Scan(ctx, 0, "key:1*", 7).Iterator()
	for it.Next(ctx) {
		n++
	}
	eq(t, n, 100)
	keys, cursor := ok(t, rdb.ScanType(ctx, 0, "", 1000, "AI_TENSOR")).Val()
	eq(t, len(keys), 300)
	eq(t, cursor, uint64(0))
}

func TestErrorTexts(t *testing.T) {
	rdb, ctx := client(t, 3)
	cases := []struct {
		args []any
		want string
	}{
		{[]any{"AI.TENSORGET", "nokey"}, "ERR tensor key is empty or in a different shard"},
		{[]any{"AI.TENSORSET", "k"}, "ERR wrong number of arguments for 'ai.tensorset' command"},
		{[]any{"AI.TENSORSET", "k", "INT", 1}, "ERR invalid data type"},
		{[]any{"AI.TENSORSET", "k", "FLOAT", -1}, "ERR invalid or negative value found in tensor shape"},
		{[]any{"AI.TENSORSET", "k", "FLOAT", 2, "VALUES", 1}, "ERR wrong number of values was given in 'AI.TENSORSET' command"},
		{[]any{"AI.TENSORSET", "k", "INT8", 1, "VALUES", 128}, "ERR invalid value"},
		{[]any{"AI.TENSORSET", "k", "FLOAT", 1, "BLOB", "abc"}, "ERR data length does not match tensor shape and type"},
		{[]any{"AI.TENSORSET", "k", "FLOAT", 1, "BLOB"}, "ERR a single binary string should come after the BLOB argument in 'AI.TENSORSET' command"},
		{[]any{"AI.TENSORSET", "k", "BOOL", 1, "BLOB", "\x02"}, "ERR BOOL tensor elements must be 0 or 1"},
		{[]any{"AI.TENSORSET", "k", "STRING", 2, "BLOB", "a\x00"}, "ERR Number of string elements in data blob does not match tensor length"},
		{[]any{"foo", "bar"}, "ERR unknown command 'foo', with args beginning with: 'bar' "},
		{[]any{"SELECT", 1}, "ERR DB index is out of range"},
		{[]any{"CONFIG", "SET", "logfile", "x"}, "ERR CONFIG SET failed (possibly related to argument 'logfile') - can't set immutable config"},
		{[]any{"EXEC"}, "ERR EXEC without MULTI"},
	}
	for _, c := range cases {
		err := rdb.Do(ctx, c.args...).Err()
		var rerr redis.Error
		if !errors.As(err, &rerr) {
			t.Fatalf("%v: error %v (%T) is not a server error reply", c.args, err, err)
		}
		wantErr(t, err, c.want)
	}
	eq(t, ok(t, rdb.Exists(ctx, "k")).Val(), int64(0))
	// The connection is still in good shape.
	eq(t, ok(t, rdb.Ping(ctx)).Val(), "PONG")
}

func TestConfigInfoClient(t *testing.T) {
	rdb, ctx := client(t, 3)
	eq(t, ok(t, rdb.ConfigGet(ctx, "maxclients")).Val()["maxclients"], "10000")
	eq(t, ok(t, rdb.ConfigSet(ctx, "maxmemory", "512mb")).Val(), "OK")
	t.Cleanup(func() { rdb.ConfigSet(context.Background(), "maxmemory", "0") })
	eq(t, ok(t, rdb.ConfigGet(ctx, "maxmemory")).Val()["maxmemory"], "536870912")
	info := ok(t, rdb.Info(ctx, "server", "clients")).Val()
	for _, f := range []string{"redis_version:", "connected_clients:", "# Server", "# Clients"} {
		if !strings.Contains(info, f) {
			t.Fatalf("INFO lacks %q:\n%s", f, info)
		}
	}
	eq(t, text(t, rdb.Do(ctx, "CLIENT", "SETNAME", "gotest")), "OK")
	eq(t, ok(t, rdb.ClientGetName(ctx)).Val(), "gotest")
	if !strings.Contains(ok(t, rdb.ClientList(ctx)).Val(), "name=gotest ") {
		t.Fatal("CLIENT LIST lacks the name")
	}
	n := int(ok(t, rdb.Do(ctx, "COMMAND", "COUNT")).Val().(int64))
	names := strs(t, rdb.Do(ctx, "COMMAND", "LIST"))
	eq(t, n, len(names))
	if !slices.Contains(names, "ai.tensorset") || !slices.Contains(names, "ai.tensorget") {
		t.Fatalf("COMMAND LIST lacks the tensor commands: %v", names)
	}
	docs := ok(t, rdb.CommandList(ctx, nil)).Val()
	eq(t, len(docs), n)
}
