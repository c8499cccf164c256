package commands

import (
	"testing"
	"time"

	"github.com/enclaveai/enclaveai/config"
)

// WAITAOF answers [local, replicas] once the client's writes are fsynced
// (the everysec fsync of a tick here), or when its timeout ends; WAIT
// finds no replica. Errors are Redis 7.2's.
func TestWaitAOF(t *testing.T) {
	h := newLogHarness(t, t.TempDir(), nil, "everysec")
	h.run(
		row("WAITAOF 0 0 0", "[:1 :0]"), // no write yet
		row("WAIT 0 0", ":0"),
		row("WAITAOF 2 0 0", "-ERR value is out of range, value must between 0 and 1"),
		row("WAITAOF 0 -1 0", "-ERR value is out of range, must be positive"),
		row("WAITAOF 0 0 -1", "-ERR timeout is negative"),
		row("WAITAOF 0 0 x", "-ERR timeout is not an integer or out of range"),
		row("WAIT x 0", "-ERR value is not an integer or out of range"),
		row("AI.TENSORSET a INT8 1 VALUES 1", "+OK"),
	)
	start := time.Now()
	// No tick has fsynced it: the timeout ends the wait.
	h.run(row("WAITAOF 1 0 100", "[:0 :0]"))
	if d := time.Since(start); d < 100*time.Millisecond {
		t.Errorf("WAITAOF 1 0 100 answered in %v", d)
	}
	h.run(
		row("MULTI", "+OK"),
		row("WAITAOF 1 0 0", "+QUEUED"),
		row("EXEC", "[[:0 :0]]"), // inside EXEC it never blocks
	)
	stop := make(chan struct{})
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
				h.s.Tick()
			}
		}
	}()
	defer close(stop)
	h.run(row("WAITAOF 1 0 0", "[:1 :0]"))
	// A replica never acknowledges: the timeout ends the wait.
	start = time.Now()
	h.run(row("WAIT 1 100", ":0"), row("WAITAOF 1 1 100", "[:1 :0]"))
	if d := time.Since(start); d < 200*time.Millisecond {
		t.Errorf("WAIT and WAITAOF for a replica answered in %v", d)
	}
}

func TestWaitAOFUnderAlwaysAndWithoutLog(t *testing.T) {
	h := newLogHarness(t, t.TempDir(), nil, "always")
	h.run(row("AI.TENSORSET a INT8 1 VALUES 1", "+OK"), row("WAITAOF 1 0 0", "[:1 :0]"))
	opts := config.Default()
	opts.AppendOnly = false
	h = newHarnessOpts(t, opts)
	h.run(
		row("WAITAOF 1 0 0", "-ERR WAITAOF cannot be used when numlocal is set but appendonly is disabled."),
		row("WAITAOF 0 0 0", "[:0 :0]"),
	)
}

// Records written under another policy are fsynced once CONFIG SET makes
// it always, not at the next write: WAITAOF for them answers at once
// (diff review: it waited for another client's write).
func TestWaitAOFAfterSwitchToAlways(t *testing.T) {
	h := newLogHarness(t, t.TempDir(), nil, "no")
	h.run(
		row("AI.TENSORSET a INT8 1 VALUES 1", "+OK"),
		row("WAITAOF 1 0 10", "[:0 :0]"),
		row("CONFIG SET appendfsync always", "+OK"),
		row("WAITAOF 1 0 1000", "[:1 :0]"),
	)
}

// A timeout is refused only where Redis 7.2 refuses it: past what its
// clock can add it to ("timeout is out of range"). One too long for a
// Duration's nanoseconds (146 years and more) waits as long as one can:
// WAIT 0 5000000000000 answered "timeout is not an integer or out of
// range" where Redis answers 0.
func TestWaitTimeoutRange(t *testing.T) {
	h := newHarness(t)
	h.run(
		row("WAIT 0 5000000000000", ":0"),
		row("WAITAOF 0 0 5000000000000", "[:0 :0]"),
		row("WAIT 0 9223372036854775807", "-ERR timeout is out of range"),
		row("WAITAOF 0 0 9223372036854775807", "-ERR timeout is out of range"),
		row("WAIT 0 9223372036854775808", "-ERR timeout is not an integer or out of range"),
	)
	if d, err := parseWaitTimeout([]byte("5000000000000")); err != nil || d < 1<<62 {
		t.Errorf("5000000000000 ms: %v, %v; want a wait as long as a Duration allows", d, err)
	}
}
