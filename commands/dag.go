package commands

import (
	"errors"
	"time"

	"github.com/enclaveai/enclaveai/modelstore"
	"github.com/enclaveai/enclaveai/receipt"
)

// AI.DAGEXECUTE [LOAD n key ...] [PERSIST n key ...] [ROUTING key] [TIMEOUT ms] |> op [|> op ...]
// AI.DAGEXECUTE_RO: the same without PERSIST.
// AI.DAGRUN, AI.DAGRUN_RO: the deprecated forms, which RedisAI 1.2.7 still
// accepts: LOAD, PERSIST and ROUTING are optional and the model op is
// AI.MODELRUN (key INPUTS in ... OUTPUTS out ...), not AI.MODELEXECUTE.
//
// Ops: AI.TENSORSET, AI.TENSORGET, AI.MODELEXECUTE (AI.MODELRUN in the
// deprecated forms). Tensor names are local to the DAG; only LOAD reads and
// PERSIST writes the keyspace.
func init() {
	register(
		&Spec{Name: "ai.dagexecute", Arity: -1, Flags: Write | DenyOOM | Blocking | NoTxLock, Group: "models",
			Summary: "Runs a graph of tensor and model operations with DAG-local tensors.",
			Syntax:  "[LOAD n key ...] [PERSIST n key ...] [ROUTING key] [TIMEOUT ms] [RECEIPT nonce] |> op [|> op ...]",
			Parse:   parseDAG(dagExecute), Keys: dagKeys},
		&Spec{Name: "ai.dagexecute_ro", Arity: -1, Flags: Readonly | Blocking | NoTxLock, Group: "models",
			Summary: "Read-only AI.DAGEXECUTE: no PERSIST.",
			Syntax:  "[LOAD n key ...] [ROUTING key] [TIMEOUT ms] [RECEIPT nonce] |> op [|> op ...]",
			Parse:   parseDAG(dagExecuteRO), Keys: dagKeys},
		&Spec{Name: "ai.dagrun", Arity: -1, Flags: Write | DenyOOM | Blocking | NoTxLock, Group: "models",
			Summary: "Deprecated form of AI.DAGEXECUTE, with AI.MODELRUN ops.",
			Syntax:  "[LOAD n key ...] [PERSIST n key ...] [TIMEOUT ms] |> op [|> op ...]",
			Parse:   parseDAG(dagRun), Keys: dagKeys},
		&Spec{Name: "ai.dagrun_ro", Arity: -1, Flags: Readonly | Blocking | NoTxLock, Group: "models",
			Summary: "Deprecated form of AI.DAGEXECUTE_RO, with AI.MODELRUN ops.",
			Syntax:  "[LOAD n key ...] [TIMEOUT ms] |> op [|> op ...]",
			Parse:   parseDAG(dagRunRO), Keys: dagKeys},
	)
}

// dagForm tells the four DAG commands apart.
type dagForm struct {
	name       string
	readonly   bool
	deprecated bool // AI.DAGRUN(_RO)
}

var (
	dagExecute   = dagForm{name: "AI.DAGEXECUTE"}
	dagExecuteRO = dagForm{name: "AI.DAGEXECUTE_RO", readonly: true}
	dagRun       = dagForm{name: "AI.DAGRUN", deprecated: true}
	dagRunRO     = dagForm{name: "AI.DAGRUN_RO", readonly: true, deprecated: true}
)

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
	// set is a TENSORSET's tensor made from its BLOB or VALUES as the DAG
	// is parsed, as RedisAI makes it (dag_parser.c, ParseTensorSetArgs):
	// a bad value fails the whole command. A zero tensor (nil here) is
	// made when the op runs, bounded by what the DAG has made by then.
	set    *modelstore.Tensor
	format tensorGetFormat
	exec   *modelExecCmd
}

type dagCmd struct {
	cmdName string
	load    []string
	persist []string
	timeout time.Duration
	ops     []dagOp
	// receipt is RECEIPT's nonce: a signed receipt ends the reply
	// (receipt.go); nil without RECEIPT.
	receipt []byte
	// RedisAI reads LOAD's keys and each model op's model as it parses
	// (first failure wins), and checks names against the DAG only after.
	// So a syntax error found after a LOAD or a model op is kept here and
	// answered by Run once the keys LOADed and the models of ops (each
	// with its own deferred error, modelExecCmd.syntaxErr) are checked.
	syntaxErr error
}

// dagNA is the reply for ops that did not run because an earlier one failed.
const dagNA = "NA"

func parseDAG(form dagForm) func(a Args) (Runner, error) {
	readonly, name := form.readonly, form.name
	return func(a Args) (Runner, error) {
		// The shortest commands: AI.DAGRUN |> AI.TENSORGET t, and
		// AI.DAGEXECUTE ROUTING k |> AI.TENSORGET t (RedisAI's counts).
		switch {
		case form.deprecated && len(a.V) < 4:
			return nil, errorf("ERR wrong number of arguments for '%s' command", name)
		case !form.deprecated && len(a.V) < 6:
			return nil, errorf("ERR missing arguments for '%s' command", name)
		}
		c := &dagCmd{cmdName: name}
		var routing, hasLoad, hasPersist, hasTimeout bool
		// fail answers a syntax error now, or defers it past the checks of
		// what RedisAI would have read from the keyspace before it.
		fail := func(err error) (Runner, error) {
			if !hasLoad && len(c.ops) == 0 {
				return nil, err
			}
			c.syntaxErr = err
			return c, nil
		}
		// A clause given twice is an unexpected argument, named by its
		// keyword: the flag is tested before Match takes the keyword
		// (compatibility review: the error named the word after it).
		for a.More() && !isWord(a.Peek(), "|>") {
			switch {
			case !hasLoad && a.Match("LOAD"):
				hasLoad = true
				// RedisAI's: the keyword, a count and one key at least.
				if a.Remaining() < 2 {
					return fail(Reply("ERR missing arguments after LOAD keyword in DAG command"))
				}
				keys, err := a.countedList(Reply("ERR invalid or negative value found in number of keys to LOAD"),
					Reply("ERR number of keys to LOAD into DAG does not match the number of given arguments"))
				if err != nil {
					return fail(err)
				}
				c.load = keyStrings(keys)
			case !hasPersist && a.Match("PERSIST"):
				if readonly {
					return fail(Reply("ERR PERSIST cannot be specified in a read-only DAG"))
				}
				hasPersist = true
				if a.Remaining() < 2 {
					return fail(Reply("ERR missing arguments after PERSIST keyword in DAG command"))
				}
				keys, err := a.countedList(Reply("ERR invalid or negative value found in number of keys to PERSIST"),
					Reply("ERR number of keys to PERSIST after DAG execution does not match the number of given arguments"))
				if err != nil {
					return fail(err)
				}
				c.persist = keyStrings(keys)
				seen := map[string]bool{}
				for _, k := range c.persist {
					if seen[k] {
						return fail(Reply("ERR PERSIST keys must be unique"))
					}
					seen[k] = true
				}
			case !routing && a.Match("ROUTING"):
				if !a.More() {
					return fail(Reply("ERR Missing ROUTING value"))
				}
				a.Next()
				routing = true
			case !hasTimeout && a.Match("TIMEOUT"):
				t, err := parseTimeout(&a)
				if err != nil {
					return fail(err)
				}
				c.timeout, hasTimeout = t, true
			case !form.deprecated && c.receipt == nil && a.Match("RECEIPT"):
				n, err := parseReceiptNonce(&a)
				if err != nil {
					return fail(err)
				}
				c.receipt = n
			default:
				return fail(errorf("ERR Invalid DAG command. Unexpected argument:  %s", a.Peek()))
			}
		}
		if !form.deprecated && !hasLoad && !hasPersist && !routing {
			return fail(Reply("ERR AI.DAGEXECUTE and AI.DAGEXECUTE_RO commands must contain at least one out of ROUTING, LOAD, PERSIST keywords"))
		}
		for a.Match("|>") {
			start := a.Pos()
			for a.More() && !isWord(a.Peek(), "|>") {
				a.Next()
			}
			if a.Pos() == start {
				return fail(errorf("ERR Invalid DAG command. Unexpected argument:  |>"))
			}
			op, err := parseDAGOp(NewArgs(a.V[start-1:a.Pos()], nil), form)
			if err != nil {
				return fail(err)
			}
			c.ops = append(c.ops, op)
			if op.exec != nil && op.exec.syntaxErr != nil {
				return c, nil // answered by Run after the op's model checks
			}
		}
		if len(c.ops) == 0 {
			return nil, Reply("ERR DAG is empty")
		}
		return c, nil
	}
}

// parseDAGOp parses one op; a.V[0] is the "|>" that introduced it, so the
// op's own name is a.V[1] and the cursor starts on it.
func parseDAGOp(a Args, form dagForm) (dagOp, error) {
	if form.deprecated {
		switch {
		case a.Match("AI.MODELRUN"):
			return parseDAGModelRun(a)
		case a.Match("AI.MODELEXECUTE"):
			return dagOp{}, errorf("AI.MODELEXECUTE cannot be used in a deprecated %s command", "AI.DAGRUN")
		case a.Match("AI.SCRIPTEXECUTE"):
			return dagOp{}, errorf("AI.SCRIPTEXECUTE cannot be used in a deprecated %s command", "AI.DAGRUN")
		case a.Match("AI.SCRIPTRUN"):
			return dagOp{}, errLoadBackend
		}
	}
	readonly := form.readonly
	switch {
	case a.Match("AI.TENSORSET"):
		if a.Remaining() < 3 { // key, type and a dimension, as the command's arity
			return dagOp{}, Reply("wrong number of arguments for 'AI.TENSORSET' command")
		}
		name := a.NextString()
		t := &tensorSpec{}
		if err := parseTensorBody(&a, t); err != nil {
			return dagOp{}, err
		}
		if t.blob != nil {
			t.blob = a.Keep(t.blobAt)
		}
		op := dagOp{kind: opTensorSet, name: name, tensor: t}
		if !t.zero() {
			// A bad value or blob length is the command's error, not an
			// error element of its reply followed by NA (compatibility
			// review).
			set, err := t.build(0, errTensorTooBig, nil)
			if err != nil {
				return dagOp{}, err
			}
			op.set = set
		}
		return op, nil
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
		// Errors after the key wait for the model's checks, as at the top
		// level (modelExecCmd.syntaxErr).
		e := &modelExecCmd{key: a.NextString()}
		e.syntaxErr = parseExecBody(&a, e, nil)
		if e.syntaxErr == nil && a.Match("TIMEOUT") {
			e.syntaxErr = Reply("ERR TIMEOUT not allowed within a DAG command")
		}
		if e.syntaxErr == nil && a.Match("EXPECT") {
			e.syntaxErr = parseExpect(&a, e)
		}
		if e.syntaxErr == nil && a.More() {
			e.syntaxErr = errorf("Invalid argument: %s", a.Peek())
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

// parseDAGModelRun parses AI.MODELRUN's syntax inside AI.DAGRUN:
// key [TIMEOUT ms] INPUTS in ... [OUTPUTS out ...] (a.V[0] is the "|>").
// Input and output counts are checked against the model when the DAG runs,
// and so are errors after the key, after the model's own checks.
func parseDAGModelRun(a Args) (dagOp, error) {
	if len(a.V)-1 < 6 {
		return dagOp{}, Reply("ERR wrong number of arguments for 'AI.MODELRUN' command")
	}
	e := &modelExecCmd{key: a.NextString()}
	parseModelRunBody(&a, e, true)
	return dagOp{kind: opModelExec, exec: e}, nil
}

type dagResult struct {
	err    error
	tensor *modelstore.Tensor // TENSORGET
	ran    bool
}

// Run implements Runner: every key and name is resolved before the first
// op runs, in RedisAI's order (the LOADs, then each model op's model, then
// a deferred syntax error, then the names, dagCmd.syntaxErr); ops run in
// order with no lock held; PERSIST writes all outputs in one atomic
// update, and only if every op succeeded.
func (c *dagCmd) Run(x *Ctx) error {
	start := time.Now()
	local := map[string]*modelstore.Tensor{}
	models := make([]*modelstore.Model, len(c.ops))
	// Read as one (Ctx.view): a DAG read one LOADed key before a
	// transaction wrote two and the other after it.
	err := x.view(func() error {
		for _, k := range c.load {
			t, err := x.getTensor(k)
			if err != nil {
				return err
			}
			local[k] = t
		}
		for i, op := range c.ops {
			if op.kind != opModelExec {
				continue
			}
			m, err := op.exec.resolve(x)
			if err != nil {
				return err
			}
			models[i] = m
		}
		return nil
	})
	if err != nil {
		return err
	}
	if c.syntaxErr != nil {
		return c.syntaxErr
	}
	known := map[string]bool{}
	for k := range local {
		known[k] = true
	}
	for _, op := range c.ops {
		switch op.kind {
		case opTensorSet:
			known[op.name] = true
		case opTensorGet:
			if !known[op.name] {
				return Reply("ERR INPUT key cannot be found in DAG")
			}
		case opModelExec:
			for _, in := range op.exec.inputs {
				if !known[in] {
					return Reply("ERR INPUT key cannot be found in DAG")
				}
			}
			for _, out := range op.exec.outputs {
				known[out] = true
			}
		}
	}
	for _, k := range c.persist {
		if !known[k] {
			return Reply("ERR PERSIST key cannot be found in DAG")
		}
	}
	var rec *receipt.Payload
	if c.receipt != nil {
		rec = &receipt.Payload{Type: "enclaveai.dag"}
		for _, k := range c.load {
			rec.Inputs = append(rec.Inputs, receiptTensor(k, local[k]))
		}
		for i, op := range c.ops {
			if op.kind == opModelExec {
				rec.Models = append(rec.Models, receiptModel(op.exec.key, models[i]))
			}
		}
	}
	results := make([]dagResult, len(c.ops))
	failed := false
	var made int64 // bytes of the tensors the DAG made (zero tensors, outputs)
	// After an op fails, as in RedisAI (dag.c, RedisAI_DagRun_Reply): no
	// model op runs (NA), and its outputs are never made; a TENSORSET still
	// sets its tensor (OK), and a TENSORGET answers the tensor its name
	// holds then (LOADed, set, or made by an op that succeeded), or NA
	// (compatibility review: every op after the failure answered NA).
	unmade := func(op dagOp) {
		for _, out := range op.exec.outputs {
			delete(local, out)
		}
	}
	for i, op := range c.ops {
		r := &results[i]
		if failed && op.kind == opModelExec {
			unmade(op)
			continue
		}
		r.ran = true
		switch op.kind {
		case opTensorSet:
			t := op.set
			if t == nil {
				// The DAG's zero tensors together are bounded as one
				// command's arguments are (client-query-buffer-limit),
				// and by maxmemory: they were bounded one by one only.
				limit, tooBig := x.Opts.ProtoMaxBulkLen.Load(), errTensorTooBig
				if left := x.Opts.ClientQueryBufferLimit.Load() - made; left < limit {
					limit, tooBig = left, errDAGTooBig
				}
				var err error
				t, err = op.tensor.build(limit, tooBig, func(n int64) error { return x.fits(made + n) })
				if err != nil {
					r.err, failed = err, true
					continue
				}
				made += int64(len(t.Data))
			}
			local[op.name] = t
			if rec != nil && !failed {
				rec.Inputs = append(rec.Inputs, receiptTensor(op.name, t))
			}
		case opTensorGet:
			r.tensor = local[op.name]
			r.ran = r.tensor != nil
			if rec != nil && r.tensor != nil && !failed {
				rec.Outputs = append(rec.Outputs, receiptTensor(op.name, r.tensor))
			}
		case opModelExec:
			inputs := make([]*modelstore.Tensor, len(op.exec.inputs))
			for j, in := range op.exec.inputs {
				inputs[j] = local[in]
				if inputs[j] == nil {
					r.err, failed = Reply("ERR INPUT key cannot be found in DAG"), true
				}
			}
			if failed {
				unmade(op)
				continue
			}
			var timeout time.Duration
			if c.timeout > 0 {
				if timeout = c.timeout - time.Since(start); timeout <= 0 {
					x.W.Simple("TIMEDOUT")
					return nil
				}
			}
			outs, err := x.runModel(models[i], inputs, time.Now(), timeout, x.outputLimit(made))
			if errors.Is(err, modelstore.ErrTimedOut) {
				x.W.Simple("TIMEDOUT")
				return nil
			}
			if err != nil {
				r.err, failed = err, true
				unmade(op)
				continue
			}
			for j, out := range op.exec.outputs {
				if j < len(outs) && outs[j] != nil {
					local[out] = outs[j]
					made += int64(len(outs[j].Data))
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
	var receipt string
	if persistErr == nil && !failed && rec != nil {
		for _, k := range c.persist {
			rec.Outputs = append(rec.Outputs, receiptTensor(k, local[k]))
		}
		var err error
		if receipt, err = x.signReceipt(rec, c.receipt); err != nil {
			return err
		}
	}
	if persistErr != nil || receipt != "" {
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
			// Never streamed while the DAG runs: a DAG may write, and its
			// reply waits for the log (CommitClient). A large one waits
			// for the connection to send the replies (Writer.Later), which
			// commits first; the DAG's tensors are pinned (LOAD) or of Go's
			// memory alone.
			writeTensorReply(x.W, r.tensor, op.format)
		default:
			x.W.OK()
		}
	}
	if persistErr != nil {
		x.replyError(x.W, persistErr)
	}
	if receipt != "" {
		x.W.BulkString(receipt)
	}
	return nil
}
