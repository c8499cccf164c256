// Package benchproc starts the servers a benchmark measures (redis-server
// or enclaveai-server) as child processes on free loopback ports, and holds
// the small checks the benchmarks share.
package benchproc

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// Proc is a server child process.
type Proc struct {
	Name   string
	Addr   string // 127.0.0.1:port
	cmd    *exec.Cmd
	dir    string
	exited chan error // receives Wait's result once
}

// Start starts bin with args after the flags both servers take (--bind
// 127.0.0.1, --port, --dir, --save ""), on a free loopback port in a fresh
// directory with snapshots off, and waits until it answers DBSIZE (PING is
// answered while EnclaveAI is still loading). env adds to this process's
// environment. Its output goes to server.log in its directory, shown if it
// exits before answering.
func Start(name, bin string, env []string, args ...string) (*Proc, error) {
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "enclaveai-bench-")
	if err != nil {
		return nil, err
	}
	logf, err := os.Create(filepath.Join(dir, "server.log"))
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	defer logf.Close() // the child has its own descriptor
	p := &Proc{Name: name, Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), dir: dir, exited: make(chan error, 1)}
	args = append([]string{"--bind", "127.0.0.1", "--port", strconv.Itoa(port), "--dir", dir, "--save", ""}, args...)
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	if err := p.cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	go func() { p.exited <- p.cmd.Wait() }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		c := redis.NewClient(&redis.Options{Addr: p.Addr, Protocol: 2, MaxRetries: -1, DialTimeout: time.Second})
		err := c.Do(context.Background(), "DBSIZE").Err()
		c.Close()
		if err == nil {
			return p, nil
		}
		select {
		case werr := <-p.exited:
			log, _ := os.ReadFile(filepath.Join(dir, "server.log"))
			os.RemoveAll(dir)
			return nil, fmt.Errorf("%s exited (%v) before answering:\n%s", name, werr, log)
		default:
		}
		if time.Now().After(deadline) {
			p.cmd.Process.Kill()
			<-p.exited
			os.RemoveAll(dir)
			return nil, fmt.Errorf("%s at %s did not answer within 30s: %v", name, p.Addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Port is the server's TCP port, as text.
func (p *Proc) Port() string {
	_, port, _ := net.SplitHostPort(p.Addr)
	return port
}

// PID is the server's process id.
func (p *Proc) PID() int { return p.cmd.Process.Pid }

// Stop sends SIGTERM (with snapshots off nothing is saved; EnclaveAI
// writes its CPU profile, if asked for one), kills the process if it has
// not exited within 10 s, and removes its directory.
func (p *Proc) Stop() {
	defer os.RemoveAll(p.dir)
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		p.cmd.Process.Kill()
		<-p.exited
	}
}

// FreePort returns a loopback TCP port that was free a moment ago.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// SameFloats compares two FLOAT blobs allowing for the last bits of
// rounding (sessions may split the work differently).
func SameFloats(got, want []byte) error {
	if len(got) != len(want) {
		return fmt.Errorf("output of %d bytes, want %d", len(got), len(want))
	}
	for i := 0; i < len(got); i += 4 {
		g := math.Float32frombits(binary.LittleEndian.Uint32(got[i:]))
		w := math.Float32frombits(binary.LittleEndian.Uint32(want[i:]))
		if math.Abs(float64(g-w)) > 1e-4*math.Max(1, math.Abs(float64(w))) {
			return fmt.Errorf("output element %d is %g, want %g", i/4, g, w)
		}
	}
	return nil
}
