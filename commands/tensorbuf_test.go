package commands

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/enclaveai/enclaveai/modelstore"
	"github.com/enclaveai/enclaveai/persistence"
)

// pooledFrom reports the arguments from index from on as the front end's
// reader does a blob it read into modelstore.BlobBuffer.
type pooledFrom int

func (p pooledFrom) Owned(i int) bool  { return i >= int(p) }
func (p pooledFrom) Pooled(i int) bool { return i >= int(p) }

// checkedBlob returns n bytes (n >= 8) in a pooled buffer that say whether
// they are whole: a seed, then a stream made from it.
func checkedBlob(seed uint64, n int) []byte {
	b := modelstore.BlobBuffer(n)
	fillChecked(b, seed)
	return b
}

func fillChecked(b []byte, seed uint64) {
	binary.LittleEndian.PutUint64(b, seed)
	x := seed
	for i := 8; i < len(b); i++ {
		x = x*6364136223846793005 + 1442695040888963407
		b[i] = byte(x >> 56)
	}
}

func blobWhole(b []byte) bool {
	if len(b) < 8 {
		return false
	}
	want := make([]byte, len(b))
	fillChecked(want, binary.LittleEndian.Uint64(b))
	return bytes.Equal(b, want)
}

// bulkOf returns the payload of a RESP bulk reply.
func bulkOf(r []byte) ([]byte, error) {
	i := bytes.Index(r, []byte("\r\n"))
	if len(r) == 0 || r[0] != '$' || i < 0 {
		return nil, fmt.Errorf("not a bulk: %.40q", r)
	}
	n, err := strconv.Atoi(string(r[1:i]))
	if err != nil || len(r) != i+2+n+2 {
		return nil, fmt.Errorf("bad bulk: %.40q", r)
	}
	return r[i+2 : i+2+n], nil
}

// A tensor removed by anything but AI.TENSORSET's replacement (DEL,
// FLUSHALL, RENAME over it, expiry) keeps its buffer: the server's release
// of removed values (App.Release) must not recycle it while a reader still
// has it. (A model's outputs naming one key twice released it twice when
// it did: TestTensorBufferRecycling checks that a tensor has no Release.)
func TestRemovedTensorsKeepTheirBuffers(t *testing.T) {
	h := newHarness(t)
	for _, remove := range []string{"DEL y", "FLUSHALL", "RENAME x y", "PEXPIRE y 1"} {
		h.do("AI.TENSORSET x UINT8 1 VALUES 1")
		argv := [][]byte{[]byte("AI.TENSORSET"), []byte("y"), []byte("UINT8"), []byte("600"), []byte("BLOB"), checkedBlob(7, 600)}
		h.s.Dispatch(h.c, argv, pooledFrom(5))
		h.c.W.Reset()
		// A hold counted as the log's journal counts one, under the
		// keyspace's lock, until its record is encoded.
		var y *modelstore.Tensor
		if err := h.s.Keys.ReadTensor("y", func(t *modelstore.Tensor) error {
			t.Hold()
			y = t
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		h.do(remove)
		time.Sleep(5 * time.Millisecond)
		h.s.Tick() // active expiry
		h.do("AI.TENSORSET y UINT8 1 VALUES 1")
		y.Done()
		if !blobWhole(y.Data) {
			t.Errorf("%s: the removed tensor's buffer was recycled", remove)
		}
		h.do("FLUSHALL")
	}
}

// Recycled tensor buffers under load, with the append-only log on: every
// AI.TENSORGET reads a whole blob, and so does every key of the log
// replayed after, while writers replace the same keys, rewrite the log and
// move keys about; and buffers did come back to be reused. Under the race
// detector (make race), a reader that kept a recycled buffer is a race.
func TestRecycledTensorsUnderLoad(t *testing.T) {
	runFor := 2 * time.Second
	if testing.Short() {
		runFor = 500 * time.Millisecond
	}
	dir := t.TempDir()
	h := newLogHarness(t, dir, nil, "everysec")
	s := h.s
	sizes := []int{600, 3136, 3200, 9000}
	var (
		stop            = make(chan struct{})
		wg              sync.WaitGroup
		seeds           atomic.Uint64
		reads, recycled atomic.Int64
		mu              sync.Mutex
		given           = map[*byte]bool{} // the buffers blobs were read into
	)
	key := func(i int) string { return fmt.Sprintf("t%d", i%6) }
	// client runs body in a loop, committing the log every pipeline
	// commands, as the front end does for a pipeline: the log's records
	// then wait for their write while other clients replace their keys.
	client := func(name string, pipeline int, body func(c *Client, i int)) {
		loopClient(s, name, stop, &wg, func(c *Client, i int) {
			body(c, i)
			if i%pipeline == pipeline-1 {
				s.CommitClient(c)
			}
			c.W.Reset()
		})
	}
	for w := range 3 {
		client(fmt.Sprint("writer", w), 8, func(c *Client, i int) {
			n := sizes[(i+w)%len(sizes)]
			blob := checkedBlob(seeds.Add(1), n)
			mu.Lock()
			if given[&blob[0]] {
				recycled.Add(1)
			}
			given[&blob[0]] = true
			mu.Unlock()
			argv := [][]byte{[]byte("AI.TENSORSET"), []byte(key(i + w)), []byte("UINT8"), []byte(strconv.Itoa(n)), []byte("BLOB"), blob}
			s.Dispatch(c, argv, pooledFrom(5))
			if r := c.W.Bytes(); !bytes.Equal(r, []byte("+OK\r\n")) {
				t.Errorf("TENSORSET: %.80q", r)
			}
		})
	}
	// Readers: AI.TENSORGET borrows the tensor; a DAG's LOAD keeps it
	// (Get), for as long as the DAG runs.
	readers := []func(k string) [][]byte{
		func(k string) [][]byte { return [][]byte{[]byte("AI.TENSORGET"), []byte(k), []byte("BLOB")} },
		func(k string) [][]byte {
			return bytes.Fields([]byte("AI.DAGEXECUTE LOAD 1 " + k + " |> AI.TENSORGET " + k + " META |> AI.TENSORGET " + k + " BLOB"))
		},
	}
	for r, read := range readers {
		client(fmt.Sprint("reader", r), 1, func(c *Client, i int) {
			s.Dispatch(c, read(key(i+r)), nil)
			reply := c.W.Bytes()
			if bytes.Contains(reply, []byte("tensor key is empty")) || bytes.HasPrefix(reply, []byte("-ERR")) {
				return
			}
			if r == 1 { // the DAG's last reply, a blob of one of sizes
				for _, n := range sizes {
					hdr := fmt.Sprintf("$%d\r\n", n)
					if at := len(reply) - n - 2 - len(hdr); at > 0 && string(reply[at:at+len(hdr)]) == hdr {
						reply = reply[at:]
						break
					}
				}
			}
			b, err := bulkOf(reply)
			if err != nil || !blobWhole(b) {
				t.Errorf("%s %s: not a whole blob (%v)", read("")[0], key(i+r), err)
			}
			reads.Add(1)
		})
	}
	client("mover", 1, func(c *Client, i int) {
		lines := []string{"RENAME " + key(i) + " " + key(i+1), "DEL " + key(i+2), "TYPE " + key(i+3),
			"SCAN 0 COUNT 3", "MULTI", "AI.TENSORGET " + key(i+4) + " META", "EXEC"}
		if i == 20 { // once: a rewrite leaves only the keys' last records
			lines = append(lines, "BGREWRITEAOF")
		}
		for _, line := range lines {
			s.Dispatch(c, bytes.Fields([]byte(line)), nil)
			s.CommitClient(c)
			c.W.Reset()
		}
		s.Tick()
	})
	time.Sleep(runFor)
	close(stop)
	wg.Wait()
	t.Logf("%d whole reads, %d of %d blobs in a recycled buffer", reads.Load(), recycled.Load(), len(given)+int(recycled.Load()))
	if reads.Load() == 0 || recycled.Load() == 0 {
		t.Fatalf("%d reads, %d recycled buffers: the test tested nothing", reads.Load(), recycled.Load())
	}
	waitFor(t, h, "background rewrite", func() bool { return !s.aofState.rewriting.Load() })

	// Every record of the log holds a whole blob (a record encoded after
	// its buffer was recycled would hold another's), and the log replayed
	// leaves whole blobs at the keys.
	s.CloseLog()
	l, err := persistence.OpenLog(persistence.LogOptions{Dir: filepath.Join(dir, "appendonlydir"), SealKey: aofTestKey})
	if err != nil {
		t.Fatal(err)
	}
	sink := &wholeSink{}
	if _, err := l.Replay(sink, false); err != nil {
		t.Fatal(err)
	}
	l.Close()
	t.Logf("log: %d tensor records", sink.records)
	if sink.records == 0 || sink.broken > 0 {
		t.Errorf("log: %d tensor records, %d of them not whole blobs", sink.records, sink.broken)
	}
	h2 := newLogHarness(t, dir, nil, "everysec")
	for i := range 6 {
		r := h2.do("AI.TENSORGET " + key(i) + " BLOB")
		if bytes.HasPrefix(r, []byte("-ERR tensor key is empty")) {
			continue
		}
		if b, err := bulkOf(r); err != nil || !blobWhole(b) {
			t.Errorf("replayed %s: not a whole blob (%v)", key(i), err)
		}
	}
}

// wholeSink counts the log's tensor records and those not whole blobs.
type wholeSink struct{ records, broken int }

func (w *wholeSink) Tensor(r persistence.TensorRecord) error {
	w.records++
	if !blobWhole(r.Data) {
		w.broken++
	}
	return nil
}
func (*wholeSink) Model(persistence.LogModel) error { return nil }
func (*wholeSink) Delete(string) error              { return nil }
func (*wholeSink) Expire(string, int64) error       { return nil }
func (*wholeSink) Rename(string, string) error      { return nil }
func (*wholeSink) Flush() error                     { return nil }

// Commands that only look at a key (EXISTS, TOUCH, TYPE) do not pin its
// tensor: its buffer is still recycled when AI.TENSORSET replaces it.
// They read it through Get, which pins it for good, so a client that
// sent EXISTS k before each AI.TENSORSET k recycled nothing (as EXPIRE
// did before the diff review).
func TestLookingAtAKeyKeepsItsBufferRecyclable(t *testing.T) {
	h := newHarness(t)
	for _, look := range []string{"EXISTS y", "TOUCH y", "TYPE y", ""} {
		argv := [][]byte{[]byte("AI.TENSORSET"), []byte("y"), []byte("UINT8"), []byte("600"), []byte("BLOB"), checkedBlob(7, 600)}
		h.s.Dispatch(h.c, argv, pooledFrom(5))
		h.c.W.Reset()
		var y *modelstore.Tensor
		if err := h.s.Keys.ReadTensor("y", func(t *modelstore.Tensor) error {
			y = t
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if look != "" {
			h.do(look)
		}
		h.do("AI.TENSORSET y UINT8 1 VALUES 1")
		if y.Data != nil {
			t.Errorf("%q: the replaced tensor's buffer was not recycled", look)
		}
	}
}
