//go:build cgo && !noort

package main

/*
#include <unistd.h>

// c_echo copies bytes from in to out one at a time, n of them or until EOF
// when n < 0: the peer's loop without the Go runtime around its calls.
static void c_echo(int in, int out, long n) {
	char b;
	for (long i = 0; n < 0 || i < n; i++) {
		if (read(in, &b, 1) != 1 || write(out, &b, 1) != 1) return;
	}
}

// c_ping makes n round trips: a byte written to to, read back on from.
static int c_ping(int to, int from, long n) {
	char b = 'x';
	for (long i = 0; i < n; i++) {
		if (write(to, &b, 1) != 1 || read(from, &b, 1) != 1) return -1;
	}
	return 0;
}
*/
import "C"

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"time"
)

// machine is section machine's figures: what this machine charges for the
// operations every round trip is made of, the floor under any server's
// figures here. Each is the median of several timed batches.
type machine struct {
	syscallNs float64 // one getppid(2)
	faultUs   float64 // one page's first write (a minor fault)
	// One-byte round trips over two pipes: key "thread" or "process",
	// then "-c" (loops in C: the kernel's cost) or "-go" (blocking system
	// calls from Go, on locked threads: what the Go runtime adds around
	// them); latency and the CPU of both ends, µs.
	trip, tripCPU map[string]float64
}

// tripKinds are the round trips section machine times, in report order.
var tripKinds = []string{"thread-c", "process-c", "thread-go", "process-go"}

// echoEnv makes this binary a pipe echo (section machine's peer process):
// "c" or "go" says which loop.
const echoEnv = "ENCLAVEAI_BENCH_ECHO"

// machineRounds is how many batches each figure is the median of.
const machineRounds = 5

// runEcho serves as the peer process when echoEnv is set: it echoes each
// byte read on fd 3 to fd 4 until EOF, then exits.
func runEcho() {
	switch os.Getenv(echoEnv) {
	case "":
		return
	case "c":
		C.c_echo(3, 4, -1)
	default:
		runtime.LockOSThread()
		echo(3, 4, -1)
	}
	os.Exit(0)
}

// echo copies bytes from fd in to fd out, one at a time, n of them (or
// until EOF when n < 0), with plain blocking system calls.
func echo(in, out, n int) {
	b := make([]byte, 1)
	for i := 0; n < 0 || i < n; i++ {
		if k, err := syscall.Read(in, b); k != 1 || err != nil {
			return
		}
		if _, err := syscall.Write(out, b); err != nil {
			return
		}
	}
}

// pingPong makes n round trips: a byte written to fd to, read back on
// from; in C when inC.
func pingPong(to, from, n int, inC bool) error {
	if inC {
		if C.c_ping(C.int(to), C.int(from), C.long(n)) != 0 {
			return fmt.Errorf("echo failed")
		}
		return nil
	}
	b := []byte{'x'}
	for range n {
		if _, err := syscall.Write(to, b); err != nil {
			return err
		}
		if k, err := syscall.Read(from, b); k != 1 || err != nil {
			return fmt.Errorf("echo read: %d, %v", k, err)
		}
	}
	return nil
}

func pipes() (req, rep [2]int, err error) {
	if err = syscall.Pipe2(req[:], syscall.O_CLOEXEC); err != nil {
		return
	}
	if err = syscall.Pipe2(rep[:], syscall.O_CLOEXEC); err != nil {
		closeFDs(req[0], req[1])
	}
	return
}

func closeFDs(fds ...int) {
	for _, fd := range fds {
		syscall.Close(fd)
	}
}

// roundTrip times trips one-byte round trips to an echo on another thread
// of this process, or in a child process (this binary, re-executed), with
// the loops in C or in Go; it returns µs per trip, and the CPU per trip of
// this process and the echo together. The calling goroutine is locked to
// its thread.
func roundTrip(kind string, trips int) (float64, float64, error) {
	loop, inC := "go", strings.HasSuffix(kind, "-c")
	if inC {
		loop = "c"
	}
	req, rep, err := pipes()
	if err != nil {
		return 0, 0, err
	}
	var cmd *exec.Cmd
	if strings.HasPrefix(kind, "process-") {
		self, err := os.Executable()
		if err != nil {
			closeFDs(req[0], req[1], rep[0], rep[1])
			return 0, 0, err
		}
		cmd = exec.Command(self)
		cmd.Env = append(os.Environ(), echoEnv+"="+loop)
		// The child's ends, closed here through their os.File (whose
		// finalizer would otherwise close the numbers again, by then
		// another file's).
		ends := []*os.File{os.NewFile(uintptr(req[0]), "echo-in"), os.NewFile(uintptr(rep[1]), "echo-out")}
		cmd.ExtraFiles = ends
		err = cmd.Start()
		for _, f := range ends {
			f.Close()
		}
		if err != nil {
			closeFDs(req[1], rep[0])
			return 0, 0, err
		}
		defer cmd.Wait()
	} else {
		defer closeFDs(req[0], rep[1])
		go func() {
			runtime.LockOSThread()
			if inC {
				C.c_echo(C.int(req[0]), C.int(rep[1]), C.long(trips+1000))
			} else {
				echo(req[0], rep[1], trips+1000)
			}
		}()
	}
	defer closeFDs(req[1], rep[0])                              // EOF ends a child's echo
	if err := pingPong(req[1], rep[0], 1000, inC); err != nil { // warm up
		return 0, 0, err
	}
	pid := os.Getpid()
	var peer func() time.Duration
	if cmd != nil {
		child := cmd.Process.Pid
		peer = func() time.Duration { return cpuOf(pid) + cpuOf(child) }
	} else {
		peer = func() time.Duration { return cpuOf(pid) }
	}
	cpu0, start := peer(), time.Now()
	err = pingPong(req[1], rep[0], trips, inC)
	wall, cpu := time.Since(start), peer()-cpu0
	if err != nil {
		return 0, 0, err
	}
	return float64(wall.Nanoseconds()) / float64(trips) / 1000, float64(cpu.Nanoseconds()) / float64(trips) / 1000, nil
}

// measureMachine measures section machine's figures.
func measureMachine() (*machine, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	m := &machine{trip: map[string]float64{}, tripCPU: map[string]float64{}}
	const calls, pages, trips = 100000, 4096, 20000
	var sc, pf []float64
	lat, cpu := map[string][]float64{}, map[string][]float64{}
	for range machineRounds {
		start := time.Now()
		for range calls {
			syscall.Getppid()
		}
		sc = append(sc, float64(time.Since(start).Nanoseconds())/calls)

		mem, err := syscall.Mmap(-1, 0, pages*4096, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
		if err != nil {
			return nil, err
		}
		start = time.Now()
		for i := 0; i < len(mem); i += 4096 {
			mem[i] = 1
		}
		pf = append(pf, float64(time.Since(start).Nanoseconds())/pages/1000)
		syscall.Munmap(mem)

		for _, k := range tripKinds {
			l, c, err := roundTrip(k, trips)
			if err != nil {
				return nil, fmt.Errorf("%s round trip: %w", k, err)
			}
			lat[k], cpu[k] = append(lat[k], l), append(cpu[k], c)
		}
	}
	m.syscallNs, m.faultUs = median(sc), median(pf)
	for _, k := range tripKinds {
		m.trip[k], m.tripCPU[k] = median(lat[k]), median(cpu[k])
	}
	return m, nil
}
