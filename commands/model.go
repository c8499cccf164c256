package commands

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/enclaveai/enclaveai/config"
	"github.com/enclaveai/enclaveai/modelstore"
	"github.com/enclaveai/enclaveai/receipt"
)

// AI.MODELSTORE <key> <backend> <device> [TAG tag] [BATCHSIZE n [MINBATCHSIZE m [MINBATCHTIMEOUT ms]]]
//
//	[OPTIMIZE 0|1] [NOPERSIST] BLOB <chunk> [<chunk> ...] | FILE <path>
//
// AI.MODELSET (deprecated), AI.MODELGET, AI.MODELDEL, AI.MODELEXECUTE,
// AI.MODELRUN (deprecated), AI.INFO, AI._MODELSCAN, AI.MODELINFO, AI.CONFIG.
func init() {
	ai := func(s *Spec) *Spec { s.Group = "models"; return s }
	register(
		ai(&Spec{Name: "ai.modelstore", Arity: -6, Flags: Write | DenyOOM | Big | NoTxLock, FirstKey: 1, LastKey: 1, Step: 1,
			Summary: "Stores an ONNX model sent in one or many BLOB chunks (or read from FILE in model-dir); key * stores under a new UUID.",
			Syntax:  "key ONNX CPU [TAG tag] [BATCHSIZE n [MINBATCHSIZE m [MINBATCHTIMEOUT ms]]] [OPTIMIZE 0|1] [NOPERSIST] BLOB chunk [chunk ...] | FILE path",
			Parse:   parseModelStore(false), Payload: modelPayloadArg}),
		ai(&Spec{Name: "ai.modelset", Arity: -4, Flags: Write | DenyOOM | Big | NoTxLock, FirstKey: 1, LastKey: 1, Step: 1,
			Summary: "Deprecated form of AI.MODELSTORE.",
			Syntax:  "key ONNX CPU [TAG tag] [BATCHSIZE n [MINBATCHSIZE m [MINBATCHTIMEOUT ms]]] [INPUTS name ... OUTPUTS name ...] BLOB chunk [chunk ...]",
			Parse:   parseModelStore(true), Payload: modelPayloadArg}),
		ai(&Spec{Name: "ai.modelget", Arity: -2, Flags: Readonly | NoTxLock, FirstKey: 1, LastKey: 1, Step: 1,
			Summary: "Returns a model's metadata and/or its bytes (in MODEL_CHUNK_SIZE chunks).", Syntax: "key [META] [BLOB]", Parse: parseModelGet}),
		ai(&Spec{Name: "ai.modeldel", Arity: 2, Flags: Write, FirstKey: 1, LastKey: 1, Step: 1,
			Summary: "Deletes a model.", Syntax: "key", Parse: parseModelDel}),
		ai(&Spec{Name: "ai.modelexecute", Arity: -2, Flags: Write | DenyOOM | NoMulti | NoTxLock, FirstKey: 1, LastKey: -1, Step: 1,
			Summary: "Runs a model on input tensors and stores the output tensors.",
			Syntax:  "key INPUTS n input [input ...] OUTPUTS m output [output ...] [TIMEOUT ms] [EXPECT sha256-hex] [RECEIPT nonce]", Parse: parseModelExecute,
			Keys: modelExecuteKeys}),
		ai(&Spec{Name: "ai.modelrun", Arity: -2, Flags: Write | DenyOOM | NoMulti | NoTxLock, FirstKey: 1, LastKey: -1, Step: 1,
			Summary: "Deprecated form of AI.MODELEXECUTE.",
			Syntax:  "key [TIMEOUT ms] INPUTS input [input ...] OUTPUTS output [output ...]", Parse: parseModelRun,
			Keys: modelRunKeys}),
		ai(&Spec{Name: "ai.info", Arity: -2, Flags: Readonly, FirstKey: 1, LastKey: 1, Step: 1,
			Summary: "Returns a model's run statistics, or resets them.", Syntax: "key [RESETSTAT]", Parse: parseAIInfo}),
		ai(&Spec{Name: "ai._modelscan", Arity: 1, Flags: Readonly,
			Summary: "Lists every model key with its tag.", Parse: parseModelScan}),
		ai(&Spec{Name: "ai.modelinfo", Arity: 2, Flags: Readonly, FirstKey: 1, LastKey: 1, Step: 1,
			Summary: "Returns a model's digest, size, inputs and outputs, batching and storage details, owner, engine.", Syntax: "key", Parse: parseModelInfo}),
		ai(&Spec{Name: "ai.config", Arity: -2, Flags: Write,
			Summary: "Reads or changes RedisAI settings (MODEL_CHUNK_SIZE, MODEL_EXECUTION_TIMEOUT, ...).",
			Syntax:  "GET name | SET name value | name value | LOADBACKEND backend path | BACKENDSPATH path", Parse: parseAIConfig}),
	)
}

// AISettings are RedisAI's settings (AI.CONFIG). Atomics: read by every run.
type AISettings struct {
	ModelChunkSize        atomic.Int64
	ModelExecutionTimeout atomic.Int64 // ms
	IntraOpParallelism    atomic.Int64
	InterOpParallelism    atomic.Int64
	ThreadsPerQueue       atomic.Int64
	BackendsPath          atomic.Pointer[string]
}

// newAISettings starts from the configuration's threads-per-queue,
// intra-op-parallelism and inter-op-parallelism.
func newAISettings(opts *config.Options) *AISettings {
	s := &AISettings{}
	s.ModelChunkSize.Store(511 << 20)
	s.ModelExecutionTimeout.Store(5000)
	// By default one worker per CPU, each running its model on one thread
	// (modelstore.SessionOptions): RedisAI's default is 1 worker whose
	// runs spread over every core through ORT's spinning pool.
	workers := opts.ThreadsPerQueue.Load()
	if workers == 0 {
		workers = int64(runtime.GOMAXPROCS(0))
	}
	s.ThreadsPerQueue.Store(workers)
	s.IntraOpParallelism.Store(opts.IntraOpParallelism.Load())
	s.InterOpParallelism.Store(opts.InterOpParallelism.Load())
	p := "/usr/lib/enclaveai/backends"
	s.BackendsPath.Store(&p)
	return s
}

var (
	errUnsupportedBackend = Reply("ERR unsupported backend")
	errLoadBackend        = Reply("ERR Could not load backend")
	errInvalidDevice      = Reply("ERR Invalid DEVICE")
	errNoCUDA             = Reply("ERR GPU requested but ONNX couldn't find CUDA")
	errMissingBlob        = Reply("ERR Insufficient arguments, missing model BLOB")
	errExpectedBlob       = Reply("ERR Invalid argument, expected BLOB")
	errInputsNotForONNX   = Reply("ERR INPUTS argument should not be specified for this backend")
	errModelTooBig        = Reply("ERR model exceeds max-model-size")
	errNoRunInfo          = Reply("ERR cannot find run info for key")
	errInputsMismatch     = Reply("Number of keys given as INPUTS here does not match model definition")
	errOutputsMismatch    = Reply("Number of keys given as OUTPUTS here does not match model definition")
	errModelFile          = Reply("ERR FILE path must name a regular file inside model-dir")
	errNoModelDir         = Reply("ERR FILE needs the model-dir directive")
)

// modelStoreCmd is a parsed AI.MODELSTORE / AI.MODELSET.
type modelStoreCmd struct {
	key      string
	meta     modelstore.ModelMeta
	optimize bool
	chunks   [][]byte // the model bytes, in order
	file     string
	fromFile bool // FILE was given (file may be empty, which is refused)
	// upload is the buffer the front end read the chunks into, if any.
	upload *modelstore.ModelBuffer
}

// parseBatchValue parses RedisAI's unsigned clause values (2.0 accepted).
func parseBatchValue(b []byte, err Reply) (int64, error) {
	if n, ok := parseInt(b); ok && n >= 0 {
		return n, nil
	}
	f, e := strconv.ParseFloat(string(b), 64)
	if e != nil || f < 0 || f != math.Trunc(f) || f > 1<<53 {
		return 0, err
	}
	return int64(f), nil
}

func validDevice(d []byte) bool {
	s := strings.ToUpper(string(d))
	if len(s) >= 10 {
		return false
	}
	if s == "CPU" || s == "GPU" {
		return true
	}
	for _, p := range []string{"CPU:", "GPU:"} {
		if rest, ok := strings.CutPrefix(s, p); ok {
			for _, c := range rest {
				if c < '0' || c > '9' {
					return false
				}
			}
			return true
		}
	}
	return false
}

func parseModelStore(deprecated bool) func(a Args) (Runner, error) {
	return func(a Args) (Runner, error) {
		c := &modelStoreCmd{key: a.NextString(), optimize: true}
		backend := strings.ToUpper(a.NextString())
		switch backend {
		case "ONNX", "TF", "TFLITE", "TORCH":
		default:
			return nil, errUnsupportedBackend
		}
		device := a.Next()
		if !validDevice(device) {
			return nil, errInvalidDevice
		}
		c.meta = modelstore.ModelMeta{Backend: backend, Device: string(device)}
		if a.Match("TAG") {
			if !a.More() {
				return nil, errMissingBlob
			}
			c.meta.Tag = a.NextString()
		}
		// Each clause is optional on its own (RedisAI's AC_AdvanceIfMatch),
		// so MINBATCHSIZE without BATCHSIZE is reported as such.
		var err error
		if a.Match("BATCHSIZE") {
			if c.meta.BatchSize, err = parseBatchValue(a.Next(), "ERR Invalid argument for BATCHSIZE"); err != nil {
				return nil, err
			}
		}
		if a.Match("MINBATCHSIZE") {
			if c.meta.MinBatchSize, err = parseBatchValue(a.Next(), "ERR Invalid argument for MINBATCHSIZE"); err != nil {
				return nil, err
			}
		}
		if a.Match("MINBATCHTIMEOUT") {
			if c.meta.MinBatchTimeout, err = parseBatchValue(a.Next(), "ERR Invalid argument for MINBATCHTIMEOUT"); err != nil {
				return nil, err
			}
		}
		if c.meta.MinBatchSize > 0 && c.meta.BatchSize == 0 {
			return nil, Reply("ERR MINBATCHSIZE specified without BATCHSIZE")
		}
		if deprecated && c.meta.MinBatchTimeout > 0 && c.meta.BatchSize == 0 {
			return nil, Reply("ERR MINBATCHTIMEOUT specified without BATCHSIZE")
		}
		if c.meta.MinBatchTimeout > 0 && c.meta.MinBatchSize == 0 {
			return nil, Reply("ERR MINBATCHTIMEOUT specified without MINBATCHSIZE")
		}
		for {
			switch {
			case a.Match("OPTIMIZE"):
				switch string(a.Next()) {
				case "0":
					c.optimize = false
				case "1":
					c.optimize = true
				default:
					return nil, Reply("ERR OPTIMIZE takes 0 or 1")
				}
				continue
			case a.Match("NOPERSIST"):
				c.meta.NoPersist = true
				continue
			}
			break
		}
		if deprecated && a.Match("INPUTS") { // names without counts; ONNX reads them from the graph
			for a.More() && !isWord(a.Peek(), "OUTPUTS") && !isWord(a.Peek(), "BLOB") {
				a.Next()
			}
			if a.Match("OUTPUTS") {
				for a.More() && !isWord(a.Peek(), "BLOB") {
					a.Next()
				}
			}
		}
		if !a.More() {
			return nil, errMissingBlob
		}
		switch {
		case a.Match("BLOB"):
			if !a.More() {
				return nil, errMissingBlob
			}
			for a.More() {
				c.chunks = append(c.chunks, a.Keep(a.Pos()))
				a.Next()
			}
			c.upload = a.Upload()
		case a.Match("FILE") && a.Remaining() == 1:
			c.file, c.fromFile = a.NextString(), true
		case !deprecated && isWord(a.Peek(), "INPUTS"):
			return nil, errInputsNotForONNX
		case deprecated:
			return nil, errMissingBlob
		default:
			return nil, errExpectedBlob
		}
		if backend != "ONNX" {
			return nil, errLoadBackend
		}
		if strings.HasPrefix(strings.ToUpper(c.meta.Device), "GPU") {
			return nil, errNoCUDA
		}
		return c, nil
	}
}

// Run implements Runner. Compilation runs outside every lock; only the
// final keyspace update takes the transaction lock.
func (c *modelStoreCmd) Run(x *Ctx) error {
	if err := x.mayUpload(x.C); err != nil {
		return err
	}
	// Another user's model at the key is refused before any work; the
	// store checks again, atomically.
	if allow := x.allow(); allow != nil && c.key != "*" {
		if v, ok := x.Keys.Get(c.key); ok {
			if err := allow(v); err != nil {
				return err
			}
		}
	}
	data, buf, err := c.modelBytes(x)
	if err != nil {
		return err
	}
	if err := CheckUploadBudget(int64(len(data)), x.uploadBudget(x.C, c.key)); err != nil {
		return err
	}
	meta := c.meta
	meta.Owner = x.stamp()
	m, err := x.compileModel(c.key, meta, c.optimize, data, buf)
	if err != nil {
		return err
	}
	key := c.key
	if key == "*" {
		m.ID = uuid.NewString()
		key = m.ID
	}
	var old []modelstore.Value
	if err := x.Update(func() error {
		old, err = x.Keys.SetMany([]modelstore.Write{{Key: key, Value: m, SameType: true, Allow: x.allow()}})
		return err
	}); err != nil {
		m.Release()
		return err
	}
	if old[0] != nil {
		x.Release(old)
	}
	x.evictModels()
	if c.key == "*" {
		x.W.BulkString(key)
	} else {
		x.W.OK()
	}
	return nil
}

// modelBytes assembles the model: chunks the front end read into one
// upload buffer are used where they lie (buf), one chunk of its own is used
// as is, several are concatenated once into an exactly-sized buffer.
func (c *modelStoreCmd) modelBytes(x *Ctx) (data []byte, buf *modelstore.ModelBuffer, err error) {
	max := x.Opts.MaxModelSize.Load()
	if c.fromFile {
		data, err = readModelFile(x.Opts.ModelDir, c.file, max)
		return data, nil, err
	}
	var total int64
	for _, ch := range c.chunks {
		total += int64(len(ch))
	}
	if total > max {
		return nil, nil, errModelTooBig
	}
	if c.upload != nil && c.upload.Holds(c.chunks) {
		return c.upload.Bytes(), c.upload, nil
	}
	// Chunks in an upload buffer they do not fill exactly die with it.
	if len(c.chunks) == 1 && c.upload == nil {
		return c.chunks[0], nil, nil
	}
	return bytes.Join(c.chunks, nil), nil, nil
}

// readModelFile reads path, which must resolve (symlinks included) to a
// regular file inside dir.
func readModelFile(dir, path string, max int64) ([]byte, error) {
	if dir == "" {
		return nil, errNoModelDir
	}
	root, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return nil, errNoModelDir
	}
	root, _ = filepath.Abs(root)
	p := path
	if !filepath.IsAbs(p) {
		p = filepath.Join(root, p)
	}
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return nil, errModelFile
	}
	real, _ = filepath.Abs(real)
	rel, err := filepath.Rel(root, real)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) || filepath.IsAbs(rel) {
		return nil, errModelFile
	}
	st, err := os.Stat(real)
	if err != nil || !st.Mode().IsRegular() {
		return nil, errModelFile
	}
	if st.Size() > max {
		return nil, errModelTooBig
	}
	return os.ReadFile(real)
}

// compileModel makes a Model from bytes through the shared blob registry,
// which compiles only bytes it has not seen, after checking that they fit
// in maxmemory (bytes it already holds add nothing). key names the model
// in the engine's logs.
func (x *Ctx) compileModel(key string, meta modelstore.ModelMeta, optimize bool, data []byte, buf *modelstore.ModelBuffer) (*modelstore.Model, error) {
	from := modelstore.Origin{Owner: meta.Owner, Key: key}
	opts := modelstore.SessionOptions{
		Optimize:       optimize,
		IntraOpThreads: int(x.AI.IntraOpParallelism.Load()),
		InterOpThreads: int(x.AI.InterOpParallelism.Load()),
	}
	// The sealed model file of the append-only log is in place before the
	// model is stored: written as a large upload arrived (its SHA-256 too),
	// or else while the model compiles.
	var stream *modelStream
	var sum [32]byte
	if buf != nil {
		data = buf.Bytes()
		stream, sum = x.streamedModelFile(buf, meta.NoPersist)
	}
	var mf *modelFile
	var err error
	if stream == nil {
		if mf, err = x.startModelFile(data, meta.NoPersist); err != nil {
			return nil, err
		}
	}
	var blob *modelstore.Blob
	switch {
	case stream != nil:
		blob, err = x.Models.AcquireBufferVerified(buf, sum, from, opts, x.Keys.CheckMemory)
	case buf != nil:
		blob, err = x.Models.AcquireBuffer(buf, from, opts, x.Keys.CheckMemory)
	default:
		blob, err = x.Models.AcquireIfRoom(data, from, opts, x.Keys.CheckMemory)
	}
	if err != nil {
		mf.abort()
		if stream != nil {
			stream.abort()
		}
		return nil, err
	}
	if stream != nil {
		err = stream.finish(sum)
	} else {
		err = mf.finish(x, blob)
	}
	if err != nil {
		blob.Release()
		return nil, err
	}
	meta.Created = time.Now()
	return modelstore.NewModel(meta, blob), nil
}

// evictModels enforces max-models: the model stored longest ago goes first.
func (x *Ctx) evictModels() {
	max := x.Opts.MaxModels.Load()
	if max <= 0 {
		return
	}
	// With users, the limit is per user: a user's stores never evict
	// another's models.
	allow := x.allow()
	for {
		var models []modelstore.Item
		for _, it := range x.Keys.Items() {
			if _, ok := it.Value.(*modelstore.Model); ok && (allow == nil || allow(it.Value) == nil) {
				models = append(models, it)
			}
		}
		if int64(len(models)) <= max {
			return
		}
		oldest := models[0]
		for _, it := range models[1:] {
			if it.Value.(*modelstore.Model).Created.Before(oldest.Value.(*modelstore.Model).Created) {
				oldest = it
			}
		}
		if x.Keys.DeleteIf(oldest.Key, oldest.Value) {
			x.Log.Info("max-models reached: evicted the oldest model", "key", oldest.Key)
			x.Release([]modelstore.Value{oldest.Value})
		}
	}
}

// getModel fetches a model: ErrNoModel or ErrWrongType otherwise.
func (x *Ctx) getModel(key string) (*modelstore.Model, error) {
	v, ok := x.Keys.Get(key)
	if !ok {
		return nil, modelstore.ErrNoModel
	}
	m, ok := v.(*modelstore.Model)
	if !ok {
		return nil, modelstore.ErrWrongType
	}
	if err := x.mayUse(m); err != nil {
		return nil, err
	}
	return m, nil
}

type modelGetCmd struct {
	key        string
	meta, blob bool
}

func parseModelGet(a Args) (Runner, error) {
	if a.Len() > 3 {
		return nil, errorf("ERR wrong number of arguments for 'ai.modelget' command")
	}
	c := &modelGetCmd{key: a.NextString()}
	for a.More() { // unknown words are ignored, as RedisAI does
		switch {
		case a.Match("META"):
			c.meta = true
		case a.Match("BLOB"):
			c.blob = true
		default:
			a.Next()
		}
	}
	if !c.meta && !c.blob {
		c.meta, c.blob = true, true
	}
	return c, nil
}

// Run implements Runner.
func (c *modelGetCmd) Run(x *Ctx) error {
	m, err := x.getModel(c.key)
	if err != nil {
		return err
	}
	if c.blob {
		// The bytes must outlive the writes, even if the model is deleted
		// meanwhile (an upload buffer is unmapped with its last reference).
		if !m.Blob.TryRetain() {
			return modelstore.ErrNoModel
		}
		defer m.Blob.Release()
	}
	w := x.W
	if c.meta {
		n := 16
		if c.blob {
			n = 18
		}
		w.Array(n)
		w.BulkString("backend")
		w.BulkString(m.Backend)
		w.BulkString("device")
		w.BulkString(m.Device)
		w.BulkString("tag")
		w.BulkString(m.Tag)
		w.BulkString("batchsize")
		w.Int(m.BatchSize)
		w.BulkString("minbatchsize")
		w.Int(m.MinBatchSize)
		w.BulkString("inputs")
		writeIONames(w, m.Inputs())
		w.BulkString("outputs")
		writeIONames(w, m.Outputs())
		w.BulkString("minbatchtimeout")
		w.Int(m.MinBatchTimeout)
	}
	if c.blob {
		if c.meta {
			w.BulkString("blob")
		}
		// Outside a transaction (which holds the transaction lock), large
		// chunks go straight to the connection, never into the reply buffer.
		writeChunks(w, m.Blob.Data, x.AI.ModelChunkSize.Load(), !x.locked)
	}
	return nil
}

func writeIONames(w *Writer, ios []modelstore.IOInfo) {
	w.Array(len(ios))
	for _, io := range ios {
		w.BulkString(io.Name)
	}
}

// writeChunks writes a model blob as RedisAI does: one bulk string when it
// fits in one chunk, else an array of chunks. Unlike RedisAI, a length that
// is an exact multiple of the chunk size gets no empty final chunk. With
// stream, large chunks are written with BulkStream.
func writeChunks(w *Writer, data []byte, size int64, stream bool) {
	bulk := w.Bulk
	if stream {
		bulk = w.BulkStream
	}
	if size <= 0 || int64(len(data)) <= size {
		bulk(data)
		return
	}
	n := (int64(len(data)) + size - 1) / size
	w.Array(int(n))
	for off := int64(0); off < int64(len(data)); off += size {
		end := min(off+size, int64(len(data)))
		bulk(data[off:end])
	}
}

func parseModelDel(a Args) (Runner, error) {
	key := a.NextString()
	return RunFunc(func(x *Ctx) error {
		if err := x.mayChangeModels(x.C); err != nil {
			return err
		}
		m, err := x.getModel(key)
		if err != nil {
			return err
		}
		if x.Keys.DeleteIf(key, m) {
			x.Release([]modelstore.Value{m})
		}
		x.W.OK()
		return nil
	}), nil
}

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
	return time.Duration(n) * time.Millisecond, nil
}

// parseExecBody parses `INPUTS n ... OUTPUTS m ...` with RedisAI's errors.
func parseExecBody(a *Args, c *modelExecCmd) error {
	var err error
	if c.nIn, c.inputs, err = parseKeyClause(a, "INPUTS", "input", "Input"); err != nil {
		return err
	}
	c.nOut, c.outputs, err = parseKeyClause(a, "OUTPUTS", "output", "Output")
	return err
}

// parseKeyClause parses `WORD n key...` (INPUTS or OUTPUTS); kind and Kind
// fill RedisAI's error texts.
func parseKeyClause(a *Args, word, kind, Kind string) (int64, []string, error) {
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
	keys := make([]string, n)
	for i := range keys {
		keys[i] = a.NextString()
	}
	return n, keys, nil
}

func parseModelExecute(a Args) (Runner, error) {
	if len(a.V) < 8 {
		return nil, Reply("ERR wrong number of arguments for 'AI.MODELEXECUTE' command")
	}
	c := &modelExecCmd{key: a.NextString()}
	c.syntaxErr = parseExecBody(&a, c)
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
	if a.Match("TIMEOUT") {
		if c.timeout, c.syntaxErr = parseTimeout(&a); c.syntaxErr != nil {
			return c, nil
		}
	}
	if !a.Match("INPUTS") {
		c.syntaxErr = Reply("ERR INPUTS not specified")
		return c, nil
	}
	// Inputs run to the first OUTPUTS; without one, every key is an input
	// and the counts disagree with the model (as in RedisAI).
	for a.More() && !isWord(a.Peek(), "OUTPUTS") {
		c.inputs = append(c.inputs, a.NextString())
	}
	if a.Match("OUTPUTS") {
		c.outputs = keyStrings(a.Rest())
	}
	return c, nil
}

// Run implements Runner: inputs are fetched, output keys checked, the model
// runs with no lock held, and the outputs are stored in one atomic update.
func (c *modelExecCmd) Run(x *Ctx) error {
	queued := time.Now()
	m, err := x.getModel(c.key)
	if err != nil {
		return err
	}
	if err := c.checkSyntax(m); err != nil {
		return err
	}
	if err := checkExpect(m, c.expect); err != nil {
		return err
	}
	if len(c.inputs) != len(m.Inputs()) {
		return errInputsMismatch
	}
	if len(c.outputs) != len(m.Outputs()) {
		return errOutputsMismatch
	}
	inputs := make([]*modelstore.Tensor, len(c.inputs))
	for i, k := range c.inputs {
		if inputs[i], err = x.getTensor(k); err != nil {
			return err
		}
	}
	if err := x.checkOutputKeys(c.outputs); err != nil {
		return err
	}
	outs, err := x.runModel(m, inputs, queued, c.timeout)
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

// runModel runs m with the current run limits.
func (x *Ctx) runModel(m *modelstore.Model, inputs []*modelstore.Tensor, queued time.Time, timeout time.Duration) ([]*modelstore.Tensor, error) {
	return x.Queue.Run(m, &modelstore.RunRequest{
		Inputs: inputs, Queued: queued, Timeout: timeout,
		ExecTimeout: time.Duration(x.AI.ModelExecutionTimeout.Load()) * time.Millisecond,
	})
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
				c := *t
				c.Owner = owner
				t = &c
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

func parseAIInfo(a Args) (Runner, error) {
	if a.Len() > 2 {
		return nil, errorf("ERR wrong number of arguments for 'ai.info' command")
	}
	key := a.NextString()
	reset := a.More() && isWord(a.Peek(), "RESETSTAT")
	return RunFunc(func(x *Ctx) error {
		v, ok := x.Keys.Get(key)
		m, isModel := v.(*modelstore.Model)
		if !ok || !isModel {
			return errNoRunInfo
		}
		if err := x.mayUse(m); err != nil {
			return err
		}
		if reset {
			m.Stats.Reset()
			x.W.OK()
			return nil
		}
		w := x.W
		w.Array(18)
		for _, kv := range []struct {
			k string
			v any
		}{
			{"key", key}, {"type", "MODEL"}, {"backend", m.Backend}, {"device", m.Device}, {"tag", m.Tag},
			{"duration", m.Stats.Duration.Load()}, {"samples", m.Stats.Samples.Load()},
			{"calls", m.Stats.Calls.Load()}, {"errors", m.Stats.Errors.Load()},
		} {
			w.BulkString(kv.k)
			switch v := kv.v.(type) {
			case string:
				w.BulkString(v)
			case int64:
				w.Int(v)
			}
		}
		return nil
	}), nil
}

func parseModelScan(a Args) (Runner, error) {
	return RunFunc(func(x *Ctx) error {
		var items []modelstore.Item
		allow := x.allow()
		for _, it := range x.Keys.Items() {
			if _, ok := it.Value.(*modelstore.Model); ok && (allow == nil || allow(it.Value) == nil) {
				items = append(items, it)
			}
		}
		x.W.Array(len(items))
		for _, it := range items {
			x.W.Array(2)
			x.W.BulkString(it.Key)
			x.W.BulkString(it.Value.(*modelstore.Model).Tag)
		}
		return nil
	}), nil
}

func parseModelInfo(a Args) (Runner, error) {
	key := a.NextString()
	return RunFunc(func(x *Ctx) error {
		m, err := x.getModel(key)
		if err != nil {
			return err
		}
		// The digest of a model stored a moment ago may still be computed;
		// a reference keeps a racing DEL from stopping it.
		if !m.Blob.TryRetain() {
			return modelstore.ErrNoModel
		}
		defer m.Blob.Release()
		w := x.W
		ioList := func(ios []modelstore.IOInfo) {
			w.Array(len(ios))
			for _, io := range ios {
				w.Map(3)
				w.BulkString("name")
				w.BulkString(io.Name)
				w.BulkString("dtype")
				if io.DType != modelstore.DTypeInvalid {
					w.BulkString(io.DType.String())
				} else {
					w.BulkString(io.ElemType)
				}
				w.BulkString("shape")
				w.Array(len(io.Shape))
				for _, d := range io.Shape {
					w.Int(d)
				}
			}
		}
		w.Map(19)
		w.BulkString("key")
		w.BulkString(key)
		w.BulkString("id")
		w.BulkString(m.ID)
		w.BulkString("sha256")
		w.BulkString(m.Blob.SHA256Hex())
		w.BulkString("size")
		w.Int(int64(len(m.Blob.Data)))
		w.BulkString("backend")
		w.BulkString(m.Backend)
		w.BulkString("device")
		w.BulkString(m.Device)
		w.BulkString("tag")
		w.BulkString(m.Tag)
		w.BulkString("inputs")
		ioList(m.Inputs())
		w.BulkString("outputs")
		ioList(m.Outputs())
		w.BulkString("batchsize")
		w.Int(m.BatchSize)
		w.BulkString("minbatchsize")
		w.Int(m.MinBatchSize)
		w.BulkString("minbatchtimeout")
		w.Int(m.MinBatchTimeout)
		w.BulkString("optimize")
		w.Int(b2i(m.Blob.Opts.Optimize))
		w.BulkString("shared_with")
		w.Int(int64(m.Blob.Refs() - 2)) // less this key's and this command's
		w.BulkString("persist")
		w.Int(b2i(!m.NoPersist))
		w.BulkString("created")
		w.Int(m.Created.UnixMilli())
		// Whether ONNX Runtime reads the large initializers in the stored
		// bytes (shared) or holds its own copy (copied).
		w.BulkString("weights")
		w.BulkString(m.Blob.Weights.String())
		w.BulkString("owner")
		owner, _ := ownerOf(m)
		w.BulkString(owner)
		// Which engine runs it: "onnxruntime", "onnxruntime-worker" or
		// "go" (the pure-Go engine, the one an enclave build has).
		w.BulkString("engine")
		w.BulkString(m.Blob.Engine)
		return nil
	}), nil
}

// aiSetting is one AI.CONFIG integer setting.
type aiSetting struct {
	v      func(s *AISettings) *atomic.Int64
	min    int64
	errMsg string
}

var aiSettings = map[string]aiSetting{
	"MODEL_CHUNK_SIZE":        {func(s *AISettings) *atomic.Int64 { return &s.ModelChunkSize }, 1, "ERR MODEL_CHUNK_SIZE: invalid chunk size"},
	"MODEL_EXECUTION_TIMEOUT": {func(s *AISettings) *atomic.Int64 { return &s.ModelExecutionTimeout }, 1000, "ERR MODEL_EXECUTION_TIMEOUT: invalid value"},
	"INTRA_OP_PARALLELISM":    {func(s *AISettings) *atomic.Int64 { return &s.IntraOpParallelism }, 0, "ERR INTRA_OP_PARALLELISM: invalid value"},
	"INTER_OP_PARALLELISM":    {func(s *AISettings) *atomic.Int64 { return &s.InterOpParallelism }, 0, "ERR INTER_OP_PARALLELISM: invalid value"},
	"THREADS_PER_QUEUE":       {func(s *AISettings) *atomic.Int64 { return &s.ThreadsPerQueue }, 1, "ERR THREADS_PER_QUEUE: invalid value"},
}

func parseAIConfig(a Args) (Runner, error) {
	sub := strings.ToUpper(a.NextString())
	switch sub {
	case "GET":
		if a.Remaining() != 1 {
			return nil, errorf("ERR wrong number of arguments for 'ai.config' command")
		}
		name := strings.ToUpper(a.NextString())
		return RunFunc(func(x *Ctx) error {
			if name == "BACKENDSPATH" {
				x.W.BulkString(*x.AI.BackendsPath.Load())
			} else if s, ok := aiSettings[name]; ok {
				x.W.Int(s.v(x.AI).Load())
			} else {
				x.W.Null()
			}
			return nil
		}), nil
	case "BACKENDSPATH":
		if !a.More() {
			return nil, Reply("ERR BACKENDSPATH: missing path argument")
		}
		p := a.NextString()
		return RunFunc(func(x *Ctx) error { x.AI.BackendsPath.Store(&p); x.W.OK(); return nil }), nil
	case "LOADBACKEND":
		if a.Remaining() < 2 {
			return nil, errorf("ERR wrong number of arguments for 'ai.config' command")
		}
		switch strings.ToUpper(a.NextString()) {
		case "ONNX": // linked in and loaded at start
			return RunFunc(func(x *Ctx) error { x.W.OK(); return nil }), nil
		case "TF", "TFLITE", "TORCH":
			return nil, Reply("ERR error loading backend")
		}
		return nil, errUnsupportedBackend
	case "SET":
		if a.Remaining() != 2 {
			return nil, errorf("ERR wrong number of arguments for 'ai.config' command")
		}
		sub = strings.ToUpper(a.NextString())
	}
	s, ok := aiSettings[sub]
	if !ok {
		return nil, Reply("ERR unsupported subcommand")
	}
	if !a.More() {
		if sub == "MODEL_CHUNK_SIZE" {
			return nil, Reply("ERR MODEL_CHUNK_SIZE: missing chunk size")
		}
		return nil, errorf("ERR %s: missing value", sub)
	}
	n, ok := parseInt(a.Next())
	if !ok || n < s.min || (sub == "MODEL_CHUNK_SIZE" && n <= 0) {
		return nil, Reply(s.errMsg)
	}
	return RunFunc(func(x *Ctx) error {
		s.v(x.AI).Store(n)
		if sub == "THREADS_PER_QUEUE" {
			x.Queue.SetWorkers(int(n))
		}
		x.W.OK()
		return nil
	}), nil
}

// LoadStartupModels stores the models named by `loadmodel` directives:
// `loadmodel key ONNX CPU /path/model.onnx [TAG t] [BATCHSIZE n ...]`.
// The path is the operator's, so it is not confined to model-dir.
func (s *App) LoadStartupModels() error {
	for _, line := range s.Opts.LoadModels {
		path := line[3]
		argv := [][]byte{[]byte("ai.modelstore"), []byte(line[0]), []byte(line[1]), []byte(line[2])}
		for _, w := range line[4:] {
			argv = append(argv, []byte(w))
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("loadmodel %s: %w", line[0], err)
		}
		argv = append(argv, []byte("BLOB"), data)
		r, err := parseModelStore(false)(NewArgs(argv, func(int) bool { return true }))
		if err != nil {
			return fmt.Errorf("loadmodel %s: %s", line[0], errorText(err))
		}
		c := s.NewClient("startup", "", nil)
		c.internal = true
		err = s.run(&Ctx{App: s, C: c, W: c.W}, table["ai.modelstore"], r)
		if cerr := s.CommitClient(c); err == nil {
			err = cerr
		}
		s.RemoveClient(c)
		if err != nil {
			return fmt.Errorf("loadmodel %s: %s", line[0], errorText(err))
		}
		s.Log.Info("model loaded at start", "key", line[0], "path", path)
	}
	return nil
}
