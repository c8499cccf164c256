package commands

func init() {
	register(
		&Spec{Name: "multi", Arity: 1, Flags: Fast | LoadingOK | txControl, Group: "transactions",
			Summary: "Starts a transaction.", Parse: parseMulti},
		&Spec{Name: "exec", Arity: 1, Flags: LoadingOK | NoTxLock | txControl, Group: "transactions",
			Summary: "Executes all commands in a transaction, atomically.", Parse: parseExec},
		&Spec{Name: "discard", Arity: 1, Flags: Fast | LoadingOK | txControl, Group: "transactions",
			Summary: "Discards a transaction.", Parse: parseDiscard},
	)
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
	dirty := c.multiDirty
	q := x.endMulti(c)
	defer q.release()
	if dirty {
		return Reply("EXECABORT Transaction discarded because of previous errors.")
	}
	x.tx.Lock()
	defer x.tx.Unlock()
	x.W.Array(len(q))
	inner := &Ctx{App: x.App, C: c, W: x.W, locked: true}
	for _, cmd := range q {
		err := cmd.err
		if err == nil {
			err = cmd.runner.Run(inner)
		}
		if err != nil {
			x.replyError(x.W, err)
		}
	}
	return nil
}
