package persistence

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// goldenLogs are log directories written with testKey, one per format
// version: a base with a tensor (with a TTL) and a model, an incr file
// with every record type, and the model's sealed file; version 2's incr
// file ends with an atomic unit of three frames (goldenLogUnit). Each
// must load forever; write the newest again (go test -run GoldenLog
// -update) only if its content changes, never to paper over a format
// change. This build cannot write log-v1.
var goldenLogs = map[uint16]string{
	1: filepath.Join("testdata", "log-v1"),
	2: filepath.Join("testdata", "log-v2"),
}

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

// goldenLogUnit is the atomic unit that ends version 2's incr file, a
// frame to each record (the first two flagged frameUnitMore).
func goldenLogUnit() []Op {
	return []Op{
		{Tensor: &TensorRecord{Key: "u1", DType: 3, Shape: []int64{1}, Data: []byte{1}}},
		{Del: "after-flush"},
		{Tensor: &TensorRecord{Key: "u2", DType: 3, Shape: []int64{2}, Data: []byte{2, 3}}},
	}
}

// goldenLogContent is what the golden log of version v replays.
func goldenLogContent(v uint16) []Op {
	ops := append(goldenLogBase(), goldenLogOps()...)
	if v >= 2 {
		ops = append(ops, goldenLogUnit()...)
	}
	return ops
}

// writeGoldenLog writes the golden log of this build's version into dir.
func writeGoldenLog(t *testing.T, dir string) {
	os.RemoveAll(dir)
	l := openTestLog(t, dir, nil)
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
	defer func(v int) { frameTarget = v }(frameTarget)
	frameTarget = 1 // a frame to each record
	l.BeginUnit()
	for _, op := range goldenLogUnit() {
		l.Append(op)
	}
	l.EndUnit()
	if err := l.Commit(l.Seq()); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
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

// TestGoldenLog replays every version's golden log. A log of an older
// version takes no appends: they go to a new incr file of this build's
// version, and the old file is left as it was.
func TestGoldenLog(t *testing.T) {
	if *update {
		writeGoldenLog(t, goldenLogs[logVersion])
	}
	for v := uint16(1); v <= logVersion; v++ {
		t.Run(fmt.Sprint("v", v), func(t *testing.T) { testGoldenLog(t, v) })
	}
}

func testGoldenLog(t *testing.T, v uint16) {
	golden := goldenLogs[v]
	// Replay a copy: a replay opens the last incr file for appending.
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(golden)); err != nil {
		t.Fatal(err)
	}
	incr := mustRead(t, filepath.Join(golden, "incr.1.log"))
	if got := binary.BigEndian.Uint16(incr[8:]); got != v {
		t.Fatalf("%s is of version %d", golden, got)
	}
	if v >= 2 {
		var flags []byte
		for _, f := range logFrames(t, filepath.Join(golden, "incr.1.log")) {
			flags = append(flags, f.flags)
		}
		if !bytes.HasSuffix(flags, []byte{0, frameUnitMore, frameUnitMore, 0}) {
			t.Fatalf("frame flags %v, want a unit of three frames at the end", flags)
		}
	}
	l := openTestLog(t, dir, nil)
	rec := &recorder{}
	info, err := l.Replay(rec, false)
	if err != nil {
		t.Fatal(err)
	}
	// A nil map and an empty one are the same record.
	for i, g := range rec.got {
		if tr, ok := g.(TensorRecord); ok && tr.Shape == nil {
			tr.Shape = []int64{}
			rec.got[i] = tr
		}
	}
	want := expected(goldenLogContent(v))
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
	commitAll(t, l, tensorOp("appended", "1"))
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	last := mustRead(t, lastIncr(t, dir))
	if got := binary.BigEndian.Uint16(last[8:]); got != logVersion {
		t.Errorf("appends went to a file of version %d", got)
	}
	if now := mustRead(t, filepath.Join(dir, "incr.1.log")); (v < logVersion) != (len(now) == len(incr)) {
		t.Errorf("incr.1.log of version %d: %d bytes after an append, %d before", v, len(now), len(incr))
	}
	rec = &recorder{}
	l = openTestLog(t, dir, nil)
	if _, err := l.Replay(rec, false); err != nil || len(rec.got) != len(want)+1 {
		t.Fatalf("replayed %d records after the append, want %d: %v", len(rec.got), len(want)+1, err)
	}
	l.Close()
}

// A frame's flags are authenticated, but only those its file's version
// defines are taken: frameUnitMore in an incr file of version 1, which
// that version's readers ignored, and an undefined flag in version 2
// make the start refuse, as damage does.
func TestLogFrameFlagsOfItsVersionOnly(t *testing.T) {
	for _, c := range []struct {
		v     uint16
		flags byte
	}{{1, frameUnitMore}, {2, 0x04}, {2, lastFrame}} {
		dir := t.TempDir()
		if err := os.CopyFS(dir, os.DirFS(goldenLogs[c.v])); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, "incr.1.log")
		b := mustRead(t, path)
		h, err := parseLogHeader(b, testKey, KindIncr)
		if err != nil {
			t.Fatal(err)
		}
		// Frame 0 sealed again, with the flags: authentic, whole.
		f := logFrames(t, path)[0]
		pt, _, _, st := h.openFrame(bytes.Clone(b[f.off:]), 0)
		if st != frameOK {
			t.Fatal("frame 0 does not open")
		}
		sealed := h.sealFrame(nil, 0, c.flags, pt)
		b = append(append(b[:f.off:f.off], sealed...), b[f.off+logFrameHdr+f.length:]...)
		os.WriteFile(path, b, 0o600)
		if _, _, err := replayed(t, dir, true); !errors.Is(err, ErrLogCorrupt) || !strings.Contains(err.Error(), "flags") {
			t.Errorf("version %d, frame flags %#x: %v, want ErrLogCorrupt", c.v, c.flags, err)
		}
	}
}
