package commands

import (
	"bytes"
	"strconv"

	"github.com/enclaveai/enclaveai/modelstore"
	"github.com/enclaveai/enclaveai/persistence"
)

// AI.TENSORSET <key> <type> [<dim> ...] [BLOB <data> | VALUES <v> [<v> ...]]
// AI.TENSORGET <key> [META] [BLOB | VALUES]
func init() {
	register(
		&Spec{Name: "ai.tensorset", Arity: -4, Flags: Write | DenyOOM, FirstKey: 1, LastKey: 1, Step: 1, Group: "tensors",
			Summary: "Stores a tensor from a blob, a list of values, or zeros.",
			Syntax:  "key type [dim ...] [BLOB data | VALUES value [value ...]]", Parse: parseTensorSet},
		&Spec{Name: "ai.tensorget", Arity: -2, Flags: Readonly | Fast, FirstKey: 1, LastKey: 1, Step: 1, Group: "tensors",
			Summary: "Returns a tensor's metadata, blob or values.",
			Syntax:  "key [META] [BLOB | VALUES]", Parse: parseTensorGet},
	)
}

var (
	errInvalidDType = Reply("ERR invalid data type")
	errBadShape     = Reply("ERR invalid or negative value found in tensor shape")
	errBlobArgs     = Reply("ERR a single binary string should come after the BLOB argument in 'AI.TENSORSET' command")
	errValuesCount  = Reply("ERR wrong number of values was given in 'AI.TENSORSET' command")
	errTensorTooBig = Reply("ERR tensor size exceeds proto-max-bulk-len")
	errDAGTooBig    = Reply("ERR the DAG's tensors exceed client-query-buffer-limit")
	// Snapshots hold at most persistence.MaxRank dimensions; a bigger rank
	// would make every SAVE fail.
	errRank = errorf("ERR tensor rank exceeds %d", persistence.MaxRank)
)

// tensorSpec is a parsed TENSORSET body (type, shape, data), shared with
// the DAG's inline AI.TENSORSET.
type tensorSpec struct {
	dtype modelstore.DType
	// shape is in dims up to modelstore.InlineRank dimensions; the tensor
	// built copies it.
	shape  []int64
	dims   [modelstore.InlineRank]int64
	blob   []byte   // BLOB, retained (Keep)
	blobAt int      // argument index of the blob
	pooled bool     // blob is a buffer the tensor may recycle (Args.KeepBuffer)
	values [][]byte // VALUES, aliasing the arguments
	hasVal bool
}

// parseTensorBody parses `type [dim...] [BLOB b | VALUES v...]` at the
// cursor into t (the caller's: AI.TENSORSET's parsed command holds it, one
// allocation rather than two).
func parseTensorBody(a *Args, t *tensorSpec) error {
	dt, ok := modelstore.ParseDType(a.Next())
	if !ok {
		return errInvalidDType
	}
	*t = tensorSpec{dtype: dt}
	t.shape = t.dims[:0]
	for a.More() {
		if a.Match("BLOB") {
			if a.Remaining() != 1 {
				return errBlobArgs
			}
			t.blobAt = a.Pos()
			t.blob = a.Next()
			return nil
		}
		if a.Match("VALUES") {
			t.values, t.hasVal = a.Rest(), true
			n := modelstore.ShapeLen(t.shape)
			if n < 0 || int64(len(t.values)) != n {
				return errValuesCount
			}
			return nil
		}
		// A dimension of 0 (an empty tensor) is accepted: RedisAI refusing
		// it is one of the defects REDISAI.md §10 lists.
		d, ok := parseInt(a.Next())
		if !ok || d < 0 {
			return errBadShape
		}
		if len(t.shape) == persistence.MaxRank {
			return errRank
		}
		t.shape = append(t.shape, d)
	}
	return nil
}

// zero reports whether the tensor is made of zeros: neither BLOB nor VALUES.
func (t *tensorSpec) zero() bool { return t.blob == nil && !t.hasVal }

// build makes the tensor. A zero tensor is made from nothing, so it is
// bounded before its allocation: by maxBytes (tooBig past it), and by fits
// (maxmemory's headroom): a 60-byte AI.TENSORSET of 520 MB was allocated,
// then refused with -OOM.
func (t *tensorSpec) build(maxBytes int64, tooBig Reply, fits func(int64) error) (*modelstore.Tensor, error) {
	shape := t.shape
	switch {
	case t.blob != nil && t.pooled:
		return modelstore.NewTensorFromBuffer(t.dtype, shape, t.blob)
	case t.blob != nil:
		return modelstore.NewTensorFromBlob(t.dtype, shape, t.blob)
	case t.hasVal:
		return modelstore.NewTensorFromValues(t.dtype, shape, t.values)
	}
	size := modelstore.ByteSize(t.dtype, shape)
	if t.dtype == modelstore.String {
		size = modelstore.ShapeLen(shape)
	}
	if size < 0 || size > maxBytes {
		return nil, tooBig
	}
	if err := fits(size); err != nil {
		return nil, err
	}
	return modelstore.NewZeroTensor(t.dtype, shape), nil
}

type tensorSetCmd struct {
	key string
	t   tensorSpec
	err error // a parse error, reported after the key's type check
}

func parseTensorSet(a Args) (Runner, error) {
	var c *tensorSetCmd
	if a.scratch != nil {
		c = &a.scratch.tensorSet
	} else {
		c = new(tensorSetCmd)
	}
	*c = tensorSetCmd{key: a.NextString()}
	if c.err = parseTensorBody(&a, &c.t); c.err != nil {
		return c, nil
	}
	if c.t.blob != nil {
		// Only AI.TENSORSET's tensor recycles its buffer: a DAG's may be
		// stored at more than one key.
		c.t.blob, c.t.pooled = a.KeepBuffer(c.t.blobAt)
	}
	return c, nil
}

// Run implements Runner. RedisAI checks the key's type before anything
// else, so WRONGTYPE wins over a bad argument: the key is looked at for it
// when an argument is bad (Apply checks it for a good command).
func (c *tensorSetCmd) Run(x *Ctx) error {
	err := c.err
	var t *modelstore.Tensor
	if err == nil {
		t, err = c.t.build(x.Opts.ProtoMaxBulkLen.Load(), errTensorTooBig, x.fits)
	}
	if err != nil {
		if _, terr := x.Keys.GetTensor(c.key); terr == modelstore.ErrWrongType {
			return terr
		}
		return err
	}
	t.Owner = x.stamp()
	if err := x.Keys.Apply([]modelstore.Write{{Key: c.key, Value: t, SameType: true, Allow: x.allow()}}); err != nil {
		return err
	}
	x.W.OK()
	return nil
}

// tensorGetFormat is what AI.TENSORGET returns.
type tensorGetFormat struct{ meta, blob, values bool }

var (
	errDataFormat = Reply("ERR unsupported data format")
	errBlobValues = Reply("ERR both BLOB and VALUES specified")
)

func parseTensorFormat(opts [][]byte) (tensorGetFormat, error) {
	var f tensorGetFormat
	for _, o := range opts {
		switch {
		case isWord(o, "META"):
			f.meta = true
		case isWord(o, "BLOB"):
			f.blob = true
		case isWord(o, "VALUES"):
			f.values = true
		default:
			return f, errDataFormat
		}
	}
	if f.blob && f.values {
		return f, errBlobValues
	}
	if !f.meta && !f.blob && !f.values {
		f.meta, f.blob = true, true
	}
	return f, nil
}

type tensorGetCmd struct {
	key    string
	f      tensorGetFormat
	fmtErr error // reported after the key checks, as RedisAI orders them
}

func parseTensorGet(a Args) (Runner, error) {
	if a.Len() > 3 {
		return nil, errorf("ERR wrong number of arguments for 'ai.tensorget' command")
	}
	var c *tensorGetCmd
	if a.scratch != nil {
		c = &a.scratch.tensorGet
	} else {
		c = new(tensorGetCmd)
	}
	key := a.NextString()
	f, err := parseTensorFormat(a.Rest())
	*c = tensorGetCmd{key, f, err}
	return c, nil
}

// Run implements Runner. A BLOB or META reply is a copy of at most the
// tensor's bytes, written while the keyspace lets the tensor be read
// (Keyspace.ReadTensor), so that its buffer may be recycled once replaced;
// a large BLOB (heldReply), whose buffer is never recycled, is written
// from where it lies when the connection sends the replies (Writer.Later).
// VALUES formats every element, too long for that: the tensor is kept
// (getTensor, which pins its buffer), and its buffer goes to the collector.
// The text of a large one is formatted only when the connection sends the
// replies, a megabyte at a time (Writer.Later): built here, it would take
// the reply buffer 2 to 5 times the tensor's bytes (an 80 MB FLOAT tensor
// grew the server's peak RSS by 328 MiB).
func (c *tensorGetCmd) Run(x *Ctx) error {
	if c.f.values && c.fmtErr == nil {
		t, err := x.getTensor(c.key)
		if err != nil {
			return err
		}
		writeTensorReply(x.W, t, c.f)
		return nil
	}
	allow := x.allow() // before the keyspace's lock: it reads the client's user
	return x.Keys.ReadTensor(c.key, func(t *modelstore.Tensor) error {
		if allow != nil {
			if err := allow(t); err != nil {
				return err
			}
		}
		if c.fmtErr != nil {
			return c.fmtErr
		}
		writeTensorReply(x.W, t, c.f)
		return nil
	})
}

// heldReply reports whether t's reply in format f is large enough to be
// written only when the connection sends the replies (Writer.Later), from
// where t's bytes lie: VALUES of laterValues elements or of streamMin
// bytes (STRING elements may be long), and a BLOB of streamMin bytes
// whose buffer is never recycled (not modelstore.PooledSize: such a
// buffer may be read after the keyspace's lock).
func heldReply(t *modelstore.Tensor, f tensorGetFormat) bool {
	switch {
	case f.values:
		return t.Len() >= laterValues || len(t.Data) >= streamMin
	case f.blob:
		return len(t.Data) >= streamMin && !modelstore.PooledSize(len(t.Data))
	}
	return false
}

// writeTensorReply writes t's reply, a large one (heldReply) when the
// connection sends the replies, and so is VALUES once the replies before
// it hold streamMin bytes: one command's replies together are bounded, not
// only each (a DAG of 600 TENSORGET VALUES of 65,535 INT64s, 27 KB sent,
// built 890 MB of text before a byte left; review). t must stay as it is
// until then: a tensor pinned (getTensor, as every VALUES reply's is) or
// of Go's memory alone (modelstore/tensorbuf.go), or one whose buffer
// heldReply's rule keeps from the pool.
func writeTensorReply(w *Writer, t *modelstore.Tensor, f tensorGetFormat) {
	if heldReply(t, f) || (f.values && w.Len() >= streamMin) {
		w.Later(func(w *Writer) { writeTensor(w, t, f, true) }, nil)
		return
	}
	writeTensor(w, t, f, false)
}

// writeTensor writes a tensor in RedisAI's reply shapes. With stream, a
// large BLOB goes to the connection from where it lies (BulkStream) and
// the text of VALUES is sent on as it is made (writeValues); a command may
// ask for that only when it holds no lock.
func writeTensor(w *Writer, t *modelstore.Tensor, f tensorGetFormat, stream bool) {
	if f.meta {
		n := 4
		if f.blob || f.values {
			n = 6
		}
		w.Array(n)
		w.BulkString("dtype")
		w.BulkString(t.DType.String())
		w.BulkString("shape")
		w.Array(len(t.Shape))
		for _, d := range t.Shape {
			w.Int(d)
		}
	}
	switch {
	case f.blob:
		if f.meta {
			w.BulkString("blob")
		}
		if stream {
			w.BulkStream(t.Data)
		} else {
			w.Bulk(t.Data)
		}
	case f.values:
		if f.meta {
			w.BulkString("values")
		}
		writeValues(w, t, stream)
	}
}

// laterValues: AI.TENSORGET VALUES of a tensor of this many elements or
// more (about a megabyte of text) is formatted as its reply leaves
// (Writer.Later). With stream, writeValues sends the text on once it holds
// a megabyte (Writer.Spill, looked at every 1024 elements).
const laterValues = 1 << 16

func writeValues(w *Writer, t *modelstore.Tensor, stream bool) {
	if t.DType == modelstore.String {
		writeStrings(w, t, stream)
		return
	}
	n := int(t.Len())
	w.Array(n)
	for i := 0; i < n; i++ {
		if stream && i%1024 == 1023 {
			if w.Spill(); w.StreamErr() != nil {
				return
			}
		}
		switch {
		case t.DType.IsFloat():
			w.Double(t.Float(i))
		case t.DType == modelstore.Uint64 && t.Int(i) < 0:
			// Beyond int64: RESP integers are signed, so send the exact text.
			w.BulkString(uintText(t, i))
		default:
			w.Int(t.Int(i))
		}
	}
}

// writeStrings writes a STRING tensor's elements, each ended by a NUL in
// its data, as bulk strings read from where they lie. With stream, a long
// element goes straight to the connection (BulkStream) and the text is
// sent on once it holds a megabyte (Spill).
func writeStrings(w *Writer, t *modelstore.Tensor, stream bool) {
	rest := t.Data
	w.Array(bytes.Count(rest, []byte{0}))
	for {
		i := bytes.IndexByte(rest, 0)
		if i < 0 {
			return
		}
		if stream {
			if w.BulkStream(rest[:i]); w.StreamErr() == nil {
				w.Spill()
			}
			if w.StreamErr() != nil {
				return
			}
		} else {
			w.Bulk(rest[:i])
		}
		rest = rest[i+1:]
	}
}

func uintText(t *modelstore.Tensor, i int) string {
	return strconv.FormatUint(uint64(t.Int(i)), 10)
}
