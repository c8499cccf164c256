package commands

import (
	"errors"
	"math"
	"time"

	"github.com/enclaveai/enclaveai/modelstore"
	"github.com/enclaveai/enclaveai/persistence"
	"github.com/enclaveai/enclaveai/receipt"
)

// modelExecCmd is a parsed AI.MODELEXECUTE or AI.MODELRUN.
type modelExecCmd struct {
	key     string
	inputs  []string
	outputs []string
	timeout time.Duration
	// RedisAI checks the model key first, and each declared count against
	// the model before the syntax that follows it. So a syntax error found
	// after the key is kept in syntaxErr and reported by Run after those
	// checks; nIn and nOut are the counts parsed before it (0: not reached).
	syntaxErr error
	nIn, nOut int64
	// expect is EXPECT's digest: the run is refused unless the model has
	// it (digest.go); nil without EXPECT.
	expect *[32]byte
	// receipt is RECEIPT's nonce: the reply is a signed receipt instead of
	// OK (receipt.go); nil without RECEIPT.
	receipt []byte
}

// checkSyntax reports a deferred syntax error in RedisAI's order (see
// modelExecCmd).
func (c *modelExecCmd) checkSyntax(m *modelstore.Model) error {
	if c.syntaxErr == nil {
		return nil
	}
	if c.nIn > 0 && c.nIn != int64(len(m.Inputs())) {
		return errInputsMismatch
	}
	if c.nOut > 0 && c.nOut != int64(len(m.Outputs())) {
		return errOutputsMismatch
	}
	return c.syntaxErr
}

var (
	errTimeoutValue   = Reply("ERR Invalid value for TIMEOUT")
	errTimeoutMissing = Reply("ERR No value provided for TIMEOUT")
)

func parseTimeout(a *Args) (time.Duration, error) {
	if !a.More() {
		return 0, errTimeoutMissing
	}
	n, ok := parseInt(a.Next())
	if !ok || n <= 0 {
		return 0, errTimeoutValue
	}
	if n > int64(math.MaxInt64/time.Millisecond) {
		// 292 years, for a time that never comes in RedisAI: its
		// nanoseconds wrapped around (TIMEOUT 76480200929599801 was 64 ns,
		// and answered TIMEDOUT at once).
		return math.MaxInt64, nil
	}
	return time.Duration(n) * time.Millisecond, nil
}

// parseExecBody parses `INPUTS n ... OUTPUTS m ...` with RedisAI's errors.
// The key lists are made in room while they fit (nil: always allocated).
func parseExecBody(a *Args, c *modelExecCmd, room []string) error {
	var err error
	if c.nIn, c.inputs, err = parseKeyClause(a, "INPUTS", "input", "Input", room); err != nil {
		return err
	}
	if len(c.inputs) <= len(room) {
		room = room[len(c.inputs):]
	}
	c.nOut, c.outputs, err = parseKeyClause(a, "OUTPUTS", "output", "Output", room)
	return err
}

// parseKeyClause parses `WORD n key...` (INPUTS or OUTPUTS); kind and Kind
// fill RedisAI's error texts. The keys are made in room when they fit.
func parseKeyClause(a *Args, word, kind, Kind string, room []string) (int64, []string, error) {
	if !a.Match(word) {
		return 0, nil, errorf("ERR %s not specified", word)
	}
	n, ok := parseInt(a.Next())
	if !ok {
		return 0, nil, errorf("ERR Invalid argument for %s_count", kind)
	}
	if n <= 0 {
		return 0, nil, errorf("ERR %s count must be a positive integer", Kind)
	}
	if int64(a.Remaining()) < n {
		return n, nil, errorf("ERR number of %s keys to AI.MODELEXECUTE command does not match the number of given arguments", kind)
	}
	var keys []string
	if n <= int64(len(room)) {
		keys = room[:n:n] // capped: an append must not reach the next list
	} else {
		keys = make([]string, n)
	}
	for i := range keys {
		keys[i] = a.NextString()
	}
	return n, keys, nil
}

func parseModelExecute(a Args) (Runner, error) {
	if len(a.V) < 8 {
		return nil, Reply("ERR wrong number of arguments for 'AI.MODELEXECUTE' command")
	}
	var c *modelExecCmd
	var room []string
	if a.scratch != nil {
		c, room = &a.scratch.modelExec, a.scratch.keys[:]
	} else {
		c = new(modelExecCmd)
	}
	*c = modelExecCmd{key: a.NextString()}
	c.syntaxErr = parseExecBody(&a, c, room)
	timeout := false
	for c.syntaxErr == nil && a.More() {
		switch {
		case !timeout && a.Match("TIMEOUT"):
			timeout = true
			c.timeout, c.syntaxErr = parseTimeout(&a)
		case c.expect == nil && a.Match("EXPECT"):
			c.syntaxErr = parseExpect(&a, c)
		case c.receipt == nil && a.Match("RECEIPT"):
			c.receipt, c.syntaxErr = parseReceiptNonce(&a)
		default:
			c.syntaxErr = errorf("Invalid argument: %s", a.Peek())
		}
	}
	return c, nil
}

// parseExpect parses EXPECT's digest.
func parseExpect(a *Args, c *modelExecCmd) error {
	if !a.More() {
		return errBadDigest
	}
	d, err := parseDigest(a.Next())
	if err != nil {
		return err
	}
	c.expect = &d
	return nil
}

func parseModelRun(a Args) (Runner, error) {
	if len(a.V) < 6 {
		return nil, Reply("ERR wrong number of arguments for 'AI.MODELRUN' command")
	}
	c := &modelExecCmd{key: a.NextString()}
	parseModelRunBody(&a, c, false)
	return c, nil
}

// parseModelRunBody parses what follows the key of the deprecated
// AI.MODELRUN, at the top level and inside AI.DAGRUN alike:
// [TIMEOUT ms] INPUTS in ... [OUTPUTS out ...]. A syntax error goes to
// c.syntaxErr, answered after the model's own checks (as in RedisAI). In
// a DAG (inDAG) a TIMEOUT whose value parses is refused, and nothing
// after it is read.
func parseModelRunBody(a *Args, c *modelExecCmd, inDAG bool) {
	if a.Match("TIMEOUT") {
		timeout, err := parseTimeout(a)
		switch {
		case err != nil:
			c.syntaxErr = err
			return
		case inDAG:
			c.syntaxErr = Reply("ERR TIMEOUT not allowed within a DAG command")
			return
		}
		c.timeout = timeout
	}
	if !a.Match("INPUTS") {
		c.syntaxErr = Reply("ERR INPUTS not specified")
		return
	}
	// Inputs run to the first OUTPUTS; without one, every key is an input
	// and the counts disagree with the model (as in RedisAI).
	for a.More() && !isWord(a.Peek(), "OUTPUTS") {
		c.inputs = append(c.inputs, a.NextString())
	}
	if a.Match("OUTPUTS") {
		c.outputs = keyStrings(a.Rest())
	}
}

// resolve fetches the model and checks the command against it in RedisAI's
// order: the key, a deferred syntax error (checkSyntax), EXPECT, the input
// and output counts. A DAG's model ops are checked the same way.
func (c *modelExecCmd) resolve(x *Ctx) (*modelstore.Model, error) {
	m, err := x.getModel(c.key)
	if err != nil {
		return nil, err
	}
	if err := c.checkSyntax(m); err != nil {
		return nil, err
	}
	if err := checkExpect(m, c.expect); err != nil {
		return nil, err
	}
	if len(c.inputs) != len(m.Inputs()) {
		return nil, errInputsMismatch
	}
	if len(c.outputs) != len(m.Outputs()) {
		return nil, errOutputsMismatch
	}
	return m, nil
}

// Run implements Runner: inputs are fetched, output keys checked, the model
// runs with no lock held, and the outputs are stored in one atomic update.
func (c *modelExecCmd) Run(x *Ctx) error {
	queued := time.Now()
	var m *modelstore.Model
	inputs := make([]*modelstore.Tensor, len(c.inputs))
	// Read as one (Ctx.view): a run read one input before a transaction
	// wrote two and the other after it.
	err := x.view(func() error {
		var err error
		if m, err = c.resolve(x); err != nil {
			return err
		}
		for i, k := range c.inputs {
			if inputs[i], err = x.getTensor(k); err != nil {
				return err
			}
		}
		return x.checkOutputKeys(c.outputs)
	})
	if err != nil {
		return err
	}
	outs, err := x.runModel(m, inputs, queued, c.timeout, x.outputLimit(0))
	if errors.Is(err, modelstore.ErrTimedOut) {
		x.W.Simple("TIMEDOUT")
		return nil
	}
	if err != nil {
		return err
	}
	if err := x.storeTensors(c.outputs, outs); err != nil {
		return err
	}
	if c.receipt != nil {
		return c.writeReceipt(x, m, inputs, outs)
	}
	x.W.OK()
	return nil
}

// writeReceipt replies with the signed receipt of a run: the model value
// and the input tensors it ran on, the outputs it made.
func (c *modelExecCmd) writeReceipt(x *Ctx, m *modelstore.Model, inputs, outs []*modelstore.Tensor) error {
	r := &receipt.Payload{Type: "enclaveai.inference", Models: []receipt.Model{receiptModel(c.key, m)}}
	for i, k := range c.inputs {
		r.Inputs = append(r.Inputs, receiptTensor(k, inputs[i]))
	}
	for i, k := range c.outputs {
		if i < len(outs) && outs[i] != nil {
			r.Outputs = append(r.Outputs, receiptTensor(k, outs[i]))
		}
	}
	jws, err := x.signReceipt(r, c.receipt)
	if err != nil {
		return err
	}
	x.W.BulkString(jws)
	return nil
}

// runModel runs m with the current run limits, its outputs bounded by
// maxOutput bytes (outputLimit) and, as AI.TENSORSET's tensors are, by
// persistence.MaxRank dimensions: a model can make a tensor of any rank
// (ConstantOfShape of a shape of 300 ones), and one stored at an output
// key could be neither logged nor saved, so every write after it was
// refused with MISCONF until the key went (pure-Go engine review; ONNX
// Runtime makes them too).
func (x *Ctx) runModel(m *modelstore.Model, inputs []*modelstore.Tensor, queued time.Time, timeout time.Duration, maxOutput int64) ([]*modelstore.Tensor, error) {
	x.C.blocked.Store(x.clock.Load())
	defer x.C.blocked.Store(0)
	outs, err := x.Queue.Run(m, &modelstore.RunRequest{
		Inputs: inputs, Queued: queued, Timeout: timeout,
		ExecTimeout: time.Duration(x.AI.ModelExecutionTimeout.Load()) * time.Millisecond,
		MaxOutput:   maxOutput, Cancel: x.C.killCh,
	})
	for _, t := range outs {
		if err == nil && t != nil && len(t.Shape) > persistence.MaxRank {
			err = modelstore.ErrRank
		}
	}
	if err != nil {
		return nil, err
	}
	return outs, nil
}

// outputLimit bounds the outputs of a run, given the bytes the command has
// made already (a DAG's local tensors): as a tensor is by
// proto-max-bulk-len, as a DAG's tensors together are by
// client-query-buffer-limit, and by maxmemory's headroom when it is set.
// A model whose output shape comes from an input (ConstantOfShape) put
// gigabytes in the server before the -OOM.
func (x *Ctx) outputLimit(made int64) int64 {
	n := min(x.Opts.ProtoMaxBulkLen.Load(), x.Opts.ClientQueryBufferLimit.Load()-made)
	if limit := x.Opts.MaxMemory.Load(); limit > 0 {
		n = min(n, limit-x.UsedMemory()-made)
	}
	return max(n, 1) // 0 would mean no bound
}

// checkOutputKeys refuses, before a run, output keys that hold a value
// other than a tensor (RedisAI answers OK and then a second error), or
// another user's tensor (storeTensors checks again, atomically).
func (x *Ctx) checkOutputKeys(keys []string) error {
	for _, k := range keys {
		if v, ok := x.Keys.Get(k); ok {
			if _, isTensor := v.(*modelstore.Tensor); !isTensor {
				return modelstore.ErrWrongType
			}
			if err := x.mayUse(v); err != nil {
				return err
			}
		}
	}
	return nil
}

// storeTensors writes outputs to keys in one atomic update; nil outputs
// (sequences, maps) are skipped.
func (x *Ctx) storeTensors(keys []string, outs []*modelstore.Tensor) error {
	ws := make([]modelstore.Write, 0, len(keys))
	owner, allow := x.stamp(), x.allow()
	for i, k := range keys {
		if i < len(outs) && outs[i] != nil {
			t := outs[i]
			if t.Owner != owner {
				// A DAG may persist a tensor it loaded: values are shared
				// and immutable, so the owner goes on a copy.
				t = t.WithOwner(owner)
			}
			ws = append(ws, modelstore.Write{Key: k, Value: t, SameType: true, Allow: allow})
		}
	}
	var old []modelstore.Value
	err := x.Update(func() error {
		var err error
		old, err = x.Keys.SetMany(ws)
		return err
	})
	x.Release(old)
	return err
}
