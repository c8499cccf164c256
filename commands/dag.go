package commands

import (
	"errors"
	"time"

	"github.com/enclaveai/enclaveai/modelstore"
)

// AI.DAGEXECUTE [LOAD n key ...] [PERSIST n key ...] [ROUTING key] [TIMEOUT ms] |> op [|> op ...]
// AI.DAGEXECUTE_RO: the same without PERSIST.
//
// Ops: AI.TENSORSET, AI.TENSORGET, AI.MODELEXECUTE. Tensor names are local
// to the DAG; only LOAD reads and PERSIST writes the keyspace.
func init() {
	register(
		&Spec{Name: "ai.dagexecute", Arity: -2, Flags: Write | DenyOOM | NoMulti | NoTxLock, Group: "models",
			Summary: "Runs a graph of tensor and model operations with DAG-local tensors.",
			Syntax:  "[LOAD n key ...] [PERSIST n key ...] [ROUTING key] [TIMEOUT ms] |> op [|> op ...]",
			Parse:   parseDAG(false)},
		&Spec{Name: "ai.dagexecute_ro", Arity: -2, Flags: Readonly | NoMulti | NoTxLock, Group: "models",
			Summary: "Read-only AI.DAGEXECUTE: no PERSIST.",
			Syntax:  "[LOAD n key ...] [ROUTING key] [TIMEOUT ms] |> op [|> op ...]",
			Parse:   parseDAG(true)},
	)
}

type dagOpKind int

const (
	opTensorSet dagOpKind = iota
	opTensorGet
	opModelExec
)

type dagOp struct {
	kind   dagOpKind
	name   string // TENSORSET/TENSORGET tensor name
	tensor *tensorSpec
	format tensorGetFormat
	exec   *modelExecCmd
}

type dagCmd struct {
	cmdName string
	load    []string
	persist []string
	timeout time.Duration
	ops     []dagOp
}

// dagNA is the reply for ops that did not run because an earlier one failed.
const dagNA = "NA"

func parseDAG(readonly bool) func(a Args) (Runner, error) {
	return func(a Args) (Runner, error) {
		name := "AI.DAGEXECUTE"
		if readonly {
			name = "AI.DAGEXECUTE_RO"
		}
		if len(a.V) < 6 {
			return nil, errorf("ERR missing arguments for '%s' command", name)
		}
		c := &dagCmd{cmdName: name}
		var routing, hasLoad, hasPersist, hasTimeout bool
		for a.More() && !isWord(a.Peek(), "|>") {
			switch {
			case a.Match("LOAD") && !hasLoad:
				hasLoad = true
				if !a.More() {
					return nil, Reply("ERR missing arguments after LOAD keyword in DAG command")
				}
				keys, err := a.countedList(Reply("ERR invalid or negative value found in number of keys to LOAD"),
					Reply("ERR number of keys to LOAD into DAG does not match the number of given arguments"))
				if err != nil {
					return nil, err
				}
				c.load = keyStrings(keys)
			case a.Match("PERSIST") && !hasPersist:
				if readonly {
					return nil, Reply("ERR PERSIST cannot be specified in a read-only DAG")
				}
				hasPersist = true
				if !a.More() {
					return nil, Reply("ERR missing arguments after PERSIST keyword in DAG command")
				}
				keys, err := a.countedList(Reply("ERR invalid or negative value found in number of keys to PERSIST"),
					Reply("ERR number of keys to PERSIST after DAG execution does not match the number of given arguments"))
				if err != nil {
					return nil, err
				}
				c.persist = keyStrings(keys)
				seen := map[string]bool{}
				for _, k := range c.persist {
					if seen[k] {
						return nil, Reply("ERR PERSIST keys must be unique")
					}
					seen[k] = true
				}
			case a.Match("ROUTING") && !routing:
				if !a.More() {
					return nil, Reply("ERR Missing ROUTING value")
				}
				a.Next()
				routing = true
			case a.Match("TIMEOUT") && !hasTimeout:
				t, err := parseTimeout(&a)
				if err != nil {
					return nil, err
				}
				c.timeout, hasTimeout = t, true
			default:
				return nil, errorf("ERR Invalid DAG command. Unexpected argument:  %s", a.Peek())
			}
		}
		if !hasLoad && !hasPersist && !routing {
			return nil, Reply("ERR AI.DAGEXECUTE and AI.DAGEXECUTE_RO commands must contain at least one out of ROUTING, LOAD, PERSIST keywords")
		}
		for a.Match("|>") {
			start := a.Pos()
			for a.More() && !isWord(a.Peek(), "|>") {
				a.Next()
			}
			if a.Pos() == start {
				return nil, errorf("ERR Invalid DAG command. Unexpected argument:  |>")
			}
			op, err := parseDAGOp(NewArgs(a.V[start-1:a.Pos()], nil), readonly)
			if err != nil {
				return nil, err
			}
			c.ops = append(c.ops, op)
		}
		if len(c.ops) == 0 {
			return nil, Reply("ERR DAG is empty")
		}
		return c, nil
	}
}

// parseDAGOp parses one op; a.V[0] is the "|>" that introduced it, so the
// op's own name is a.V[1] and the cursor starts on it.
func parseDAGOp(a Args, readonly bool) (dagOp, error) {
	switch {
	case a.Match("AI.TENSORSET"):
		if a.Remaining() < 2 {
			return dagOp{}, Reply("wrong number of arguments for 'AI.TENSORSET' command")
		}
		name := a.NextString()
		t, err := parseTensorBody(&a)
		if err != nil {
			return dagOp{}, err
		}
		if t.blob != nil {
			t.blob = a.Keep(t.blobAt)
		}
		return dagOp{kind: opTensorSet, name: name, tensor: t}, nil
	case a.Match("AI.TENSORGET"):
		if a.Remaining() < 1 || a.Remaining() > 3 {
			return dagOp{}, Reply("wrong number of arguments for 'AI.TENSORGET' command")
		}
		name := a.NextString()
		f, err := parseTensorFormat(a.Rest())
		if err != nil {
			return dagOp{}, err
		}
		return dagOp{kind: opTensorGet, name: name, format: f}, nil
	case a.Match("AI.MODELEXECUTE"):
		if len(a.V)-1 < 8 { // a.V[0] is the "|>"
			return dagOp{}, Reply("ERR wrong number of arguments for 'AI.MODELEXECUTE' command")
		}
		e := &modelExecCmd{key: a.NextString()}
		if err := parseExecBody(&a, e); err != nil {
			return dagOp{}, err
		}
		if a.Match("TIMEOUT") {
			return dagOp{}, Reply("ERR TIMEOUT not allowed within a DAG command")
		}
		if a.More() {
			return dagOp{}, errorf("Invalid argument: %s", a.Peek())
		}
		return dagOp{kind: opModelExec, exec: e}, nil
	case a.Match("AI.SCRIPTEXECUTE"):
		if readonly {
			return dagOp{}, Reply("ERR AI.SCRIPTEXECUTE command cannot be specified in a read-only DAG")
		}
		return dagOp{}, errLoadBackend
	case a.Match("AI.MODELRUN"):
		return dagOp{}, Reply("Deprecated AI.MODELRUN cannot be used in AI.DAGEXECUTE command")
	case a.Match("AI.SCRIPTRUN"):
		return dagOp{}, Reply("Deprecated AI.SCRIPTRUN cannot be used in AI.DAGEXECUTE command")
	}
	return dagOp{}, Reply("Unsupported command within DAG")
}

type dagResult struct {
	err    error
	tensor *modelstore.Tensor // TENSORGET
	ran    bool
}

// Run implements Runner: every key and name is resolved before the first
// op runs; ops run in order with no lock held; PERSIST writes all outputs
// in one atomic update, and only if every op succeeded.
func (c *dagCmd) Run(x *Ctx) error {
	start := time.Now()
	local := map[string]*modelstore.Tensor{}
	for _, k := range c.load {
		t, err := x.getTensor(k)
		if err != nil {
			return err
		}
		local[k] = t
	}
	models := make([]*modelstore.Model, len(c.ops))
	known := map[string]bool{}
	for k := range local {
		known[k] = true
	}
	for i, op := range c.ops {
		switch op.kind {
		case opTensorSet:
			known[op.name] = true
		case opTensorGet:
			if !known[op.name] {
				return Reply("ERR INPUT key cannot be found in DAG")
			}
		case opModelExec:
			m, err := x.getModel(op.exec.key)
			if err != nil {
				return err
			}
			if len(op.exec.inputs) != len(m.Inputs()) {
				return errInputsMismatch
			}
			if len(op.exec.outputs) != len(m.Outputs()) {
				return errOutputsMismatch
			}
			for _, in := range op.exec.inputs {
				if !known[in] {
					return Reply("ERR INPUT key cannot be found in DAG")
				}
			}
			for _, out := range op.exec.outputs {
				known[out] = true
			}
			models[i] = m
		}
	}
	for _, k := range c.persist {
		if !known[k] {
			return Reply("ERR PERSIST key cannot be found in DAG")
		}
	}
	results := make([]dagResult, len(c.ops))
	failed := false
	for i, op := range c.ops {
		if failed {
			continue
		}
		r := &results[i]
		r.ran = true
		switch op.kind {
		case opTensorSet:
			t, err := op.tensor.build(x.Opts.ProtoMaxBulkLen.Load())
			if err != nil {
				r.err, failed = err, true
				continue
			}
			local[op.name] = t
		case opTensorGet:
			r.tensor = local[op.name]
			r.ran = r.tensor != nil
		case opModelExec:
			inputs := make([]*modelstore.Tensor, len(op.exec.inputs))
			for j, in := range op.exec.inputs {
				inputs[j] = local[in]
				if inputs[j] == nil {
					r.err, failed = Reply("ERR INPUT key cannot be found in DAG"), true
				}
			}
			if failed {
				continue
			}
			var timeout time.Duration
			if c.timeout > 0 {
				if timeout = c.timeout - time.Since(start); timeout <= 0 {
					x.W.Simple("TIMEDOUT")
					return nil
				}
			}
			outs, err := x.runModel(models[i], inputs, time.Now(), timeout)
			if errors.Is(err, modelstore.ErrTimedOut) {
				x.W.Simple("TIMEDOUT")
				return nil
			}
			if err != nil {
				r.err, failed = err, true
				continue
			}
			for j, out := range op.exec.outputs {
				if j < len(outs) && outs[j] != nil {
					local[out] = outs[j]
				}
			}
		}
	}
	var persistErr error
	if !failed && len(c.persist) > 0 {
		outs := make([]*modelstore.Tensor, len(c.persist))
		for i, k := range c.persist {
			outs[i] = local[k]
		}
		persistErr = x.checkOutputKeys(c.persist)
		if persistErr == nil {
			persistErr = x.storeTensors(c.persist, outs)
		}
	}
	n := len(c.ops)
	if persistErr != nil {
		n++
	}
	x.W.Array(n)
	for i, op := range c.ops {
		r := results[i]
		switch {
		case r.err != nil:
			x.replyError(x.W, r.err)
		case !r.ran:
			x.W.Simple(dagNA)
		case op.kind == opTensorGet:
			writeTensor(x.W, r.tensor, op.format)
		default:
			x.W.OK()
		}
	}
	if persistErr != nil {
		x.replyError(x.W, persistErr)
	}
	return nil
}
