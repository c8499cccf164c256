package commands

import (
	"slices"
	"time"

	"github.com/enclaveai/enclaveai/cluster"
)

func init() {
	register(
		&Spec{Name: "multi", Arity: 1, Flags: Fast | LoadingOK | txControl, Group: "transactions",
			Summary: "Starts a transaction.", Parse: parseMulti},
		&Spec{Name: "exec", Arity: 1, Flags: LoadingOK | NoTxLock | SkipSlowlog | txControl, Group: "transactions",
			Summary: "Executes all commands in a transaction, atomically.", Parse: parseExec},
		&Spec{Name: "discard", Arity: 1, Flags: Fast | LoadingOK | txControl, Group: "transactions",
			Summary: "Discards a transaction.", Parse: parseDiscard},
		&Spec{Name: "watch", Arity: -2, Flags: Fast | LoadingOK | txControl, FirstKey: 1, LastKey: -1, Step: 1, Group: "transactions",
			Summary: "Monitors changes to keys: EXEC runs nothing (a null reply) once one has changed.", Syntax: "key [key ...]", Parse: parseWatch},
		&Spec{Name: "unwatch", Arity: 1, Flags: Fast | LoadingOK, Group: "transactions",
			Summary: "Forgets the keys WATCHed.", Parse: parseUnwatch},
	)
}

// preparer is a queued command with slow work that needs no lock (a
// model's compilation): EXEC runs prepare for each before it takes the
// write side of the transaction lock, so that a transaction holds the
// other clients for its keyspace updates only, not for seconds of
// compilation; Run then uses what prepare made. discard gives it back when
// the transaction runs nothing.
type preparer interface {
	prepare(x *Ctx)
	discard(x *Ctx)
}

func parseWatch(a Args) (Runner, error) {
	return watchCmd{keys: keyStrings(a.Rest())}, nil
}

// watchCmd is WATCH key [key ...]. It runs at once inside MULTI (to refuse
// itself there, without aborting the transaction, as Redis does). Watching
// another user's value is refused as reading it is.
type watchCmd struct{ keys []string }

// Run implements Runner.
func (c watchCmd) Run(x *Ctx) error {
	if x.C.inMulti {
		return Reply("ERR WATCH inside MULTI is not allowed")
	}
	allow := x.allow()
	for _, k := range c.keys {
		if err := x.Keys.Watch(allow, &x.C.watch, k); err != nil {
			return err
		}
	}
	x.W.OK()
	return nil
}

func parseUnwatch(a Args) (Runner, error) {
	return unwatchCmd{}, nil
}

// unwatchCmd is UNWATCH.
type unwatchCmd struct{}

// Run implements Runner.
func (unwatchCmd) Run(x *Ctx) error {
	x.unwatch(x.C)
	x.W.OK()
	return nil
}

func parseMulti(a Args) (Runner, error) {
	return multiCmd{}, nil
}

// multiCmd is MULTI.
type multiCmd struct{}

// Run implements Runner.
func (multiCmd) Run(x *Ctx) error {
	if x.C.inMulti {
		return Reply("ERR MULTI calls can not be nested")
	}
	x.C.startMulti()
	x.W.OK()
	return nil
}

func parseDiscard(a Args) (Runner, error) {
	return discardCmd{}, nil
}

// discardCmd is DISCARD.
type discardCmd struct{}

// Run implements Runner.
func (discardCmd) Run(x *Ctx) error {
	if !x.C.inMulti {
		return Reply("ERR DISCARD without MULTI")
	}
	x.endMulti(x.C).release()
	x.W.OK()
	return nil
}

// routeQueued routes c's queued commands again, under the write side of
// the transaction lock, at EXEC: their keys must share one slot, which
// this node must still serve (or, after ASKING, import).
func (s *App) routeQueued(c *Client) error {
	slot := -1
	for _, cmd := range c.multi {
		for _, p := range cmd.spec.KeyPositions(cmd.argv) {
			switch k := cluster.KeySlot(cmd.argv[p]); {
			case slot < 0:
				slot = k
			case k != slot:
				return errCrossSlot
			}
		}
	}
	m := s.Cluster.mig.Load()
	for _, cmd := range c.multi {
		if err := s.route(c, cmd.spec, cmd.argv); err != nil {
			return err
		}
		// A queued write to a key on its way to another node waits, as
		// one sent alone does (Ctx.fenced).
		if m != nil && m.slot == slot && cmd.spec.Has(Write) && m.State() == migStart && m.sending(cmd.spec, cmd.argv, cmd.runner) {
			return errTryAgain
		}
	}
	return nil
}

// parseExec: EXEC runs the queued commands under the write side of the
// transaction lock, so no other command interleaves with them.
func parseExec(a Args) (Runner, error) {
	return execCmd{}, nil
}

// execCmd is EXEC: the queued commands run under the write side of the transaction lock, so no other command interleaves with them.
type execCmd struct{}

// Run implements Runner.
func (execCmd) Run(x *Ctx) error {
	c := x.C
	if !c.inMulti {
		return Reply("ERR EXEC without MULTI")
	}
	if c.multiDirty {
		x.endMulti(c).release()
		return Reply("EXECABORT Transaction discarded because of previous errors.")
	}
	// Only the stores before a queued AUTH or HELLO are prepared: prepare
	// checks rights and stamps the owner as the client is now.
	for _, cmd := range c.multi {
		if c.watch.Dirty() || cmd.spec.Name == "auth" || cmd.spec.Name == "hello" {
			break
		}
		if p, ok := cmd.runner.(preparer); ok && cmd.err == nil {
			p.prepare(x)
		}
	}
	x.tx.Lock()
	defer x.tx.Unlock()
	// The queued commands' records are one atomic unit of the log: a
	// crash before they are all written brings none of them back, as
	// Redis reverts a MULTI/EXEC cut short in its AOF. The unit ends
	// before the lock is released, and before the reply's commit
	// (CommitClient), which waits for it.
	if l := x.aof(); l != nil {
		l.BeginUnit()
		defer l.EndUnit()
	}
	// Under the write side no other write runs: a watched key that has not
	// changed by now does not change before the queue has run.
	changed := c.watch.Watching() && (c.watch.Dirty() || x.Keys.Expired(&c.watch))
	// As Redis Cluster, the queued keys are routed again as a whole: a
	// slot that moved since they were queued redirects EXEC, and nothing
	// runs (cluster review: the writes landed on the node that had handed
	// the slot over, and the next topology push dropped them).
	var moved error
	if !changed && x.Cluster != nil && !c.internal {
		moved = x.routeQueued(c)
	}
	if x.stopping.Load() > 0 && slices.ContainsFunc(c.multi, queued.writes) {
		moved = errShuttingDown // nothing runs: the final save has its instant
	}
	q := x.endMulti(c)
	defer q.release()
	if changed || moved != nil {
		for _, cmd := range q {
			if p, ok := cmd.runner.(preparer); ok {
				p.discard(x)
			}
		}
		if moved != nil {
			return moved
		}
		x.W.NullArray()
		return nil
	}
	x.W.Array(len(q))
	inner := &Ctx{App: x.App, C: c, W: x.W, locked: true}
	for _, cmd := range q {
		err := cmd.err
		if err == nil {
			// Each queued command counts in INFO commandstats, SLOWLOG and
			// LATENCY as it would alone, as in Redis (operator review:
			// only EXEC did, and redis-py's pipelines are transactions).
			start := x.mono()
			err = cmd.runner.Run(inner)
			x.recordRun(c, cmd.spec, cmd.argv, time.Duration(x.mono()-start), err != nil)
		}
		if err != nil {
			x.replyError(x.W, err)
		}
		x.feedMonitors(c, cmd.spec, cmd.argv)
	}
	return nil
}
