//go:build cgo && !noort

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/enclaveai/enclaveai/bench/benchproc"
)

// cpu is the CPU time the server's threads have used so far (the sum of
// /proc/PID/task/*/schedstat's first field, in nanoseconds): what a loop
// cost the server, whatever else the machine runs meanwhile.
// With engine workers (ONNX Runtime in child processes) their CPU counts.
func cpu(p *benchproc.Proc) time.Duration { return treeCPU(p.PID()) }

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
