package commands

import (
	"bufio"
	"bytes"
	"fmt"
	"io/fs"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/enclaveai/enclaveai/cluster"
	"github.com/enclaveai/enclaveai/config"
	"github.com/enclaveai/enclaveai/modelstore"
	"github.com/enclaveai/enclaveai/persistence"
)

func pushTopology(t *testing.T, h *harness, me string) {
	t.Helper()
	h.run(
		row("clusterx setnodeid "+me, "+OK"),
		row(`clusterx setnodes "`+strings.ReplaceAll(topology, "\n", `\n`)+`" 1`, "+OK"),
	)
}

// The source's side: while slot 3300 ({b}, node A's) moves to node B, a
// command whose keys are all still here runs here, one whose keys are all
// gone gets ASK, a write with some of each TRYAGAIN (a read ASK); once
// done, MOVED.
func TestMigratingSlotRoutes(t *testing.T) {
	h := newClusterHarness(t)
	pushTopology(t, h, nodeA)
	h.run(
		row("AI.TENSORSET {b}here FLOAT 1 VALUES 1", "+OK"),
		row("AI.TENSORSET {b}read FLOAT 1 VALUES 1", "+OK"),
		row("clusterx migrate 3300 nosuchnode"+strings.Repeat("0", 30), "-ERR Can't find the destination node id"),
		row("clusterx migrate 3300 "+nodeA, "-ERR Can't migrate slot to myself"),
		row("clusterx migrate 7365 "+nodeB, "-ERR Can't migrate slot which doesn't belong to me"),
		row("clusterx migrate 16384 "+nodeB, "-ERR Invalid slot"),
	)
	m := &migration{slot: 3300, target: h.s.Cluster.view.Load().top.Find(nodeB)}
	m.state.Store(migStart)
	h.s.Cluster.mig.Store(m)
	h.run(
		row("AI.TENSORGET {b}here VALUES", `["1"]`),
		row("AI.TENSORGET {b}gone VALUES", "-ASK 3300 127.0.0.1:7002"),
		row("AI.TENSORSET {b}here FLOAT 1 VALUES 2", "+OK"), // sent again if it was on its way
		row("AI.TENSORSET {b}new FLOAT 1 VALUES 2", "-ASK 3300 127.0.0.1:7002"),
		row("DEL {b}here {b}gone", "-TRYAGAIN Multiple keys request during rehashing of slot"),
		row("EXISTS {b}here {b}gone", "-ASK 3300 127.0.0.1:7002"),
		row("AI.TENSORSET {c}x FLOAT 1 VALUES 1", "-MOVED 7365 127.0.0.1:7002"),
		row("clusterx migrate 3300 "+nodeC, "-ERR a slot is already migrating"),
		row("CLUSTER INFO", "~migrating_slot:3300.{4}migrating_state:start.{4}destination_node:"+nodeB),
	)
	// The last pass: writes routed here are refused under the lock, reads go on.
	m.closing.Store(true)
	h.run(
		row("AI.TENSORSET {b}here FLOAT 1 VALUES 3", "-TRYAGAIN Multiple keys request during rehashing of slot"),
		row("AI.TENSORGET {b}here VALUES", `["2"]`),
		row("AI.TENSORSET {c}x FLOAT 1 VALUES 1", "-MOVED 7365 127.0.0.1:7002"),
	)
	run := [][]byte{[]byte("AI.MODELEXECUTE"), []byte("{b}m"), []byte("INPUTS"), []byte("1"), []byte("{b}here"),
		[]byte("OUTPUTS"), []byte("1"), []byte("{b}y")}
	x := &Ctx{App: h.s, C: h.c, W: h.c.W, spec: Commands().Lookup(run[0]), argv: run}
	if err := x.Update(func() error { return nil }); err != errTryAgain {
		t.Errorf("a model run's write after the migration began closing: %v, want TRYAGAIN", err)
	}
	// A read routed here while its key was here, whose key the migration
	// then deleted before the read took the lock (cluster review: answered
	// as missing, 1 in about 600,000 reads): routed again under the lock.
	argv := [][]byte{[]byte("AI.TENSORGET"), []byte("{b}read"), []byte("VALUES")}
	rx := &Ctx{App: h.s, C: h.c, W: h.c.W, spec: Commands().Lookup(argv[0]), argv: argv}
	if err := rx.fenced(); err != nil {
		t.Errorf("a read of a key still here: %v", err)
	}
	h.s.Keys.Delete(nil, "{b}read")
	if err := rx.fenced(); fmt.Sprint(err) != "ASK 3300 127.0.0.1:7002" {
		t.Errorf("a read of a key gone since it was routed: %v, want ASK", err)
	}
	// The same for a command that reads outside the lock: its missing key
	// is answered with the redirection (diff review).
	get := [][]byte{[]byte("AI.MODELGET"), []byte("{b}m"), []byte("META")}
	gx := &Ctx{App: h.s, C: h.c, W: h.c.W, spec: Commands().Lookup(get[0]), argv: get}
	if err := gx.movedOut(modelstore.ErrNoModel); fmt.Sprint(err) != "ASK 3300 127.0.0.1:7002" {
		t.Errorf("AI.MODELGET of a model gone since it was routed: %v, want ASK", err)
	}
	if err := gx.movedOut(modelstore.ErrWrongType); err != modelstore.ErrWrongType {
		t.Errorf("another error: %v", err)
	}
	// As migrate does once every key has moved: success routes MOVED at
	// once, and CLUSTER INFO says so only once the handoff is saved (a
	// controller acts on it, and a kill -9 before the save took the slot
	// as split: CI).
	m.state.Store(migSuccess)
	h.run(row("CLUSTER INFO", "~migrating_slot:3300.{4}migrating_state:start"))
	h.s.Cluster.handoff(func(handed map[int]*cluster.Node, _ map[int]string) { handed[3300] = m.target })
	m.settled.Store(true)
	h.run(row("CLUSTER INFO", "~migrating_slot:3300.{4}migrating_state:success"))
	if err := rx.fenced(); fmt.Sprint(err) != "MOVED 3300 127.0.0.1:7002" {
		t.Errorf("a read routed here before the migration ended: %v, want MOVED", err)
	}
	h.run(
		row("AI.TENSORGET {b}here VALUES", "-MOVED 3300 127.0.0.1:7002"),
		// Its keys are on B: it moves nowhere else before the topology says so.
		row("clusterx migrate 3300 "+nodeC, "-ERR slot 3300 was migrated to "+nodeB+" already: waiting for the topology that says so"),
	)
	// The topology that gives the slot to B ends the migration and drops
	// what is left of the slot here.
	moved := strings.Replace(strings.Replace(topology, "0-5460", "0-3299 3301-5460", 1), "5461-10921", "3300 5461-10921", 1)
	h.run(
		row(`clusterx setnodes "`+strings.ReplaceAll(moved, "\n", `\n`)+`" 2`, "+OK"),
		row("CLUSTER INFO", "~migrating_slot:-1.{4}migrating_state:none"),
		row("AI.TENSORGET {b}here VALUES", "-MOVED 3300 127.0.0.1:7002"),
	)
	if _, ok := h.s.Keys.Get("{b}here"); ok {
		t.Error("the migrated slot's keys stayed on the source")
	}
}

// The target's side: without ASKING, MOVED to the owner; with it, the
// command runs (TRYAGAIN for several keys not all here); after success the
// slot is served to everyone until the topology moves it.
func TestImportingSlotRoutes(t *testing.T) {
	h := newClusterHarness(t)
	pushTopology(t, h, nodeB)
	h.run(
		row("clusterx import 3300 1", "-ERR this node is not importing that slot"),
		row("clusterx import 3300 0", "+OK"),
		row("AI.TENSORSET {b}x FLOAT 1 VALUES 1", "-MOVED 3300 127.0.0.1:7001"),
		row("ASKING", "+OK"),
		row("AI.TENSORSET {b}x FLOAT 1 VALUES 1", "+OK"),
		row("AI.TENSORGET {b}x VALUES", "-MOVED 3300 127.0.0.1:7001"), // ASKING is for one command
		row("ASKING", "+OK"),
		row("DEL {b}x {b}y", "-TRYAGAIN Multiple keys request during rehashing of slot"),
		row("ASKING", "+OK"),
		row("AI.TENSORGET {b}x VALUES", `["1"]`),
		// ASKING holds for a transaction, as in Redis, and ends with it,
		// EXEC or DISCARD.
		row("ASKING", "+OK"),
		row("MULTI", "+OK"),
		row("AI.TENSORSET {b}x FLOAT 1 VALUES 2", "+QUEUED"),
		row("AI.TENSORGET {b}x VALUES", "+QUEUED"),
		row("EXEC", `[+OK ["2"]]`),
		row("AI.TENSORGET {b}x VALUES", "-MOVED 3300 127.0.0.1:7001"),
		row("ASKING", "+OK"),
		row("MULTI", "+OK"),
		row("DISCARD", "+OK"),
		row("AI.TENSORGET {b}x VALUES", "-MOVED 3300 127.0.0.1:7001"),
		row("CLUSTER INFO", "~importing_slot:3300.{4}import_state:start"),
		row("clusterx import 3300 1", "+OK"),
		row("AI.TENSORGET {b}x VALUES", `["2"]`),
		row("clusterx import 3300 7", "-ERR Invalid import state"),
	)
}

// restoreSource is a persistence.Source of one model key.
type restoreSource struct {
	key  string
	blob []byte
}

func (s restoreSource) Tensors(func(persistence.TensorRecord) error) error { return nil }

func (s restoreSource) Models(yield func(persistence.ModelRecord, []byte) error) error {
	return yield(persistence.ModelRecord{Key: s.key, Backend: "ONNX", Device: "CPU"}, s.blob)
}

// CLUSTERX RESTORE answers a payload's own faults with texts of its own,
// and a value the keyspace refuses as AI.MODELSTORE answers it: every
// fault was blamed on the seal key, with the Go error chain (a malformed
// model's byte offset included) after it (code review).
func TestRestoreErrors(t *testing.T) {
	h := newClusterHarness(t)
	h.s.Snapshot.SealKey = aofTestKey
	pushTopology(t, h, nodeB)
	h.run(row("clusterx import 3300 0", "+OK"))
	payload := func(key []byte, blob []byte) []byte {
		var b bytes.Buffer
		if err := persistence.Write(&b, key, restoreSource{"{b}m", blob}); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	restore := func(p []byte) string {
		h.s.Dispatch(h.c, [][]byte{[]byte("CLUSTERX"), []byte("RESTORE"), []byte("3300"), p}, nil)
		h.s.CommitClient(h.c)
		defer h.c.W.Reset()
		return render(h.c.W.Bytes())
	}
	malformed := []byte{0x0a, 0xff, 0xff, 0xff, 0x0f}
	other := bytes.Repeat([]byte{9}, 32)
	good := payload(aofTestKey, malformed)
	for _, c := range []struct{ name, got, want string }{
		{"another node's seal key", restore(payload(other, malformed)), "-" + string(errRestoreKey)},
		{"cut short", restore(good[:len(good)-7]), "-" + string(errRestoreBroken)},
		{"not a payload", restore([]byte("hello")), "-" + string(errRestoreBroken)},
		{"a malformed model", restore(good), "-ERR Failed to load model because protobuf parsing failed."},
	} {
		if c.got != c.want {
			t.Errorf("%s: %s, want %s", c.name, c.got, c.want)
		}
	}
}

// A migrating source authenticates to its target as a Redis replica to
// its master: masteruser and masterauth, masterauth alone as the default
// user, and else its own requirepass (the nodes of a cluster without
// users share it, as before masteruser and masterauth were there).
func TestPeerAuth(t *testing.T) {
	for _, c := range []struct {
		user, auth, requirepass string
		want                    []string
		as                      string
	}{
		{"", "", "", nil, "default"},
		{"", "", "rp", []string{"AUTH", "rp"}, "default"},
		{"", "ma", "rp", []string{"AUTH", "ma"}, "default"},
		{"node", "ma", "rp", []string{"AUTH", "node", "ma"}, "node"},
		{"node", "", "", []string{"AUTH", "node", ""}, "node"}, // a nopass user
	} {
		h := newHarness(t)
		h.s.Opts.MasterUser.Store(&c.user)
		h.s.Opts.MasterAuth.Store(&c.auth)
		h.s.Opts.Requirepass.Store(&c.requirepass)
		if got, as := h.s.peerAuth(); !slices.Equal(got, c.want) || as != c.as {
			t.Errorf("masteruser %q masterauth %q requirepass %q: %q as %s, want %q as %s",
				c.user, c.auth, c.requirepass, got, as, c.want, c.as)
		}
	}
}

// countingConn counts the bytes read through it.
type countingConn struct {
	net.Conn
	n int64
}

func (c *countingConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.n += int64(n)
	return n, err
}

// A migration's source reads its target's replies as lines of a bounded
// length, and any line that is not +OK is the target's refusal: a target
// (whatever listens at the address the topology names) that answered
// "-\n" panicked the migration's goroutine, which ended the process, and
// one that sent bytes without a line end had them all buffered until the
// deadline, 30 s at the wire's speed.
func TestPeerReplyFromAHostileTarget(t *testing.T) {
	for _, c := range []struct {
		name string
		sent []byte
		want string
	}{
		{"+OK", []byte("+OK\r\n"), ""},
		{"an error", []byte("-ERR no\r\n"), "ERR no"},
		{"an error without its CR", []byte("-ERR no\n"), "ERR no"},
		{"a lone minus", []byte("-\n"), "neither +OK nor an error"},
		{"a minus and CR", []byte("-\r\n"), "neither +OK nor an error"},
		{"another reply", []byte(":1\r\n"), "neither +OK nor an error"},
		{"no line end", bytes.Repeat([]byte("A"), 8<<20), "without a line end"},
	} {
		t.Run(c.name, func(t *testing.T) {
			src, dst := net.Pipe()
			defer src.Close()
			go func() {
				dst.Write(c.sent)
				dst.Close()
			}()
			cc := &countingConn{Conn: src}
			p := &peer{conn: cc, rd: bufio.NewReader(cc)}
			var err error
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Fatalf("reply of %q panicked: %v", c.sent[:min(len(c.sent), 16)], r)
					}
				}()
				err = p.reply()
			}()
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("reply: %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("reply: %v, want an error with %q", err, c.want)
			}
			if cc.n > 2*maxPeerLine {
				t.Errorf("read %d bytes of a reply, more than a line's bound of %d", cc.n, maxPeerLine)
			}
		})
	}
}

// While the data loads, no slot moves: CLUSTERX runs then for the
// controller's topology pushes, but a RESTORE answered OK put its keys in
// the keyspace that the loaded one then replaced, unlogged (the log was
// not open yet), and the source, told the import was done, deleted its
// copy: the slot's keys were gone from both nodes. A MIGRATE from a node
// still loading would send the slot's keys not loaded yet.
func TestNoMigrationWhileLoading(t *testing.T) {
	h := newClusterHarness(t)
	pushTopology(t, h, nodeB)
	h.run(row("clusterx import 3300 0", "+OK"))
	var p bytes.Buffer
	src := &memTensorSource{key: "{b}t"}
	if err := persistence.Write(&p, aofTestKey, src); err != nil {
		t.Fatal(err)
	}
	h.s.SetLoading(true)
	loading := "-" + string(errLoading)
	h.s.Dispatch(h.c, [][]byte{[]byte("CLUSTERX"), []byte("RESTORE"), []byte("3300"), p.Bytes()}, nil)
	h.s.CommitClient(h.c)
	if got := render(h.c.W.Bytes()); got != loading {
		t.Errorf("RESTORE while loading: %s", got)
	}
	h.c.W.Reset()
	h.run(
		row("clusterx import 3300 1", loading),
		row("clusterx import 3301 0", loading),
		row("clusterx migrate 6000 "+nodeC, loading),
	)
	h.s.SetLoading(false)
	h.run(row("ASKING", "+OK"), row("EXISTS {b}t", ":0"))
}

// memTensorSource is a persistence.Source of one tensor key.
type memTensorSource struct{ key string }

func (s *memTensorSource) Tensors(yield func(persistence.TensorRecord) error) error {
	return yield(persistence.TensorRecord{Key: s.key, DType: uint8(modelstore.Float), Shape: []int64{1}, Data: []byte{0, 0, 128, 63}})
}

func (s *memTensorSource) Models(func(persistence.ModelRecord, []byte) error) error { return nil }

// A RESTORE refused after its model file is in place gives up the file's
// claim, so that the next rewrite removes it (durability review: a
// refused RESTORE's file stayed claimed, and on disk, for good).
func TestRefusedRestoreGivesUpItsModelFile(t *testing.T) {
	model := loadTestRuntime(t)
	if model == nil {
		t.Skip("no ONNX Runtime")
	}
	dir := t.TempDir()
	opts := config.Default()
	opts.ClusterEnabled = true
	opts.AppendOnly = true
	opts.Dir = dir
	opts.Save.Store(new(string))
	h := newHarnessOpts(t, opts)
	h.s.Snapshot.SealKey = aofTestKey
	if err := h.s.LoadData(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.s.CloseLog)
	if err := h.s.StartCluster(); err != nil {
		t.Fatal(err)
	}
	pushTopology(t, h, nodeB)
	modelFiles := func() []string {
		var names []string
		filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err == nil && strings.HasSuffix(path, ".model") {
				names = append(names, filepath.Base(path))
			}
			return nil
		})
		return names
	}
	var payload bytes.Buffer
	if err := persistence.Write(&payload, aofTestKey, restoreSource{"{b}m", model}); err != nil {
		t.Fatal(err)
	}
	h.run(
		row("clusterx import 3300 0", "+OK"),
		// The quota refuses the model once its file is written.
		row("CONFIG SET max-model-bytes-per-user 1", "+OK"),
	)
	h.s.Dispatch(h.c, [][]byte{[]byte("CLUSTERX"), []byte("RESTORE"), []byte("3300"), payload.Bytes()}, nil)
	h.s.CommitClient(h.c)
	if got, want := render(h.c.W.Bytes()), "-"+string(errUserModelBytes); got != want {
		t.Fatalf("RESTORE: %s, want %s", got, want)
	}
	h.c.W.Reset()
	if got := modelFiles(); len(got) != 1 {
		t.Fatalf("model files after the refused RESTORE: %v, want the one it wrote", got)
	}
	h.run(row("BGREWRITEAOF", "+Background append only file rewriting started"))
	waitFor(t, h, "the rewrite", func() bool { return infoField(h, "aof_rewrites") == "1" })
	if got := modelFiles(); len(got) != 0 {
		t.Errorf("model files after a rewrite: %v, want none", got)
	}
}
