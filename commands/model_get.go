package commands

import (
	"github.com/enclaveai/enclaveai/modelstore"
)

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

// modelGetCmd is AI.MODELGET key [META] [BLOB]: neither means both.
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
		// Outside a transaction, large chunks go straight to the
		// connection, never into the reply buffer. A transaction holds its
		// lock while it builds its replies: the model's bytes go out once
		// it has released it, from where they lie (Later), the model kept
		// until then (a reference of its own: this one ends with Run).
		if !x.locked {
			writeChunks(w, m.Blob.Data, x.AI.ModelChunkSize.Load())
		} else {
			m.Blob.Retain()
			data, chunk := m.Blob.Data, x.AI.ModelChunkSize.Load()
			w.Later(func(w *Writer) { writeChunks(w, data, chunk) }, m.Blob.Release)
		}
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
// is an exact multiple of the chunk size gets no empty final chunk. Large
// chunks are written with BulkStream, and small ones leave the reply
// buffer as it fills (Spill): the caller holds no lock (a transaction's
// goes through Writer.Later). A writer without a stream builds it whole.
func writeChunks(w *Writer, data []byte, size int64) {
	if size <= 0 || int64(len(data)) <= size {
		w.BulkStream(data)
		return
	}
	n := (int64(len(data)) + size - 1) / size
	w.Array(int(n))
	for off := int64(0); off < int64(len(data)); off += size {
		end := min(off+size, int64(len(data)))
		w.BulkStream(data[off:end])
		if w.Spill(); w.StreamErr() != nil {
			return // the connection is gone: build no more of the reply
		}
	}
}

func parseModelDel(a Args) (Runner, error) {
	key := a.NextString()
	return modelDelCmd{key: key}, nil
}

// modelDelCmd is AI.MODELDEL key.
type modelDelCmd struct{ key string }

// Run implements Runner.
func (c modelDelCmd) Run(x *Ctx) error {
	if err := x.mayChangeModels(x.C); err != nil {
		return err
	}
	m, err := x.getModel(c.key)
	if err != nil {
		return err
	}
	if x.Keys.DeleteIf(c.key, m) {
		x.Release([]modelstore.Value{m})
	}
	x.W.OK()
	return nil
}
