package commands

import (
	"math"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/enclaveai/enclaveai/config"
	"github.com/enclaveai/enclaveai/modelstore"
)

func parseAIInfo(a Args) (Runner, error) {
	if a.Len() > 2 {
		return nil, errorf("ERR wrong number of arguments for 'ai.info' command")
	}
	key := a.NextString()
	reset := a.More() && isWord(a.Peek(), "RESETSTAT")
	return aiInfoCmd{key: key, reset: reset}, nil
}

// aiInfoCmd is AI.INFO key [RESETSTAT].
type aiInfoCmd struct {
	key   string
	reset bool
}

// Run implements Runner.
func (c aiInfoCmd) Run(x *Ctx) error {
	v, ok := x.Keys.Get(c.key)
	m, isModel := v.(*modelstore.Model)
	if !ok || !isModel {
		return errNoRunInfo
	}
	if err := x.mayUse(m); err != nil {
		return err
	}
	if c.reset {
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
		{"key", c.key}, {"type", "MODEL"}, {"backend", m.Backend}, {"device", m.Device}, {"tag", m.Tag},
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
}

func parseModelScan(a Args) (Runner, error) {
	return modelScanCmd{}, nil
}

// modelScanCmd is AI._MODELSCAN: every model key this user may see, with its tag.
type modelScanCmd struct{}

// Run implements Runner.
func (modelScanCmd) Run(x *Ctx) error {
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
}

func parseModelInfo(a Args) (Runner, error) {
	key := a.NextString()
	return modelInfoCmd{key: key}, nil
}

// modelInfoCmd is AI.MODELINFO key.
type modelInfoCmd struct{ key string }

// Run implements Runner.
func (c modelInfoCmd) Run(x *Ctx) error {
	m, err := x.getModel(c.key)
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
	w.BulkString(c.key)
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
	// The other keys holding this copy: the caller's own when users are
	// enabled, since two users' models never share one (modelstore.Blob).
	w.Int(int64(m.Blob.Models() - 1))
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
}

// aiSetting is one AI.CONFIG integer setting, which takes values from
// min to max.
type aiSetting struct {
	v        func(s *AISettings) *atomic.Int64
	min, max int64
	errMsg   string
}

// maxTimeoutMs is the longest MODEL_EXECUTION_TIMEOUT a time.Duration
// holds: a longer one would wrap to a negative deadline, which means none.
const maxTimeoutMs = math.MaxInt64 / int64(time.Millisecond)

var aiSettings = map[string]aiSetting{
	"MODEL_CHUNK_SIZE":        {func(s *AISettings) *atomic.Int64 { return &s.ModelChunkSize }, 1, math.MaxInt64, "ERR MODEL_CHUNK_SIZE: invalid chunk size"},
	"MODEL_EXECUTION_TIMEOUT": {func(s *AISettings) *atomic.Int64 { return &s.ModelExecutionTimeout }, 1000, maxTimeoutMs, "ERR MODEL_EXECUTION_TIMEOUT: invalid value"},
	"INTRA_OP_PARALLELISM":    {func(s *AISettings) *atomic.Int64 { return &s.IntraOpParallelism }, 0, config.MaxThreads, "ERR INTRA_OP_PARALLELISM: invalid value"},
	"INTER_OP_PARALLELISM":    {func(s *AISettings) *atomic.Int64 { return &s.InterOpParallelism }, 0, config.MaxThreads, "ERR INTER_OP_PARALLELISM: invalid value"},
	"THREADS_PER_QUEUE":       {func(s *AISettings) *atomic.Int64 { return &s.ThreadsPerQueue }, 1, config.MaxThreads, "ERR THREADS_PER_QUEUE: invalid value"},
}

// aiConfigAdminSubs are AI.CONFIG's forms that change settings (all but
// GET), administrative with users.
func aiConfigAdminSubs() []string {
	subs := []string{"SET", "BACKENDSPATH", "LOADBACKEND"}
	for name := range aiSettings {
		subs = append(subs, name)
	}
	slices.Sort(subs)
	return subs
}

func parseAIConfig(a Args) (Runner, error) {
	sub := strings.ToUpper(a.NextString())
	switch sub {
	case "GET":
		// Words after the name are ignored, as RedisAI's (argc > 2).
		if a.Remaining() < 1 {
			return nil, errorf("ERR wrong number of arguments for 'ai.config' command")
		}
		name := strings.ToUpper(a.NextString())
		return aiConfigGetCmd{name: name}, nil
	case "BACKENDSPATH":
		if !a.More() {
			return nil, Reply("ERR BACKENDSPATH: missing path argument")
		}
		p := a.NextString()
		return aiConfigPathCmd{p: p}, nil
	case "LOADBACKEND":
		if a.Remaining() < 2 {
			return nil, errorf("ERR wrong number of arguments for 'ai.config' command")
		}
		switch strings.ToUpper(a.NextString()) {
		case "ONNX": // linked in and loaded at start
			return aiConfigLoadCmd{}, nil
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
	if !ok || n < s.min || n > s.max {
		return nil, Reply(s.errMsg)
	}
	return aiConfigSetCmd{sub: sub, n: n}, nil
}

// aiConfigSetCmd is AI.CONFIG [SET] name value for an integer setting
// (aiSettings[sub], checked by the parse).
type aiConfigSetCmd struct {
	sub string
	n   int64
}

// Run implements Runner.
func (c aiConfigSetCmd) Run(x *Ctx) error {
	aiSettings[c.sub].v(x.AI).Store(c.n)
	if c.sub == "THREADS_PER_QUEUE" {
		x.Queue.SetWorkers(int(c.n))
	}
	x.W.OK()
	return nil
}

// aiConfigLoadCmd is AI.CONFIG LOADBACKEND ONNX path (ONNX Runtime is
// linked in: nothing to load). RedisAI answers an error when ONNX is
// loaded already; here it always is, and a deployment script that loads
// the backend before its first AI.MODELSTORE, as RedisAI needs, gets OK.
type aiConfigLoadCmd struct{}

// Run implements Runner.
func (aiConfigLoadCmd) Run(x *Ctx) error {
	x.W.OK()
	return nil
}

// aiConfigPathCmd is AI.CONFIG BACKENDSPATH path.
type aiConfigPathCmd struct{ p string }

// Run implements Runner.
func (c aiConfigPathCmd) Run(x *Ctx) error {
	p := c.p
	x.AI.BackendsPath.Store(&p)
	x.W.OK()
	return nil
}

// aiConfigGetCmd is AI.CONFIG GET name.
type aiConfigGetCmd struct{ name string }

// Run implements Runner.
func (c aiConfigGetCmd) Run(x *Ctx) error {
	if c.name == "BACKENDSPATH" {
		x.W.BulkString(*x.AI.BackendsPath.Load())
	} else if s, ok := aiSettings[c.name]; ok {
		x.W.Int(s.v(x.AI).Load())
	} else {
		x.W.Null()
	}
	return nil
}

// LoadStartupModels stores the models named by `loadmodel` directives:
// `loadmodel key ONNX CPU /path/model.onnx [TAG t] [BATCHSIZE n ...]`.
