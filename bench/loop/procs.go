//go:build cgo && !noort

package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// proc is a server child process (redis-server or enclaveai-server).
type proc struct {
	name   string
	cmd    *exec.Cmd
	addr   string
	dir    string
	exited chan error // receives Wait's result once
}

// startProc starts bin with args plus the port and directory flags both
// servers take (--port, --dir), on a free loopback port with snapshots
// off, and waits until it answers DBSIZE (PING is answered while
// EnclaveAI is still loading). env adds to this process's environment.
func startProc(name, bin string, env []string, args ...string) (*proc, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "enclaveai-loop-")
	if err != nil {
		return nil, err
	}
	logf, err := os.Create(filepath.Join(dir, "server.log"))
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	defer logf.Close() // the child has its own descriptor
	p := &proc{name: name, addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), dir: dir, exited: make(chan error, 1)}
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
		c := redis.NewClient(&redis.Options{Addr: p.addr, Protocol: 2, MaxRetries: -1, DialTimeout: time.Second})
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
			return nil, fmt.Errorf("%s at %s did not answer within 30s: %v", name, p.addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// port is the server's TCP port, as text.
func (p *proc) port() string {
	_, port, _ := net.SplitHostPort(p.addr)
	return port
}

// stop sends SIGTERM (with snapshots off nothing is saved; EnclaveAI
// writes its CPU profile, if asked for one) and kills the process if it
// has not exited within 10 s.
func (p *proc) stop() {
	defer os.RemoveAll(p.dir)
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		p.cmd.Process.Kill()
		<-p.exited
	}
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// cpu is the CPU time the process's threads have used so far (the sum of
// /proc/PID/task/*/schedstat's first field, in nanoseconds): what a loop
// cost the server, whatever else the machine runs meanwhile.
// With engine workers (ONNX Runtime in child processes) their CPU counts.
func (p *proc) cpu() time.Duration { return treeCPU(p.cmd.Process.Pid) }

// treeCPU is the CPU time of pid and of its descendants alive now.
func treeCPU(pid int) time.Duration {
	total := cpuOf(pid)
	kids, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	for _, k := range kids {
		b, _ := os.ReadFile(k)
		for _, f := range strings.Fields(string(b)) {
			if c, err := strconv.Atoi(f); err == nil {
				total += treeCPU(c)
			}
		}
	}
	return total
}

// cpuOf is the CPU time of process pid's threads so far.
func cpuOf(pid int) time.Duration {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	var total int64
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue // the thread ended meanwhile
		}
		if f := strings.Fields(string(b)); len(f) > 0 {
			n, _ := strconv.ParseInt(f[0], 10, 64)
			total += n
		}
	}
	return time.Duration(total)
}
