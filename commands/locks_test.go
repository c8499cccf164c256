package commands

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/enclaveai/enclaveai/modelstore"
)

// TestLockOrderUnderLoad drives every lock of docs/LOCKS.md at once:
// writers, readers, transactions (App.tx's write side), SAVE and
// BGSAVE (with no lock of their own: Keyspace.mu), BGREWRITEAOF and the log's group commit
// (Log.wmu, mu, syncMu), CONFIG SET (Options.mu), CLIENT SETNAME and
// CLIENT LIST (clientsMu, Client.mu), SLOWLOG, expiry from Tick, and,
// when ONNX Runtime is found, model store, run and delete (Registry.mu,
// RunQueue.mu, Session.mu). A watchdog fails the test, with every
// goroutine's stack, when no client makes progress for deadlockAfter: a
// lock taken against the order shows as a deadlock here, and a field read
// outside its lock as a report of `make race`, which runs this test under
// the race detector.
func TestLockOrderUnderLoad(t *testing.T) {
	const deadlockAfter = 20 * time.Second
	runFor := 3 * time.Second
	if testing.Short() {
		runFor = time.Second
	}
	h := newLogHarness(t, t.TempDir(), nil, "everysec")
	s := h.s
	// Model stores take quota.mu too, under tx (and EXEC's write side).
	s.Opts.MaxModelBytesPerUser.Store(1 << 30)
	model := loadTestRuntime(t)

	type script func(i int) []string
	scripts := map[string]script{
		"writer": func(i int) []string {
			k := fmt.Sprintf("t%d", i%40)
			return []string{
				"AI.TENSORSET " + k + " FLOAT 2 2 VALUES 1 2 3 4",
				fmt.Sprintf("PEXPIRE %s %d", k, 1+i%30),
				fmt.Sprintf("RENAME t%d t%d", (i+7)%40, (i+13)%40),
				fmt.Sprintf("DEL t%d", (i+3)%40),
			}
		},
		"reader": func(i int) []string {
			return []string{
				fmt.Sprintf("AI.TENSORGET t%d VALUES", i%40),
				fmt.Sprintf("SCAN %d COUNT 10", i%7),
				"DBSIZE", "INFO", "CLIENT LIST", "SLOWLOG GET 2", "TTL t1",
			}
		},
		"multi": func(i int) []string {
			return []string{"MULTI", fmt.Sprintf("AI.TENSORSET t%d INT8 1 VALUES 5", i%40), "DEL t0", "FLUSHALL", "SAVE", "EXEC"}
		},
		"admin": func(i int) []string {
			fsync := []string{"everysec", "always", "no"}[i%3]
			return []string{"CONFIG SET appendfsync " + fsync, "CONFIG SET slowlog-log-slower-than 0",
				fmt.Sprintf("CLIENT SETNAME c%d", i), "BGSAVE", "BGREWRITEAOF", "SAVE", "LASTSAVE"}
		},
	}
	if model != nil {
		scripts["models"] = func(i int) []string {
			k := fmt.Sprintf("m%d", i%3)
			return []string{
				"AI.MODELSTORE " + k + " ONNX CPU BLOB ",
				"AI.TENSORSET x FLOAT 1 4 VALUES 1 2 3 4",
				"AI.MODELEXECUTE " + k + " INPUTS 1 x OUTPUTS 1 y",
				fmt.Sprintf("PEXPIRE m%d %d", (i+1)%3, 5+i%20),
				fmt.Sprintf("DEL m%d", (i+2)%3),
			}
		}
	}

	var progress atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for name, sc := range scripts {
		loopClient(s, name, stop, &wg, func(c *Client, i int) {
			for _, line := range sc(i) {
				argv := bytes.Fields([]byte(line))
				if strings.HasPrefix(line, "AI.MODELSTORE") {
					argv = append(argv, model)
				}
				s.Dispatch(c, argv, nil)
				s.CommitClient(c)
				if r := c.W.Bytes(); bytes.HasPrefix(r, []byte("-MISCONF")) || bytes.HasPrefix(r, []byte("-ERR snapshot failed")) {
					t.Errorf("%s: %s: %q", name, line, r)
				}
				c.W.Reset()
				progress.Add(1)
			}
		})
	}
	wg.Add(1)
	go func() { // the front end's 100 ms tick, faster: expiry, everysec fsync, save rules
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
				s.Tick()
			}
		}
	}()

	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	end := time.Now().Add(runFor)
	last, lastAt := progress.Load(), time.Now()
	for stopped := false; ; {
		select {
		case <-done:
			if n := progress.Load(); n == 0 {
				t.Fatal("no command ran")
			}
			t.Logf("%d commands in %v (%d clients)", progress.Load(), runFor, len(scripts))
			// Background saves and rewrites started last must end before
			// the temp dir goes.
			waitFor(t, h, "background work", func() bool {
				return s.Snapshot.writing.Load() == 0 && !s.aofState.rewriting.Load()
			})
			h.run(row("SAVE", "+OK"))
			return
		case <-time.After(100 * time.Millisecond):
		}
		if !stopped && time.Now().After(end) {
			close(stop)
			stopped = true
		}
		if n := progress.Load(); n != last {
			last, lastAt = n, time.Now()
		} else if time.Since(lastAt) > deadlockAfter {
			buf := make([]byte, 1<<22)
			buf = buf[:runtime.Stack(buf, true)]
			t.Fatalf("no command finished for %v: deadlock? goroutines:\n%s", deadlockAfter, buf)
		}
	}
}

// loadTestRuntime loads ONNX Runtime and returns linear.onnx's bytes, or
// nil when the runtime is not found (the cgo-free build).
func loadTestRuntime(t *testing.T) []byte {
	lib, err := modelstore.FindRuntimeLibrary("")
	if err != nil {
		lib, err = modelstore.FindRuntimeLibrary(filepath.Join("..", ".cache", "onnxruntime", modelstore.RuntimeVersionWanted, "libonnxruntime.so.1"))
	}
	if err != nil {
		t.Logf("no ONNX Runtime (%v): models left out", err)
		return nil
	}
	if err := modelstore.InitRuntime(lib); err != nil {
		t.Logf("ONNX Runtime: %v: models left out", err)
		return nil
	}
	model, err := os.ReadFile(filepath.Join("..", "modelstore", "testdata", "linear.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	return model
}
