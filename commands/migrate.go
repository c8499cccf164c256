package commands

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/tidwall/redcon"

	"github.com/enclaveai/enclaveai/cluster"
	"github.com/enclaveai/enclaveai/modelstore"
	"github.com/enclaveai/enclaveai/persistence"
)

// Slot migration, as Apache Kvrocks does it for its controller:
//
//	CLUSTERX MIGRATE <slot> <target-id>     to the source only
//	CLUSTERX IMPORT <slot> 0|1|2            source to target: start, success, failed
//	CLUSTERX RESTORE <slot> <payload>       source to target: keys of the slot
//
// MIGRATE starts a goroutine on the source and answers OK; CLUSTER INFO's
// migrating_slot, migrating_state (start, success, fail) and
// destination_node say how it goes. The source dials the target (the
// address the topology gives; under tls-cluster over TLS, the target's
// certificate verified against tls-ca-cert-file before anything is sent:
// cluster.DialPeer; AUTH as masteruser with masterauth, or with
// this node's requirepass, which the nodes of a cluster without them
// share: peerAuth), tells it to import the slot, then moves the
// slot's keys, each model alone and small tensors in batches: they travel
// as a snapshot of those keys (persistence's format, sealed with the seal
// key, which the nodes must share: marble mode, docs/ENCLAVE.md), which the
// target stores whole or not at all, and each is deleted here only once the
// target has stored it. A key is thus on one node or the other at every
// moment and nothing is lost if either dies mid-way: the keys already
// moved are in the target's log, the others still here, and MIGRATE run
// again moves the rest.
//
// While the slot migrates, the source runs the commands whose keys it
// still holds, answers ASK (to the target) for those whose keys are all
// gone, and TRYAGAIN for a write some of whose keys are here and some
// gone, and TRYAGAIN for a write to a key being sent (holdBatch). The target
// serves the slot to clients that say ASKING first (TRYAGAIN for a command
// of several keys some of which have not arrived), and MOVED to the source
// otherwise. Once every key has moved the source answers MOVED to the
// target and the target serves the slot, until the controller pushes the
// topology that gives the slot to the target (SETNODES), which ends both
// states.

// Migration states, as CLUSTER INFO shows them.
const (
	migStart   = "start"
	migSuccess = "success"
	migFail    = "fail"
)

var (
	errTryAgain      = Reply("TRYAGAIN Multiple keys request during rehashing of slot")
	errMigrating     = Reply("ERR a slot is already migrating")
	errNotMySlot     = Reply("ERR Can't migrate slot which doesn't belong to me")
	errNoSuchTarget  = Reply("ERR Can't find the destination node id")
	errTargetIsMe    = Reply("ERR Can't migrate slot to myself")
	errNotImporting  = Reply("ERR this node is not importing that slot")
	errRestoreKeyOut = Reply("ERR the restored key is not in the importing slot")
	errRestoreKey    = Reply("ERR the key could not be opened: the nodes do not share a seal key (docs/CLUSTER.md)")
	errRestoreBroken = Reply("ERR the key could not be opened: its payload is damaged or cut short")
)

// migration is the source's side of a slot migration.
type migration struct {
	slot   int
	target *cluster.Node
	state  atomic.Value // string: migStart, migSuccess or migFail
	// settled is set once the state file holds the end, success or fail:
	// CLUSTER INFO reports start until then. A controller that reads
	// success acts at once, and a kill -9 between success and its save
	// found the file still holding the slot as migrating: the restarted
	// source took it as split and answered ASK, not MOVED (CI,
	// test_a_handoff_survives_kill9_before_the_push).
	settled atomic.Bool
	moved   atomic.Int64 // keys moved so far
	// closing fences writes to the slot off (Ctx.fenced) for the last
	// pass, so that none lands here after it.
	closing atomic.Bool
	// inflight is the keys being sent (nil between batches): writes to
	// them are refused (TRYAGAIN) until the target has them and they are
	// gone from here, or they are back (holdBatch).
	inflight atomic.Pointer[map[string]bool]
}

// importing is the target's side.
type importing struct {
	slot     int
	from     string       // the source's id, as the topology said at IMPORT 0 ("" when it named none)
	state    atomic.Value // string: migStart, migSuccess or migFail
	restored atomic.Int64 // keys stored (a failed import that stored some keeps serving them)
}

func (m *migration) State() string { return m.state.Load().(string) }

// ask is the redirection to m's target for one command (ASK).
func (m *migration) ask() Reply { return Reply("ASK " + strconv.Itoa(m.slot) + " " + m.target.Addr()) }

// movedTo is the redirection to m's target for good (MOVED).
func (m *migration) movedTo() Reply {
	return Reply("MOVED " + strconv.Itoa(m.slot) + " " + m.target.Addr())
}
func (i *importing) State() string { return i.state.Load().(string) }

// migrateCmd is CLUSTERX MIGRATE slot target-id.
type migrateCmd struct {
	slot   int
	target string
}

// importCmd is CLUSTERX IMPORT slot state.
type importCmd struct {
	slot  int
	state string
}

// restoreCmd is CLUSTERX RESTORE slot payload.
type restoreCmd struct {
	slot    int
	payload []byte
}

// parseMigrate parses the migration subcommands of CLUSTERX (rest: the
// arguments after the subcommand). While the data loads they answer
// -LOADING, though CLUSTERX runs then for the controller's topology
// pushes: a RESTORE put its keys in the keyspace that the loaded one
// replaces, unlogged (the log is not open yet), and was answered OK, so
// the source deleted its copy; a MIGRATE sent keys not loaded yet.
func parseMigrate(sub string, a Args, rest [][]byte) (Runner, error) {
	if len(rest) != 2 {
		return nil, subArityOf("clusterx", sub)
	}
	slot, ok := cluster.ParseSlot(string(rest[0]))
	if !ok {
		return nil, errInvalidSlot
	}
	switch sub {
	case "migrate":
		if !cluster.ValidID(string(rest[1])) {
			return nil, errInvalidNodeID
		}
		return migrateCmd{slot: slot, target: string(rest[1])}, nil
	case "import":
		state := map[string]string{"0": migStart, "1": migSuccess, "2": migFail}[string(rest[1])]
		if state == "" {
			return nil, Reply("ERR Invalid import state")
		}
		return importCmd{slot: slot, state: state}, nil
	}
	return restoreCmd{slot: slot, payload: a.Keep(a.Len())}, nil
}

// restorePayloadArg is CLUSTERX's Payload: RESTORE's one-key snapshot,
// read like a model's chunks (it may be a model of any size).
func restorePayloadArg(prev [][]byte, i int) bool {
	return i == 3 && isWord(prev[1], "RESTORE")
}

// Run implements Runner: it checks, starts the migration and answers OK.
func (c migrateCmd) Run(x *Ctx) error {
	cs := x.Cluster
	if cs == nil {
		return errClusterDisabled
	}
	if x.loading.Load() {
		return errLoading // no slot moves while loading (parseMigrate)
	}
	v := cs.view.Load()
	if v.top == nil {
		return errClusterNotInit
	}
	if owner := v.top.Owner(c.slot); owner == nil || owner.ID != v.id {
		return errNotMySlot
	}
	target := v.top.Find(c.target)
	switch {
	case target == nil || !target.Master():
		return errNoSuchTarget
	case target.ID == v.id:
		return errTargetIsMe
	}
	if old := cs.mig.Load(); old != nil && old.split() && (old.slot != c.slot || old.target.ID != target.ID) {
		// A failed migration left the keys of its slot on two nodes:
		// another migration would forget where (mig holds one).
		return errorf("ERR slot %d is split between this node and %s by a failed migration: migrate it there again first", old.slot, old.target.ID)
	}
	if h := cs.handed.Load(); h != nil && (*h)[c.slot] != nil && (*h)[c.slot].ID != target.ID {
		// Its keys are on the node it was handed to: moving "the slot"
		// from here would move nothing and point clients at an empty node
		// (diff review).
		return errorf("ERR slot %d was migrated to %s already: waiting for the topology that says so", c.slot, (*h)[c.slot].ID)
	}
	m := &migration{slot: c.slot, target: target}
	m.state.Store(migStart)
	old := cs.mig.Load()
	if (old != nil && old.State() == migStart) || !cs.mig.CompareAndSwap(old, m) {
		return errMigrating
	}
	// Kept in the state file before a key moves: a restart meanwhile
	// finds the slot split between the two nodes, not served without the
	// keys that went (cluster review).
	if err := cs.save(); err != nil {
		cs.mig.CompareAndSwap(m, old)
		return fmt.Errorf("cluster state not saved: %w", err)
	}
	x.Log.Info("slot migration started", "slot", c.slot, "target", target.ID, "addr", target.Addr())
	go x.migrate(m)
	x.W.OK()
	return nil
}

// migrate moves m's slot to its target (a goroutine).
func (s *App) migrate(m *migration) {
	err := s.migrateKeys(m)
	if err != nil {
		m.state.Store(migFail)
		s.Log.Warn("slot migration failed", "slot", m.slot, "target", m.target.ID, "moved", m.moved.Load(), "err", err)
		if err := s.Cluster.save(); err != nil { // a split stays, one that moved nothing goes
			s.Log.Error("slot migration failed, its state not saved", "slot", m.slot, "err", err)
		}
		m.settled.Store(true)
		return
	}
	// The deletes of the keys that went reach the log's file before the
	// slot is declared handed over: a kill -9 after it must not bring
	// them back here.
	if l := s.aof(); l != nil {
		if err := l.Commit(l.Seq()); err != nil {
			s.Log.Error("slot migration done, the log's deletes not written", "slot", m.slot, "err", err)
		}
	}
	// Success first (routing answers MOVED from now on), so that the
	// handoff's save no longer keeps the slot as migrating: a restart
	// would take it as split.
	m.state.Store(migSuccess)
	if err := s.Cluster.handoff(func(h map[int]*cluster.Node, _ map[int]string) { h[m.slot] = m.target }); err != nil {
		// The keys are on the target: served from there all the same,
		// until a restart here forgets it.
		s.Log.Error("slot migration done, its handoff not saved", "slot", m.slot, "err", err)
	}
	m.settled.Store(true)
	s.Log.Info("slot migration done", "slot", m.slot, "target", m.target.ID, "moved", m.moved.Load())
}

// handoff changes the slots handed to other nodes and taken from them
// (ClusterState.handed and taken): f edits copies, saved in the state
// file with the current view (a node restarted before the topology push
// forgot them, and served the slot without its keys: cluster review), then
// published; they are published even when the save fails, which is
// returned. A migration that succeeded is remembered there, not only in
// mig or imp, which the next migration replaces: kvrocks-controller's
// older version gives up on a migration that is not done at its first
// look and never pushes its topology, and the next MIGRATE made the first
// slot's keys unreachable, its source serving it empty and its target
// redirecting to the source (cluster review).
func (cs *ClusterState) handoff(f func(handed map[int]*cluster.Node, taken map[int]string)) error {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	h, t := map[int]*cluster.Node{}, map[int]string{}
	if p := cs.handed.Load(); p != nil {
		maps.Copy(h, *p)
	}
	if p := cs.taken.Load(); p != nil {
		maps.Copy(t, *p)
	}
	f(h, t)
	var hp *map[int]*cluster.Node
	var tp *map[int]string
	if len(h) > 0 {
		hp = &h
	}
	if len(t) > 0 {
		tp = &t
	}
	cs.handed.Store(hp)
	cs.taken.Store(tp)
	return cs.saveLocked()
}

// save writes the state file if what it should hold changed (saveLocked).
func (cs *ClusterState) save() error {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.saveLocked()
}

// saveLocked writes the state file for the current view and slots on the
// move, unless it holds that already (every push ends a handoff check
// here: no write for nothing). cs.mu is held.
func (cs *ClusterState) saveLocked() error {
	v := cs.view.Load()
	st := cs.movingState(v.id, v.version, v.top)
	enc := st.Encode(cs.sealKey)
	if bytes.Equal(enc, cs.saved) {
		return nil
	}
	if err := cluster.Save(cs.path, cs.sealKey, st); err != nil {
		return err
	}
	cs.saved = enc
	return nil
}

// movingState is the state file's content for a node id, version and
// topology, with the slots on the move now: those handed and taken, the
// slot this node sends while it does or after a failure split it, and the
// one it receives while it does or after a failure left keys here. A
// topology forgotten (CLUSTER RESET) forgets them too; an id that is not
// one (a source the topology did not name) is not kept. It reads the
// atomics alone; a save holds cs.mu, so that no other change lands between.
func (cs *ClusterState) movingState(id string, version int64, top *cluster.Topology) *cluster.State {
	st := &cluster.State{ID: id, Version: version, Topology: top}
	if top == nil {
		return st
	}
	add := func(m *map[int]string, slot int, id string) {
		if !cluster.ValidID(id) {
			return
		}
		if *m == nil {
			*m = map[int]string{}
		}
		(*m)[slot] = id
	}
	if p := cs.handed.Load(); p != nil {
		for slot, n := range *p {
			add(&st.Handed, slot, n.ID)
		}
	}
	if p := cs.taken.Load(); p != nil {
		for slot, from := range *p {
			add(&st.Taken, slot, from)
		}
	}
	if m := cs.mig.Load(); m != nil && (m.State() == migStart || m.split()) {
		add(&st.Migrating, m.slot, m.target.ID)
	}
	if im := cs.imp.Load(); im != nil && (im.State() == migStart || im.State() == migFail && im.restored.Load() > 0) {
		add(&st.Importing, im.slot, im.from)
	}
	return st
}

func (s *App) migrateKeys(m *migration) error {
	// Under tls-cluster the target's certificate is verified before a
	// byte is sent: AUTH and the keys reach only a node of the cluster's CA.
	conn, err := cluster.DialPeer(m.target.Addr(), s.PeerTLS, 5*time.Second)
	if err != nil {
		return err
	}
	defer conn.Close()
	t := &peer{conn: conn, rd: bufio.NewReader(conn)}
	if auth, user := s.peerAuth(); auth != nil {
		// The target's reply (WRONGPASS, NOAUTH) names no password.
		if err := t.do(auth...); err != nil {
			return fmt.Errorf("AUTH to the target as user %s: %w", user, err)
		}
	}
	slot := strconv.Itoa(m.slot)
	if err := t.do("CLUSTERX", "IMPORT", slot, "0"); err != nil {
		return err
	}
	fail := func(err error) error {
		t.do("CLUSTERX", "IMPORT", slot, "2")
		return err
	}
	// Passes over the slot's keys until none is left here: a key written
	// while it was sent is not deleted (DeleteIf) and goes again in the
	// next pass, as does one a write made meanwhile. Models go first: a
	// command that uses a model and tensors is refused (TRYAGAIN) while
	// some of its keys have moved and others not, and the tensors move
	// fast. Then writes to the slot are fenced off, the writes in flight
	// (which hold the transaction lock's read side) are waited for, and a
	// last pass moves what they made: no write lands here after it.
	if err := s.movePasses(t, m, slot); err != nil {
		return fail(err)
	}
	s.tx.Lock() // the writes in flight hold the read side: they finish first
	m.closing.Store(true)
	s.tx.Unlock()
	if err := s.movePasses(t, m, slot); err != nil {
		return fail(err)
	}
	return t.do("CLUSTERX", "IMPORT", slot, "1")
}

// peerAuth is the AUTH this node sends another (a migration's target),
// with the user it names, as a Redis replica authenticates to its master:
// AUTH masteruser masterauth when masteruser is set (with users, one given
// +@admin on the target: CLUSTERX is administrative), AUTH masterauth as
// the default user when only masterauth is, and otherwise AUTH with this
// node's own requirepass, which the nodes of a cluster without them share;
// nil when there is none of the three.
func (s *App) peerAuth() (args []string, user string) {
	user, pass := *s.Opts.MasterUser.Load(), *s.Opts.MasterAuth.Load()
	switch {
	case user != "":
		return []string{"AUTH", user, pass}, user
	case pass != "":
		return []string{"AUTH", pass}, "default"
	case *s.Opts.Requirepass.Load() != "":
		return []string{"AUTH", *s.Opts.Requirepass.Load()}, "default"
	}
	return nil, "default"
}

// movePasses moves the slot's keys until none is left here.
func (s *App) movePasses(t *peer, m *migration, slot string) error {
	for pass := 0; ; pass++ {
		if done, err := s.movePass(t, m, slot, pass); done || err != nil {
			return err
		}
	}
}

// movePass sends the slot's keys once; done when there were none. The
// models' blobs are retained while they are sent: a DEL meanwhile must not
// free the bytes under the socket.
func (s *App) movePass(t *peer, m *migration, slot string, pass int) (done bool, err error) {
	items := s.retainItems()
	defer s.releaseItems(items)
	var models, tensors []modelstore.Item
	for _, it := range items {
		if cluster.KeySlot([]byte(it.Key)) == m.slot {
			if _, ok := it.Value.(*modelstore.Model); ok {
				models = append(models, it)
			} else {
				tensors = append(tensors, it)
			}
		}
	}
	if len(models)+len(tensors) == 0 {
		return true, nil
	}
	if pass == maxMigratePasses {
		return false, fmt.Errorf("the slot's keys kept changing for %d passes", pass)
	}
	keys := append(models, tensors...)
	for i := 0; i < len(keys); {
		n, size := 1, int64(0)
		if small(keys[i]) {
			size = int64(len(keys[i].Value.(*modelstore.Tensor).Data))
			for i+n < len(keys) && n < maxBatch && size < batchBytes && small(keys[i+n]) {
				size += int64(len(keys[i+n].Value.(*modelstore.Tensor).Data))
				n++
			}
		}
		batch := s.holdBatch(m, keys[i:i+n])
		i += n
		if len(batch) == 0 {
			m.inflight.Store(nil)
			continue
		}
		err := t.restore(s.Snapshot.SealKey, slot, batch)
		// The deletes take the transaction lock's write side: a read
		// routed here holds the read side while it checks its keys again
		// (Ctx.fenced) and reads them, so it never finds a key gone that
		// it was routed here for (cluster review: 1 in about 600,000
		// reads under load answered a moving key as missing).
		var gone []modelstore.Value
		if err == nil {
			s.tx.Lock()
			for _, it := range batch {
				if s.Keys.DeleteIf(it.Key, it.Value) {
					gone = append(gone, it.Value)
				}
			}
			s.tx.Unlock()
		}
		s.Release(gone)
		m.moved.Add(int64(len(gone)))
		m.inflight.Store(nil)
		s.releaseItems(batch)
		if err != nil {
			return false, fmt.Errorf("key %q (and %d more): %w", batch[0].Key, len(batch)-1, err)
		}
	}
	return false, nil
}

// holdBatch marks a batch's keys in flight, under the write side of the
// transaction lock so that no write to them is under way, and returns
// them as they are now (their values retained; a key gone since the pass
// began is left out). Until the batch is sent and deleted here, writes to
// its keys are refused (Ctx.fenced): a DEL, PERSIST, PEXPIRE or
// AI.MODELDEL acknowledged here while the key was on its way was undone
// when it landed on the target (cluster review).
func (s *App) holdBatch(m *migration, batch []modelstore.Item) []modelstore.Item {
	set := make(map[string]bool, len(batch))
	for _, it := range batch {
		set[it.Key] = true
	}
	s.tx.Lock()
	defer s.tx.Unlock()
	m.inflight.Store(&set)
	now := make([]modelstore.Item, 0, len(batch))
	for _, it := range batch {
		if cur, ok := s.Keys.ItemRetained(it.Key, retainBlob); ok {
			now = append(now, cur)
		}
	}
	return now
}

// maxMigratePasses bounds the passes over a slot whose keys keep being
// written while they move.
const maxMigratePasses = 100

// peer is the source's connection to the target.
type peer struct {
	conn net.Conn
	rd   *bufio.Reader
}

// do sends a command and reads a +OK.
func (p *peer) do(args ...string) error {
	var b []byte
	b = redcon.AppendArray(b, len(args))
	for _, a := range args {
		b = redcon.AppendBulkString(b, a)
	}
	p.conn.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := p.conn.Write(b); err != nil {
		return err
	}
	return p.reply()
}

// maxPeerLine bounds a reply line from the target: +OK, or an error of a
// line. Whatever listens at the address the topology names answers here,
// so its reply is read with a bound, and taken apart without trusting it.
const maxPeerLine = 64 << 10

// reply reads the target's reply: nil for +OK, else its error line, or
// an error saying what came instead.
func (p *peer) reply() error {
	var line []byte
	for {
		frag, err := p.rd.ReadSlice('\n')
		line = append(line, frag...)
		if err == nil {
			break
		}
		if err != bufio.ErrBufferFull {
			return err
		}
		if len(line) > maxPeerLine {
			return fmt.Errorf("the target's reply passes %d bytes without a line end", maxPeerLine)
		}
	}
	if string(line) == "+OK\r\n" {
		return nil
	}
	if msg := strings.TrimRight(string(line), "\r\n"); len(msg) > 1 && msg[0] == '-' {
		return errors.New(msg[1:])
	}
	return fmt.Errorf("the target's reply %q is neither +OK nor an error", line)
}

// restore sends keys as one CLUSTERX RESTORE slot <snapshot of them>,
// sealed with sealKey, and reads its reply: the target stores all of them
// or none. A batch of small tensors is sealed once into memory (one
// snapshot for many keys: its compressor and cipher are set up once); a
// single larger key is sealed twice, once to count its bytes for the bulk
// string's header and once onto the socket, so that a model is never held
// twice here.
func (p *peer) restore(sealKey []byte, slot string, keys []modelstore.Item) error {
	src := migrateSource(keys)
	head := redcon.AppendArray(nil, 4)
	for _, a := range []string{"CLUSTERX", "RESTORE", slot} {
		head = redcon.AppendBulkString(head, a)
	}
	p.conn.SetDeadline(time.Now().Add(10 * time.Minute))
	w := bufio.NewWriterSize(p.conn, 1<<20)
	if len(keys) > 1 || small(keys[0]) {
		var b bytes.Buffer
		if err := persistence.Write(&b, sealKey, src); err != nil {
			return err
		}
		w.Write(redcon.AppendBulk(head, b.Bytes()))
	} else {
		var n countWriter
		if err := persistence.Write(&n, sealKey, src); err != nil {
			return err
		}
		head = append(head, '$')
		head = strconv.AppendInt(head, int64(n), 10)
		head = append(head, '\r', '\n')
		w.Write(head)
		var again countWriter
		if err := persistence.Write(io.MultiWriter(w, &again), sealKey, src); err != nil {
			return err
		}
		if again != n {
			return errors.New("the key changed size while it was sent")
		}
		w.WriteString("\r\n")
	}
	if err := w.Flush(); err != nil {
		return err
	}
	return p.reply()
}

// small reports whether it is a tensor small enough to send in a batch.
func small(it modelstore.Item) bool {
	t, ok := it.Value.(*modelstore.Tensor)
	return ok && len(t.Data) <= smallKey
}

// Small tensors travel in batches, one RESTORE of up to maxBatch of them
// and about batchBytes: a slot of many small tensors moves at the wire's
// speed rather than a round trip and a compressor's setup a key, which
// shortens the time commands whose keys are split between the nodes get
// TRYAGAIN.
const (
	smallKey   = 256 << 10
	maxBatch   = 256
	batchBytes = 4 << 20
)

// countWriter counts what is written to it.
type countWriter int64

func (c *countWriter) Write(b []byte) (int, error) { *c += countWriter(len(b)); return len(b), nil }

// migrateSource is a one-key snapshot of a key on the move: as a
// snapshot's, but NOPERSIST models travel too (marked in Extra).
type migrateSource []modelstore.Item

func (src migrateSource) Tensors(yield func(persistence.TensorRecord) error) error {
	return snapshotSource(src).Tensors(yield)
}

func (src migrateSource) Models(yield func(persistence.ModelRecord, []byte) error) error {
	for _, it := range src {
		if m, ok := it.Value.(*modelstore.Model); ok {
			rec := snapshotModelRecord(it.Key, it.ExpireAt, m)
			if m.NoPersist {
				rec.Extra = map[string]string{"nopersist": "1"}
			}
			if err := yield(rec, m.Blob.Data); err != nil {
				return err
			}
		}
	}
	return nil
}

// restoreLoader is a snapshotLoader that keeps NOPERSIST models so.
type restoreLoader struct{ snapshotLoader }

func (l *restoreLoader) Model(r persistence.ModelRecord, blob []byte) error {
	m, err := l.model(r, blob)
	if err != nil {
		return err
	}
	m.NoPersist = r.Extra["nopersist"] == "1"
	l.items = append(l.items, modelstore.Item{Key: r.Key, Value: m, ExpireAt: r.ExpireAtUnixMs})
	return nil
}

// Run implements Runner: the target's import state.
func (c importCmd) Run(x *Ctx) error {
	cs := x.Cluster
	if cs == nil {
		return errClusterDisabled
	}
	if x.loading.Load() {
		return errLoading // no slot moves while loading (parseMigrate)
	}
	if c.state == migStart {
		im := &importing{slot: c.slot}
		if v := cs.view.Load(); v.top != nil && v.top.Owner(c.slot) != nil {
			im.from = v.top.Owner(c.slot).ID // the source, as the topology says
		}
		im.state.Store(migStart)
		cs.imp.Store(im)
		// A slot this node handed over and takes back is its own again
		// once the import ends and the topology says so.
		if err := cs.handoff(func(h map[int]*cluster.Node, _ map[int]string) { delete(h, c.slot) }); err != nil {
			return fmt.Errorf("cluster state not saved: %w", err)
		}
	} else if im := cs.imp.Load(); im != nil && im.slot == c.slot {
		im.state.Store(c.state)
		from := im.from
		if from == "" {
			from = "?"
		}
		// Saved before the OK: on success the source deletes nothing more
		// and declares success on it; after a failure a split stays.
		var err error
		if c.state == migSuccess {
			err = cs.handoff(func(_ map[int]*cluster.Node, t map[int]string) { t[c.slot] = from })
		} else {
			err = cs.save()
		}
		if err != nil {
			return fmt.Errorf("cluster state not saved: %w", err)
		}
	} else {
		return errNotImporting
	}
	x.Log.Info("slot import", "slot", c.slot, "state", c.state)
	x.W.OK()
	return nil
}

// Run implements Runner: the target stores keys of the slot it imports,
// all of them or none.
func (c restoreCmd) Run(x *Ctx) error {
	cs := x.Cluster
	if cs == nil {
		return errClusterDisabled
	}
	if x.loading.Load() {
		return errLoading // no slot moves while loading (parseMigrate)
	}
	if im := cs.imp.Load(); im == nil || im.slot != c.slot || im.State() != migStart {
		return errNotImporting
	}
	l := &restoreLoader{snapshotLoader{s: x.App, log: func(int64, int64) {}}}
	err := persistence.Read(bytes.NewReader(c.payload), x.Snapshot.SealKey, x.Opts.MaxModelSize.Load(), l)
	l.release()
	if err != nil {
		x.Release(itemValues(l.items))
		// The payload's own faults get a text of their own, the detail
		// going to the log; a value the payload held that the keyspace
		// refuses (a malformed model) is answered as AI.MODELSTORE answers
		// it (errorText: the detail was sent to the client, and every
		// fault blamed on the seal key; code review).
		switch {
		case errors.Is(err, persistence.ErrWrongKey):
			return errRestoreKey
		case errors.Is(err, persistence.ErrNotSnapshot), errors.Is(err, persistence.ErrVersion),
			errors.Is(err, persistence.ErrCorrupt), errors.Is(err, persistence.ErrTruncated),
			errors.Is(err, persistence.ErrTooLarge):
			x.Log.Warn("slot restore refused", "slot", c.slot, "err", err)
			return errRestoreBroken
		}
		return err
	}
	for _, it := range l.items {
		if cluster.KeySlot([]byte(it.Key)) != c.slot {
			x.Release(itemValues(l.items))
			return errRestoreKeyOut
		}
	}
	// A model's sealed file goes into the log's directory before its record
	// (as for AI.MODELSTORE): the log then holds it across a restart. Each
	// file in place is claimed until its record is written: a refusal gives
	// the claims up, so that the next rewrite removes the files (durability
	// review: a refused RESTORE's files stayed on disk for good).
	var placed []*modelstore.Model
	refuse := func(err error) error {
		for _, m := range placed {
			if file, _, ok := modelFileOf(m); ok {
				x.aof().Unclaim(file)
			}
		}
		x.Release(itemValues(l.items))
		return err
	}
	for _, it := range l.items {
		if m, ok := it.Value.(*modelstore.Model); ok {
			mf, err := x.startModelFile(m.Blob.Data, m.NoPersist)
			if err == nil {
				err = mf.finish(x, m.Blob)
			}
			if err != nil {
				return refuse(err)
			}
			if mf != nil {
				placed = append(placed, m)
			}
		}
	}
	err = x.Update(func() error {
		old, err := x.restoreItems(l.items) // all of them or none
		if err != nil {
			return err
		}
		for i, it := range l.items {
			if old[i] != nil {
				x.Release([]modelstore.Value{old[i]})
			}
			if it.ExpireAt > 0 {
				x.Keys.SetExpire(nil, it.Key, it.ExpireAt)
			}
		}
		return nil
	})
	if err != nil {
		return refuse(err)
	}
	if im := cs.imp.Load(); im != nil && im.slot == c.slot {
		im.restored.Add(int64(len(l.items)))
	}
	x.W.OK()
	return nil
}

// restoreItems stores the keys a RESTORE brought, all of them or none,
// and returns the values they replaced. Under max-model-bytes-per-user a
// model is charged to its owner here as that owner's store would be:
// checked, in the same step as it is stored under quota.mu, against the
// owner's models and uploads on this node, and refused past the limit
// (the migration fails, and the source keeps the model).
func (x *Ctx) restoreItems(items []modelstore.Item) ([]modelstore.Value, error) {
	ws := make([]modelstore.Write, len(items))
	for i, it := range items {
		ws[i] = modelstore.Write{Key: it.Key, Value: it.Value}
	}
	if limit := x.Opts.MaxModelBytesPerUser.Load(); limit > 0 {
		x.quota.mu.Lock()
		defer x.quota.mu.Unlock()
		add := map[string]int64{} // the bytes of the owners' models before this one in items
		for _, it := range items {
			m, ok := it.Value.(*modelstore.Model)
			if !ok || m.Blob == nil {
				continue
			}
			owner, _ := ownerOf(m)
			n := add[owner] + int64(len(m.Blob.Data))
			if err := x.overQuotaLocked(owner, it.Key, limit, n, nil); err != nil {
				return nil, err
			}
			add[owner] = n
		}
	}
	return x.Keys.SetMany(ws)
}

// writesLog implements logWriter. The source deletes its copy on the OK:
// the key must be in the log (written to the OS, fsynced by the policy)
// before the reply goes, as a write's is; a batch of RESTOREs pipelined by
// the source is committed once, before their replies.
func (restoreCmd) writesLog() bool { return true }

// migrationInfo is CLUSTER INFO's migration fields.
func (cs *ClusterState) migrationInfo() [][2]string {
	slot, state, dest := "-1", "none", ""
	if m := cs.mig.Load(); m != nil {
		slot, state, dest = strconv.Itoa(m.slot), m.State(), m.target.ID
		if !m.settled.Load() {
			state = migStart
		}
	}
	islot, istate := "-1", "none"
	if im := cs.imp.Load(); im != nil {
		islot, istate = strconv.Itoa(im.slot), im.State()
	}
	return [][2]string{{"migrating_slot", slot}, {"migrating_state", state}, {"destination_node", dest},
		{"importing_slot", islot}, {"import_state", istate}}
}

// openSlots lists, as Redis's CLUSTER NODES ends its myself line with
// them, the slots this node has on the move that the topology v does not
// yet show moved, the ones the state file keeps (movingState):
// "[slot->-target-id]" for one it sends or sent (migrating, split by a
// failure, or handed over and not yet pushed), "[slot-<-source-id]" for
// one it receives or received, in slot order. redis-cli --cluster check
// reads them and warns of open slots.
func (cs *ClusterState) openSlots(v *clusterView) []string {
	st := cs.movingState(v.id, v.version, v.top)
	out := map[int]string{}
	for _, m := range []map[int]string{st.Taken, st.Importing} {
		for slot, id := range m {
			out[slot] = fmt.Sprintf("[%d-<-%s]", slot, id)
		}
	}
	for _, m := range []map[int]string{st.Handed, st.Migrating} {
		for slot, id := range m {
			out[slot] = fmt.Sprintf("[%d->-%s]", slot, id)
		}
	}
	slots := slices.Sorted(maps.Keys(out))
	open := make([]string, len(slots))
	for i, s := range slots {
		open[i] = out[s]
	}
	return open
}

// routeMigrating decides, for a command whose keys are all in slot,
// whether a slot on the move redirects it: nil runs it here.
func (s *App) routeMigrating(c *Client, spec *Spec, argv [][]byte, pos []int, slot int, mine bool) error {
	cs := s.Cluster
	present := func() (all, none bool) {
		all, none = true, true
		for _, p := range pos {
			if _, ok := s.Keys.Expiry(string(argv[p])); ok { // Get would pin a tensor
				none = false
			} else {
				all = false
			}
		}
		return all, none
	}
	if m := cs.mig.Load(); mine && m != nil && m.slot == slot {
		ask := m.ask()
		switch m.State() {
		case migSuccess:
			return m.movedTo()
		case migStart:
			switch all, none := present(); {
			case all:
				return nil
			case none || !spec.Has(Write):
				return ask
			}
			return errTryAgain
		case migFail:
			if !m.split() {
				return nil
			}
			// As Redis leaves a slot MIGRATING after a failed MIGRATE: the
			// keys that moved are on the target, the rest here, until
			// MIGRATE to the same target moves them (cluster review: they
			// were unreachable, served as missing from here).
			if all, none := present(); !all && (none || !spec.Has(Write)) {
				return ask
			} else if !all {
				return errTryAgain
			}
		}
		return nil
	}
	if im := cs.imp.Load(); !mine && im != nil && im.slot == slot {
		switch im.State() {
		case migSuccess:
			return nil // all its keys are here: serve it until the topology says so
		case migStart, migFail: // after a failure it keeps the keys that came (see above)
			if c.asking {
				if all, _ := present(); !all && len(pos) > 1 {
					return errTryAgain
				}
				return nil
			}
		}
	}
	return errNotHere
}

// split reports a failed migration that moved keys: the slot is split
// between this node and the target until a MIGRATE to it moves the rest.
func (m *migration) split() bool { return m.State() == migFail && m.moved.Load() > 0 }

// errNotHere tells route to redirect as the topology says.
var errNotHere = errors.New("not here")

// fenceSlot is the slot the command's keys are in, -1 when it has none
// (only fenced asks, and only while a slot migrates: nothing is added to
// other commands).
func (x *Ctx) fenceSlot() int {
	if x.spec == nil {
		return -1
	}
	pos := x.spec.KeyPositions(x.argv)
	if len(pos) == 0 {
		return -1
	}
	return cluster.KeySlot(x.argv[pos[0]])
}

// fenced refuses, under the transaction lock, a write to a slot whose
// migration is closing or done: it was routed here before, and would land
// after the last pass. The client retries (TRYAGAIN) and is redirected.
// A read routed here is routed again: a key the migration deleted since
// (movePass deletes under the lock's write side) is on the target now.
func (x *Ctx) fenced() error {
	if x.Cluster == nil {
		return nil
	}
	m := x.Cluster.mig.Load()
	if m == nil || m.slot != x.fenceSlot() {
		return nil
	}
	if x.spec != nil && !x.spec.Has(Write) {
		return x.readFenced(m)
	}
	if m.State() == migFail {
		return nil
	}
	if m.closing.Load() || m.sending(x.spec, x.argv, x.runner) {
		return errTryAgain
	}
	return nil
}

// readFenced routes a read of the migrating slot again under the
// transaction lock, as routeMigrating did before it: MOVED once every key
// has gone, ASK when one of its keys has gone to the target since.
func (x *Ctx) readFenced(m *migration) error {
	switch {
	case m.State() == migSuccess:
		return m.movedTo()
	case m.State() == migStart || m.split():
		for _, p := range x.spec.KeyPositions(x.argv) {
			if _, ok := x.Keys.Expiry(string(x.argv[p])); !ok { // Get would pin a tensor
				return m.ask()
			}
		}
	}
	return nil
}

// movedOut turns a missing key's error, while the command's slot
// migrates, into the redirection routing would give it now. Commands run
// outside App.tx (AI.MODELGET, AI.MODELEXECUTE, a DAG's LOAD) read their
// keys without the lock readFenced holds against the migration's deletes,
// so a key can go between their routing and their read (diff review:
// "model key is empty" where the model had moved).
func (x *Ctx) movedOut(err error) error {
	if x.Cluster == nil || !(errors.Is(err, modelstore.ErrNoModel) || errors.Is(err, modelstore.ErrNoTensor)) {
		return err
	}
	m := x.Cluster.mig.Load()
	if m == nil || m.slot != x.fenceSlot() {
		return err
	}
	switch {
	case m.State() == migSuccess:
		return m.movedTo()
	case m.State() == migStart || m.split():
		return m.ask()
	}
	return err
}

// keyWriter is a parsed command that writes only some of its keys: a
// model run writes its outputs, not its model or inputs.
type keyWriter interface{ writtenKeys() []string }

func (c *modelExecCmd) writtenKeys() []string { return c.outputs }
func (c *dagCmd) writtenKeys() []string       { return c.persist }

// sending reports whether a command writes a key of the batch on its way
// to the target (holdBatch). Only the keys it writes count: the clients
// running a model that was being sent got TRYAGAIN for the whole send,
// its compile on the target included, and gave up.
func (m *migration) sending(spec *Spec, argv [][]byte, r Runner) bool {
	set := m.inflight.Load()
	if set == nil || spec == nil {
		return false
	}
	if w, ok := r.(keyWriter); ok {
		for _, k := range w.writtenKeys() {
			if (*set)[k] {
				return true
			}
		}
		return false
	}
	for _, p := range spec.KeyPositions(argv) {
		if (*set)[string(argv[p])] {
			return true
		}
	}
	return false
}

// endMigration ends the migration states once the topology pushed says
// where the slot is: the source of a migration that succeeded drops what
// is left of the slot (nothing, unless a write raced the last pass). After
// a failure nothing is dropped, whoever the topology says owns the slot:
// the keys still here never reached the target.
func (s *App) endMigration(v *clusterView) {
	cs := s.Cluster
	if m := cs.mig.Load(); m != nil && m.State() != migStart {
		// A success lives on in handed; a split, while the slot is still
		// this node's.
		if owner := v.top.Owner(m.slot); !m.split() || owner == nil || owner.ID != v.id {
			cs.mig.Store(nil)
		}
	}
	if im := cs.imp.Load(); im != nil {
		if owner := v.top.Owner(im.slot); owner != nil && owner.ID == v.id || im.State() == migFail && im.restored.Load() == 0 {
			cs.imp.Store(nil)
		}
	}
	// A slot handed over ends here once the topology gives it to another
	// node (the keys a write raced in after the last pass are dropped); one
	// taken, once it gives it to any node but the one it came from. Until then they are served as
	// the migration left them, whatever the pushes in between say: the
	// keys are on the target.
	drop := map[int]bool{}
	err := cs.handoff(func(h map[int]*cluster.Node, t map[int]string) {
		for slot := range h {
			if owner := v.top.Owner(slot); owner == nil || owner.ID != v.id {
				delete(h, slot)
				drop[slot] = true
			}
		}
		for slot, from := range t {
			if owner := v.top.Owner(slot); owner == nil || owner.ID != from {
				delete(t, slot) // given to this node, or to another
			}
		}
	})
	if err != nil {
		s.Log.Error("cluster state: the handoffs the topology ended not saved", "err", err)
	}
	if len(drop) == 0 {
		return
	}
	var keys []string
	for _, it := range s.Keys.Items() {
		if drop[cluster.KeySlot([]byte(it.Key))] {
			keys = append(keys, it.Key)
		}
	}
	if removed, _ := s.Keys.Delete(nil, keys...); len(removed) > 0 {
		s.Release(removed)
	}
}
