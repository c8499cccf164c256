package commands

import (
	"math"
	"time"
)

// WAIT numreplicas timeout and WAITAOF numlocal numreplicas timeout, as
// Redis 7.2 answers them on a master without replicas (EnclaveAI does not
// replicate): WAIT acknowledges no replica; WAITAOF waits until the
// client's writes so far are fsynced to the append-only log (numlocal 1),
// which under appendfsync everysec is the next background fsync and under
// no never comes, and answers how many of [local, replicas] have them.
// Both wait at most timeout milliseconds (0: until they are satisfied, or
// the client is killed), outside the transaction lock, and never inside
// MULTI, where they answer at once.
func init() {
	register(
		&Spec{Name: "wait", Arity: 3, Flags: NoTxLock, Group: "server",
			Summary: "Waits for replicas to acknowledge the client's writes: none do (EnclaveAI does not replicate).",
			Syntax:  "numreplicas timeout", Parse: parseWait},
		&Spec{Name: "waitaof", Arity: 4, Flags: NoTxLock, Group: "server",
			Summary: "Waits until the client's writes are fsynced to the append-only log (numlocal 1); answers [local, replicas].",
			Syntax:  "numlocal numreplicas timeout", Parse: parseWaitAOF},
	)
}

// waitPoll is how often a waiting WAIT or WAITAOF looks again.
const waitPoll = 5 * time.Millisecond

// waitCmd is WAIT (aof false) or WAITAOF (aof true).
type waitCmd struct {
	aof                bool
	numlocal, replicas int64
	timeout            time.Duration // 0: no limit
}

func parseWait(a Args) (Runner, error) {
	n, ok := parseInt(a.Next())
	if !ok {
		return nil, errNotInteger
	}
	t, err := parseWaitTimeout(a.Next())
	return waitCmd{replicas: n, timeout: t}, err
}

func parseWaitAOF(a Args) (Runner, error) {
	local, ok := parseInt(a.Next())
	switch {
	case !ok:
		return nil, errNotInteger
	case local < 0 || local > 1:
		return nil, Reply("ERR value is out of range, value must between 0 and 1")
	}
	n, ok := parseInt(a.Next())
	switch {
	case !ok:
		return nil, errNotInteger
	case n < 0:
		return nil, Reply("ERR value is out of range, must be positive")
	}
	t, err := parseWaitTimeout(a.Next())
	return waitCmd{aof: true, numlocal: local, replicas: n, timeout: t}, err
}

// parseWaitTimeout reads a timeout in milliseconds, as Redis 7.2's
// getTimeoutFromObjectOrReply: refused past what can be added to the
// clock. One past what a Duration counts in nanoseconds waits 146 years
// (it was refused as not an integer).
func parseWaitTimeout(b []byte) (time.Duration, error) {
	ms, ok := parseInt(b)
	switch {
	case !ok:
		return 0, Reply("ERR timeout is not an integer or out of range")
	case ms < 0:
		return 0, Reply("ERR timeout is negative")
	case ms > math.MaxInt64-time.Now().UnixMilli():
		return 0, Reply("ERR timeout is out of range")
	case ms > int64(time.Duration(1<<62)/time.Millisecond):
		return 1 << 62, nil
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// Run implements Runner.
func (c waitCmd) Run(x *Ctx) error {
	l := x.aof()
	if c.aof && c.numlocal > 0 && l == nil {
		return Reply("ERR WAITAOF cannot be used when numlocal is set but appendonly is disabled.")
	}
	woff := x.C.woff
	local := func() int64 {
		if l != nil && l.Fsynced() >= woff {
			return 1
		}
		return 0
	}
	// No replica ever acknowledges: a wait for one lasts its timeout.
	done := func() bool { return c.replicas <= 0 && (!c.aof || local() >= c.numlocal) }
	if !done() && !x.locked { // inside EXEC it answers at once, as in Redis
		x.waiting.Add(1) // INFO's blocked_clients
		defer x.waiting.Add(-1)
		x.C.blocked.Store(x.clock.Load())
		defer x.C.blocked.Store(0)
		var deadline time.Time
		if c.timeout > 0 {
			deadline = time.Now().Add(c.timeout)
		}
		tick := time.NewTicker(waitPoll)
		defer tick.Stop()
	wait:
		for !done() && (deadline.IsZero() || time.Now().Before(deadline)) {
			select {
			case <-tick.C:
			case <-x.C.killCh:
				break wait
			}
		}
	}
	if !c.aof {
		x.W.Int(0)
		return nil
	}
	x.W.Array(2)
	x.W.Int(local())
	x.W.Int(0)
	return nil
}
