//go:build cgo && !noort

package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"strconv"
	"sync"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sys/unix"

	"github.com/enclaveai/enclaveai/bench/benchproc"
)

// The Go floors: the floor's three commands (SET, PING, GET) served by a
// Go program that does nothing else, in the two ways a Go server can
// serve connections. They tell what a loop costs a server written in Go
// because it is written that way, apart from anything EnclaveAI does:
//
//   - "floor-go": a goroutine per connection, reading and writing through
//     net.Conn (Go's network poller), as EnclaveAI's front end does;
//   - "floor-go-loop": one thread that waits in epoll for every
//     connection, reads what is ready, answers and writes, as Redis does.
//
// Each is this binary re-executed with goFloorEnv set to "goroutines" or
// "loop" (runGoFloor), on benchproc's flags.
const goFloorEnv = "ENCLAVEAI_BENCH_GOFLOOR"

// goFloorKinds maps the loop's kinds to the Go floor each runs on.
var goFloorKinds = map[string]string{"floor-go": "goroutines", "floor-go-loop": "loop"}

// startGoFloors starts the Go floors that kinds name (by kind), each
// holding the keys the floor's GETs read, as Redis's floor does. The
// caller stops them.
func startGoFloors(kinds []string, keys int) (map[string]*benchproc.Proc, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	procs := map[string]*benchproc.Proc{}
	for _, k := range kinds {
		mode, ok := goFloorKinds[k]
		if !ok || procs[k] != nil {
			continue
		}
		p, err := benchproc.Start(k, self, []string{goFloorEnv + "=" + mode})
		if err != nil {
			stopAll(procs)
			return nil, err
		}
		procs[k] = p
		c := redis.NewClient(&redis.Options{Addr: p.Addr, Protocol: 2})
		for i := range keys {
			if err = c.Set(context.Background(), "g:"+strconv.Itoa(i), make([]byte, 4*outputLen), 0).Err(); err != nil {
				break
			}
		}
		c.Close()
		if err != nil {
			stopAll(procs)
			return nil, fmt.Errorf("%s: %w", k, err)
		}
	}
	return procs, nil
}

func stopAll(procs map[string]*benchproc.Proc) {
	for _, p := range procs {
		p.Stop()
	}
}

// runGoFloor serves as a Go floor when goFloorEnv is set, and exits.
func runGoFloor() {
	mode := os.Getenv(goFloorEnv)
	if mode == "" {
		return
	}
	fs := flag.NewFlagSet("gofloor", flag.ExitOnError)
	bind := fs.String("bind", "127.0.0.1", "")
	port := fs.Int("port", 6379, "")
	fs.String("dir", "", "")  // benchproc's: nothing is stored
	fs.String("save", "", "") // ditto
	fs.Parse(os.Args[1:])
	addr, err := netip.ParseAddr(*bind)
	if err == nil {
		err = serveGoFloor(mode, netip.AddrPortFrom(addr, uint16(*port)))
	}
	fmt.Fprintln(os.Stderr, "gofloor:", err)
	os.Exit(1)
}

// serveGoFloor serves on addr in mode ("goroutines" or "loop"); it
// returns only on failure.
func serveGoFloor(mode string, addr netip.AddrPort) error {
	switch mode {
	case "goroutines":
		ln, err := net.Listen("tcp", addr.String())
		if err != nil {
			return err
		}
		return serveGoroutines(ln)
	case "loop":
		fd, err := listenFD(addr)
		if err != nil {
			return err
		}
		return serveLoop(fd)
	}
	return fmt.Errorf("unknown mode %q", mode)
}

// floorStore is the floors' keyspace.
type floorStore struct {
	mu sync.Mutex // held by the goroutines; the loop is alone
	m  map[string][]byte
}

// exec parses the complete commands at the start of in, executes them and
// appends their replies to out; it returns out and the bytes consumed. A
// command not all there yet is left for the next call; what is not a RESP
// array of bulk strings is an error.
func (s *floorStore) exec(in, out []byte) ([]byte, int, error) {
	done := 0
	for {
		args, n, err := parseCommand(in[done:])
		if err != nil || n == 0 {
			return out, done, err
		}
		done += n
		out = s.run(args, out)
	}
}

// run executes one command: SET, GET and PING as Redis does, DBSIZE (the
// benchmark's readiness check), +OK to CLIENT (go-redis's CLIENT SETINFO).
func (s *floorStore) run(args [][]byte, out []byte) []byte {
	switch {
	case len(args) == 3 && bytes.EqualFold(args[0], []byte("SET")):
		s.m[string(args[1])] = bytes.Clone(args[2])
		return append(out, "+OK\r\n"...)
	case len(args) == 2 && bytes.EqualFold(args[0], []byte("GET")):
		v, ok := s.m[string(args[1])]
		if !ok {
			return append(out, "$-1\r\n"...)
		}
		out = strconv.AppendInt(append(out, '$'), int64(len(v)), 10)
		out = append(append(out, "\r\n"...), v...)
		return append(out, "\r\n"...)
	case len(args) == 1 && bytes.EqualFold(args[0], []byte("PING")):
		return append(out, "+PONG\r\n"...)
	case len(args) == 1 && bytes.EqualFold(args[0], []byte("DBSIZE")):
		return append(strconv.AppendInt(append(out, ':'), int64(len(s.m)), 10), "\r\n"...)
	case len(args) > 0 && bytes.EqualFold(args[0], []byte("CLIENT")):
		return append(out, "+OK\r\n"...)
	}
	return append(out, "-ERR unknown command\r\n"...)
}

var errFloorProtocol = errors.New("protocol error")

// parseCommand parses one RESP array of bulk strings at the start of b
// (the floors' own parser, not the server's Reader: the floors measure a
// Go server without anything EnclaveAI does on the way):
// its arguments (slices of b) and its length, or 0 when b holds only part
// of it.
func parseCommand(b []byte) ([][]byte, int, error) {
	n, p, err := parseHeader(b, '*')
	if err != nil || p == 0 {
		return nil, 0, err
	}
	args := make([][]byte, 0, n)
	for range n {
		l, q, err := parseHeader(b[p:], '$')
		if err != nil || q == 0 {
			return nil, 0, err
		}
		p += q
		if len(b)-p < l+2 {
			return nil, 0, nil
		}
		args = append(args, b[p:p+l])
		p += l + 2
	}
	return args, p, nil
}

// parseHeader parses a line "<kind><n>\r\n" at the start of b: n and the
// line's length, 0 when the line is not all there.
func parseHeader(b []byte, kind byte) (int, int, error) {
	i := bytes.IndexByte(b, '\n')
	if i < 0 {
		return 0, 0, nil
	}
	if i < 3 || b[0] != kind || b[i-1] != '\r' {
		return 0, 0, errFloorProtocol
	}
	n, err := strconv.Atoi(string(b[1 : i-1]))
	if err != nil || n < 0 || n > 1<<20 {
		return 0, 0, errFloorProtocol
	}
	return n, i + 1, nil
}

// serveGoroutines serves each connection on a goroutine of its own.
func serveGoroutines(ln net.Listener) error {
	s := &floorStore{m: map[string][]byte{}}
	for {
		c, err := ln.Accept()
		if err != nil {
			return err
		}
		go s.serveConn(c)
	}
}

// serveConn reads c's commands and answers each batch read in one write.
func (s *floorStore) serveConn(c net.Conn) {
	defer c.Close()
	in := make([]byte, 0, 64<<10)
	var out []byte
	for {
		if len(in) == cap(in) {
			return // a command larger than the buffer: not the floor's
		}
		n, err := c.Read(in[len(in):cap(in)])
		if err != nil {
			return
		}
		in = in[:len(in)+n]
		s.mu.Lock()
		var used int
		out, used, err = s.exec(in, out[:0])
		s.mu.Unlock()
		if err != nil {
			return
		}
		in = in[:copy(in, in[used:])]
		if len(out) > 0 {
			if _, err := c.Write(out); err != nil {
				return
			}
		}
	}
}

// listenFD is a non-blocking TCP listening socket on addr (IPv4).
func listenFD(addr netip.AddrPort) (int, error) {
	if !addr.Addr().Is4() {
		return -1, errors.New("the loop floor listens on IPv4 only")
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1); err != nil {
		unix.Close(fd)
		return -1, err
	}
	sa := &unix.SockaddrInet4{Port: int(addr.Port()), Addr: addr.Addr().As4()}
	if err := unix.Bind(fd, sa); err != nil {
		unix.Close(fd)
		return -1, err
	}
	if err := unix.Listen(fd, 511); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// loopConn is a connection of the loop floor: its unparsed input and its
// replies not yet written; while any wait (waiting), it is watched for
// writability instead of input.
type loopConn struct {
	in, out []byte
	waiting bool
}

// serveLoop serves every connection on this thread: it waits in epoll,
// reads each ready connection, executes what arrived, and writes the
// replies at once (waiting for the socket to take what it did not).
func serveLoop(lfd int) error {
	runtime.LockOSThread()
	ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return err
	}
	if err := unix.EpollCtl(ep, unix.EPOLL_CTL_ADD, lfd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(lfd)}); err != nil {
		return err
	}
	s := &floorStore{m: map[string][]byte{}}
	conns := map[int]*loopConn{}
	drop := func(fd int) {
		unix.Close(fd) // closing removes it from the epoll set
		delete(conns, fd)
	}
	events := make([]unix.EpollEvent, 128)
	for {
		n, err := unix.EpollWait(ep, events, -1)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		for _, e := range events[:n] {
			fd := int(e.Fd)
			if fd == lfd {
				acceptAll(ep, lfd, conns)
				continue
			}
			c := conns[fd]
			if c == nil {
				continue
			}
			if c.waiting { // writable again: the rest of the replies
				if !flushLoopConn(ep, fd, c) {
					drop(fd)
				}
				continue
			}
			if len(c.in) == cap(c.in) {
				drop(fd) // a command larger than the buffer: not the floor's
				continue
			}
			k, err := unix.Read(fd, c.in[len(c.in):cap(c.in)])
			if err == unix.EAGAIN || err == unix.EINTR {
				continue
			}
			if err != nil || k == 0 {
				drop(fd)
				continue
			}
			c.in = c.in[:len(c.in)+k]
			var used int
			c.out, used, err = s.exec(c.in, c.out)
			if err != nil {
				drop(fd)
				continue
			}
			c.in = c.in[:copy(c.in, c.in[used:])]
			if !flushLoopConn(ep, fd, c) {
				drop(fd)
			}
		}
	}
}

// acceptAll accepts the connections waiting on lfd into the epoll set.
func acceptAll(ep, lfd int, conns map[int]*loopConn) {
	for {
		fd, _, err := unix.Accept4(lfd, unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC)
		if err != nil {
			return // EAGAIN: none left (or an error the next event retries)
		}
		unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
		if unix.EpollCtl(ep, unix.EPOLL_CTL_ADD, fd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd)}) != nil {
			unix.Close(fd)
			continue
		}
		conns[fd] = &loopConn{in: make([]byte, 0, 64<<10)}
	}
}

// flushLoopConn writes c's replies; what the socket does not take waits
// for it to be writable (EPOLLOUT instead of EPOLLIN until it is all
// written). It reports false when the connection failed.
func flushLoopConn(ep, fd int, c *loopConn) bool {
	for len(c.out) > 0 {
		k, err := unix.Write(fd, c.out)
		if err == unix.EINTR {
			continue
		}
		if err == unix.EAGAIN {
			if c.waiting {
				return true
			}
			c.waiting = true
			return unix.EpollCtl(ep, unix.EPOLL_CTL_MOD, fd, &unix.EpollEvent{Events: unix.EPOLLOUT, Fd: int32(fd)}) == nil
		}
		if err != nil {
			return false
		}
		c.out = c.out[:copy(c.out, c.out[k:])]
	}
	if c.waiting { // all written: read again
		c.waiting = false
		return unix.EpollCtl(ep, unix.EPOLL_CTL_MOD, fd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd)}) == nil
	}
	return true
}
