//go:build cgo && !noort

package main

import (
	"strings"
	"testing"
)

// The core section names redis-benchmark as a TENSORSET / TENSORGET
// target's bound only when it used more CPU a request than both servers.
func TestCoreReportNamesTheClient(t *testing.T) {
	two := func(x float64) []float64 { return []float64{x, x} }
	c := &core{clients: 50, pipeline: 16, requests: 1000, by: map[string][]float64{},
		serverCPU: map[string][]float64{}, clientCPU: map[string][]float64{}}
	for _, srv := range coreServers {
		for _, op := range []string{"SET", "GET"} {
			k := srv + " " + op
			c.by[k] = two(100000)
			c.serverCPU[k] = two(1.5)
			c.clientCPU[k] = two(2.5) // the client the slower end
		}
	}
	c.serverCPU["enclaveai SET"] = two(3) // a server the slower end
	md := (&report{core: c}).markdown()
	line := func(prefix string) string {
		for _, l := range strings.Split(md, "\n") {
			if strings.HasPrefix(l, prefix) {
				return l
			}
		}
		t.Fatalf("no line %q in:\n%s", prefix, md)
		return ""
	}
	if l := line("| TENSORGET ≥ 1.0x Redis GET, log none"); !strings.Contains(l, "the client's: redis-benchmark's one thread used 2.50 and 2.50 µs") {
		t.Errorf("GET's bound does not name the client: %s", l)
	}
	if l := line("| TENSORSET ≥ 1.0x Redis SET, log none"); !strings.HasSuffix(l, "| none |") {
		t.Errorf("SET's bound names the client though EnclaveAI used more CPU a request: %s", l)
	}
	if l := line("| GET / TENSORGET | none |"); !strings.Contains(l, "| 1.50 / 2.50 | 1.50 / 2.50 |") {
		t.Errorf("the CPU columns: %s", l)
	}
}
