package persistence

import (
	"bytes"
	"crypto/sha256"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// goldenLog is a log directory of format version 1 written with testKey:
// a base with a tensor (with a TTL) and a model, an incr file with every
// record type, and the model's sealed file. It must load forever; write it
// again (go test -run GoldenLog -update) only if goldenLogOps changes,
// never to paper over a format change.
var goldenLog = filepath.Join("testdata", "log-v1")

var goldenModel = bytes.Repeat([]byte("golden model bytes "), 400)

func goldenLogModel(key string) *LogModel {
	return &LogModel{ModelRecord: ModelRecord{Key: key, Backend: "ONNX", Device: "CPU", Tag: "golden",
		BatchSize: 4, MinBatchSize: 2, MinBatchTimeoutMs: 50, Optimize: true, ID: "id-1",
		CreatedUnixMs: 1767225600000, Owner: "alice", Extra: map[string]string{"note": "v1"}},
		File: sha256.Sum256(goldenModel), Digest: true, Size: int64(len(goldenModel))}
}

// goldenLogBase and goldenLogOps are the golden log's content.
func goldenLogBase() []Op {
	return []Op{
		{Tensor: &TensorRecord{Key: "base:t", Owner: "bob", DType: 1, Shape: []int64{2}, Data: []byte{0, 0, 0x80, 0x3f, 0, 0, 0, 0x40},
			ExpireAtUnixMs: 1893456000000}},
		{Model: goldenLogModel("base:m")},
	}
}

func goldenLogOps() []Op {
	return []Op{
		{Tensor: &TensorRecord{Key: "t1", DType: 6, Shape: []int64{1}, Data: []byte{42, 0, 0, 0, 0, 0, 0, 0}}},
		{Tensor: &TensorRecord{Key: "t2", DType: 10, Shape: []int64{2}, Data: []byte("a\x00b\x00")}},
		{Tensor: &TensorRecord{Key: "t3", DType: 9, Shape: []int64{}, Data: []byte{1}}},
		{Model: goldenLogModel("m2")},
		{Del: "t3"},
		{Expire: &ExpireOp{Key: "t1", AtUnixMs: 1893456000001}},
		{Expire: &ExpireOp{Key: "base:t", AtUnixMs: 0}},
		{Rename: &[2]string{"t2", "t2-renamed"}},
		{Flush: true},
		{Tensor: &TensorRecord{Key: "after-flush", DType: 3, Shape: []int64{1}, Data: []byte{7}}},
		{Model: goldenLogModel("m3")},
	}
}

// recorder is a LogSink that keeps every record, in order.
type recorder struct{ got []any }

func (r *recorder) Tensor(t TensorRecord) error { r.got = append(r.got, t); return nil }
func (r *recorder) Model(m LogModel) error      { r.got = append(r.got, m); return nil }
func (r *recorder) Delete(k string) error       { r.got = append(r.got, "DEL "+k); return nil }
func (r *recorder) Expire(k string, at int64) error {
	r.got = append(r.got, ExpireOp{k, at})
	return nil
}
func (r *recorder) Rename(s, d string) error { r.got = append(r.got, [2]string{s, d}); return nil }
func (r *recorder) Flush() error             { r.got = append(r.got, "FLUSH"); return nil }

func expected(ops []Op) []any {
	var out []any
	for _, op := range ops {
		switch {
		case op.Tensor != nil:
			out = append(out, *op.Tensor)
		case op.Model != nil:
			out = append(out, *op.Model)
		case op.Expire != nil:
			out = append(out, *op.Expire)
		case op.Rename != nil:
			out = append(out, *op.Rename)
		case op.Flush:
			out = append(out, "FLUSH")
		default:
			out = append(out, "DEL "+op.Del)
		}
	}
	return out
}

func TestGoldenLog(t *testing.T) {
	if *update {
		os.RemoveAll(goldenLog)
		l := openTestLog(t, goldenLog, nil)
		base := goldenLogBase()
		if err := l.Create(func(yield func(Op) error) error {
			for _, op := range base {
				if err := yield(op); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		w, err := l.NewModelWriter()
		if err != nil {
			t.Fatal(err)
		}
		w.Write(goldenModel)
		if err := w.Finish(sha256.Sum256(goldenModel)); err != nil {
			t.Fatal(err)
		}
		ops := goldenLogOps()
		commitAll(t, l, ops[:4]...)
		commitAll(t, l, ops[4:]...)
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
	// Replay a copy: a replay opens the last incr file for appending.
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(goldenLog)); err != nil {
		t.Fatal(err)
	}
	l := openTestLog(t, dir, nil)
	rec := &recorder{}
	info, err := l.Replay(rec, false)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	// A nil map and an empty one are the same record.
	for i, g := range rec.got {
		if tr, ok := g.(TensorRecord); ok && tr.Shape == nil {
			tr.Shape = []int64{}
			rec.got[i] = tr
		}
	}
	want := expected(append(goldenLogBase(), goldenLogOps()...))
	for i, w := range want {
		if tr, ok := w.(TensorRecord); ok && tr.Shape == nil {
			tr.Shape = []int64{}
			want[i] = tr
		}
	}
	if !reflect.DeepEqual(rec.got, want) {
		t.Fatalf("replayed\n %#v\nwant\n %#v", rec.got, want)
	}
	if info.Files != 2 || info.CutBytes != 0 {
		t.Errorf("info %+v", info)
	}
	data, err := l.ReadModel(sha256.Sum256(goldenModel), int64(len(goldenModel)))
	if err != nil || !bytes.Equal(data, goldenModel) {
		t.Fatalf("model file: %v", err)
	}
}
