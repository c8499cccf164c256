package commands

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/enclaveai/enclaveai/modelstore"
)

// modelStoreCmd is a parsed AI.MODELSTORE / AI.MODELSET.
type modelStoreCmd struct {
	key        string
	meta       modelstore.ModelMeta
	optimize   bool
	chunks     [][]byte // the model bytes, in order
	file       string
	fromFile   bool   // FILE was given (file may be empty, which is refused)
	uploadID   string // UPLOAD: the resumable upload that holds the bytes
	fromUpload bool   // UPLOAD was given (an empty id is no upload's)
	// upload is the buffer the front end read the chunks into, if any;
	// claim is what the bytes claimed against max-model-bytes-per-user
	// (the front end's, or taken from the resumable upload: own), which
	// the store hands back as the model is stored.
	upload *modelstore.ModelBuffer
	claim  *claim
	own    claim
	// prepared is set by prepare (a MULTI's queued store, compiled before
	// EXEC takes the transaction lock): the model, or why there is none.
	prepared bool
	model    *modelstore.Model
	err      error
}

// prepare compiles the model of a store queued in MULTI before EXEC takes
// the write side of the transaction lock, which holds every other client:
// compiled under it, a model that takes 20 s to compile stopped the whole
// server for 20 s per store. A store from a resumable upload is left to
// Run: taking the upload is a change that an EXEC which runs nothing (a
// WATCHed key changed) must not make.
func (c *modelStoreCmd) prepare(x *Ctx) {
	if !c.fromUpload {
		c.model, c.err = c.compile(x)
		c.prepared = true
	}
}

// discard gives back what prepare compiled, for an EXEC that runs nothing.
func (c *modelStoreCmd) discard(x *Ctx) {
	if c.model != nil {
		x.dropUnstored(c.model)
		c.model = nil
	}
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

// setDevice is the deprecated AI.MODELSET's own device check, RedisAI's
// (deprecated.c): at most 10 bytes and none of the command's keywords;
// the backend reads the rest (onnxDevice).
func setDevice(d []byte) bool {
	if len(d) > 10 {
		return false
	}
	for _, kw := range []string{"INPUTS", "OUTPUTS", "TAG", "BATCHSIZE", "MINBATCHSIZE", "MINBATCHTIMEOUT", "BLOB"} {
		if isWord(d, kw) {
			return false
		}
	}
	return true
}

// onnxDevice is the ONNX backend's reading of a device, as RedisAI's
// parseDeviceStr: anything that begins with CPU is the CPU, GPU or GPU:n
// a GPU (this build has none), the rest unsupported.
func onnxDevice(d string) error {
	u := strings.ToUpper(d)
	switch {
	case strings.HasPrefix(u, "CPU"):
		return nil
	case u == "GPU" || strings.HasPrefix(u, "GPU:"):
		return errNoCUDA
	}
	return Reply("ERR unsupported device")
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
		if deprecated && !setDevice(device) || !deprecated && !validDevice(device) {
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
		// The deprecated AI.MODELSET nests them (BATCHSIZE n [MINBATCHSIZE
		// m [MINBATCHTIMEOUT t]]): one without BATCHSIZE is refused before
		// its value is read, whatever the value (REDISAI.md 3.4).
		var err error
		if a.Match("BATCHSIZE") {
			if c.meta.BatchSize, err = parseBatchValue(a.Next(), "ERR Invalid argument for BATCHSIZE"); err != nil {
				return nil, err
			}
			if deprecated && backend == "TFLITE" {
				return nil, Reply("ERR Auto-batching not supported by the TFLITE backend")
			}
		}
		if a.Match("MINBATCHSIZE") {
			if deprecated && c.meta.BatchSize == 0 {
				return nil, Reply("ERR MINBATCHSIZE specified without BATCHSIZE")
			}
			if c.meta.MinBatchSize, err = parseBatchValue(a.Next(), "ERR Invalid argument for MINBATCHSIZE"); err != nil {
				return nil, err
			}
		}
		if a.Match("MINBATCHTIMEOUT") {
			if deprecated && c.meta.BatchSize == 0 {
				return nil, Reply("ERR MINBATCHTIMEOUT specified without BATCHSIZE")
			}
			if c.meta.MinBatchTimeout, err = parseBatchValue(a.Next(), "ERR Invalid argument for MINBATCHTIMEOUT"); err != nil {
				return nil, err
			}
		}
		if c.meta.MinBatchSize > 0 && c.meta.BatchSize == 0 {
			return nil, Reply("ERR MINBATCHSIZE specified without BATCHSIZE")
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
		if deprecated && backend == "TF" && !isWord(a.Peek(), "INPUTS") {
			return nil, Reply("ERR Insufficient arguments, INPUTS and OUTPUTS not specified")
		}
		if deprecated {
			// INPUTS and OUTPUTS names without counts, which ONNX reads
			// from the graph, and whatever else comes before BLOB: RedisAI
			// reads up to BLOB and ignores it for every backend but TF
			// (AC_GetSliceUntilMatches, compatibility review).
			for a.More() && !isWord(a.Peek(), "BLOB") {
				a.Next()
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
		case !deprecated && a.Match("UPLOAD") && a.Remaining() == 1:
			c.uploadID, c.fromUpload = a.NextString(), true
		case !deprecated && isWord(a.Peek(), "INPUTS"):
			if backend == "TF" { // TF's own INPUTS, then a backend not there
				return nil, errLoadBackend
			}
			return nil, errInputsNotForONNX
		case deprecated:
			return nil, errMissingBlob
		default:
			return nil, errExpectedBlob
		}
		if backend != "ONNX" {
			return nil, errLoadBackend
		}
		if err := onnxDevice(c.meta.Device); err != nil {
			return nil, err
		}
		return c, nil
	}
}

// Run implements Runner. Compilation runs outside every lock; only the
// final keyspace update takes the transaction lock.
func (c *modelStoreCmd) Run(x *Ctx) error {
	m, err := c.model, c.err
	if !c.prepared {
		m, err = c.compile(x)
	}
	defer x.releaseQuota(&c.own) // a resumable upload's, if not stored
	c.model = nil                // Run owns it now
	if err != nil {
		return err
	}
	key := c.key
	if key == "*" {
		if m.ID, err = x.newModelID(); err != nil {
			x.dropUnstored(m)
			return err
		}
		key = m.ID
	}
	var old []modelstore.Value
	if err := x.Update(func() error {
		old, err = x.storeModel(key, m, c.claim)
		return err
	}); err != nil {
		x.dropUnstored(m)
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

// storeModel stores m at key, and with max-model-bytes-per-user checks
// again, in the same step under quota.mu, that it keeps the user within
// the limit: next to its models at other keys and every claim but own,
// the claim of the upload that brought m, which it hands back as m is
// stored (stores queued in one transaction compile before any is stored;
// uploads on other connections are claimed apart). It returns the value
// replaced.
func (x *Ctx) storeModel(key string, m *modelstore.Model, own *claim) ([]modelstore.Value, error) {
	user, limit, ok := x.quotaUser(x.C)
	if ok || own != nil && own.n > 0 {
		x.quota.mu.Lock()
		defer x.quota.mu.Unlock()
	}
	if ok {
		if err := x.overQuotaLocked(user, key, limit, int64(len(m.Blob.Data)), own); err != nil {
			return nil, err
		}
	}
	old, err := x.Keys.SetMany([]modelstore.Write{{Key: key, Value: m, SameType: true, Allow: x.allow()}})
	if err != nil {
		return nil, err
	}
	if own != nil && own.n > 0 {
		x.releaseQuotaLocked(own)
	}
	return old, nil
}

// compile checks the caller's rights and budget and compiles the model,
// touching nothing in the keyspace.
func (c *modelStoreCmd) compile(x *Ctx) (*modelstore.Model, error) {
	if err := x.mayUpload(x.C); err != nil {
		return nil, err
	}
	// Another user's model at the key is refused before any work; the
	// store checks again, atomically.
	if allow := x.allow(); allow != nil && c.key != "*" {
		if v, ok := x.Keys.Get(c.key); ok {
			if err := allow(v); err != nil {
				return nil, err
			}
		}
	}
	var data []byte
	var buf *modelstore.ModelBuffer
	var held uploadRoom
	if c.fromUpload {
		// The upload ends here whatever the store's outcome: a refused
		// model is not kept for a retry. Its claim stays until the store
		// (Run gives it back if there is none).
		u, err := x.takeUpload(x.C, c.uploadID)
		if err != nil {
			return nil, err
		}
		c.own, u.claim = u.claim, claim{}
		c.claim = &c.own
		defer x.dropUpload(u)
		data, buf = u.buf.Bytes(), u.buf
		held = uploadRoom{int64(u.held), func() { x.handOverUpload(u) }}
	} else {
		var err error
		if data, buf, err = c.modelBytes(x); err != nil {
			return nil, err
		}
		// Stores queued in MULTI claimed and reserved nothing: their
		// chunks' claims and room were given back once queued (their
		// bytes count with the queue).
		if p := x.C.payload; p != nil {
			c.claim = &p.claim
			if buf != nil && buf == c.upload {
				held = uploadRoom{p.reserved, p.handOver}
			}
		}
	}
	if err := x.checkQuota(x.C, c.key, int64(len(data)), c.claim); err != nil {
		return nil, err
	}
	meta := c.meta
	meta.Owner = x.stamp()
	return x.compileModel(c.key, meta, c.optimize, data, buf, held)
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

// uploadRoom is what an upload that brought a model's bytes holds against
// maxmemory (reserved, in App.uploading), and how it gives that back
// (handOver); zero for bytes that hold nothing.
type uploadRoom struct {
	reserved int64
	handOver func()
}

// compileModel makes a Model from bytes through the shared blob registry,
// which compiles only bytes it has not seen, after checking that they fit
// in maxmemory (bytes it already holds add nothing; those held, the
// reservation of the upload that brought them, are in it already). Once
// the blob holds the bytes, the upload hands its reservation over: the
// registry counts them. A blob that holds other bytes (the same model,
// stored before) takes nothing over: the upload's buffer counts until
// the upload ends. key names the model in the engine's logs.
func (x *Ctx) compileModel(key string, meta modelstore.ModelMeta, optimize bool, data []byte, buf *modelstore.ModelBuffer, held uploadRoom) (*modelstore.Model, error) {
	from := modelstore.Origin{Owner: meta.Owner, Key: key}
	opts := modelstore.SessionOptions{
		Optimize:       optimize,
		IntraOpThreads: int(x.AI.IntraOpParallelism.Load()),
		InterOpThreads: int(x.AI.InterOpParallelism.Load()),
	}
	// The sealed model file of the append-only log is in place before the
	// model is stored: written as a large upload arrived (named by an id
	// of its own), or else while the model compiles (named by its SHA-256).
	var stream *modelStream
	if buf != nil {
		data = buf.Bytes()
		stream = x.streamedModelFile(buf, meta.NoPersist)
	}
	var mf *modelFile
	var err error
	if stream == nil {
		if mf, err = x.startModelFile(data, meta.NoPersist); err != nil {
			return nil, err
		}
	}
	room := func(n int64) error { return x.Keys.CheckMemory(n - held.reserved) }
	var blob *modelstore.Blob
	switch {
	case buf != nil:
		blob, err = x.Models.AcquireBuffer(buf, from, opts, room)
	default:
		blob, err = x.Models.AcquireIfRoom(data, from, opts, room)
	}
	if err == nil && held.handOver != nil && blob.Holds(data) {
		held.handOver()
	}
	if err != nil {
		mf.abort()
		if stream != nil {
			stream.abort()
		}
		return nil, err
	}
	if stream != nil {
		meta.LogFile, err = stream.finish()
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
		// Under the transaction lock, as every keyspace change: an EXEC
		// running (its WATCH checked) sees no eviction in its middle.
		var evicted bool
		if x.Update(func() error {
			evicted = x.Keys.DeleteIf(oldest.Key, oldest.Value)
			return nil
		}) != nil {
			return // the slot is fenced (a migration closing): not now
		}
		if evicted {
			x.stats.EvictedKeys.Add(1)
			x.Log.Info("max-models reached: evicted the oldest model", "key", oldest.Key)
			x.Release([]modelstore.Value{oldest.Value})
		}
	}
}

// LoadStartupModels stores the models the loadmodel directives name
// (loadmodel key ONNX CPU /path/model.onnx [TAG t] [BATCHSIZE n ...]), one
// at a time as AI.MODELSTORE, from an internal client; the first that
// fails stops it, and its error says which. The path is the operator's, so
// it is not confined to model-dir.
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
		r, err := parseModelStore(false)(NewArgs(argv, allOwned{}))
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
