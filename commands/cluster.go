package commands

import (
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/enclaveai/enclaveai/cluster"
	"github.com/enclaveai/enclaveai/modelstore"
	"github.com/google/uuid"
)

// Redis Cluster mode (cluster-enabled yes; docs/CLUSTER.md). Slot
// ownership is not negotiated between nodes: an external controller
// (kvrocks-controller, or enclaveai-cli cluster) pushes the whole topology
// to every node with CLUSTERX SETNODES, as to Apache Kvrocks.
//
//	CLUSTER INFO | NODES | SLOTS | SHARDS | MYID | KEYSLOT key |
//	        COUNTKEYSINSLOT slot | GETKEYSINSLOT slot count | RESET [HARD|SOFT] | HELP
//	CLUSTERX SETNODEID id | SETNODES "topology" version [FORCE] | VERSION |
//	         MIGRATE slot target-id | IMPORT slot state | RESTORE slot payload (migrate.go)
//	ASKING, READONLY, READWRITE
func init() {
	register(
		&Spec{Name: "cluster", Arity: -2, Flags: LoadingOK, Group: "cluster",
			Summary: "Reads the cluster topology the controller pushed (INFO, NODES, SLOTS, SHARDS, MYID, KEYSLOT, COUNTKEYSINSLOT, GETKEYSINSLOT) or resets it (RESET).",
			Parse:   parseCluster, AdminSubs: []string{"RESET"}, Subs: []Sub{
				{"INFO", "The cluster's state, as the controller pushed it."},
				{"NODES", "The nodes and their slots, in Redis's CLUSTER NODES format."},
				{"SLOTS", "The slot ranges and the node that serves each."},
				{"SHARDS", "The shards, their slots and nodes."},
				{"MYID", "This node's id."},
				{"KEYSLOT <key>", "The hash slot of a key (in any mode)."},
				{"COUNTKEYSINSLOT <slot>", "The number of keys in a slot on this node."},
				{"GETKEYSINSLOT <slot> <count>", "Up to count keys of a slot on this node."},
				{"RESET [HARD|SOFT]", "Forgets the topology (HARD: and takes a new node id). The controller sets it with CLUSTERX SETNODES (docs/CLUSTER.md)."},
			}},
		&Spec{Name: "clusterx", Arity: -2, Flags: Admin | LoadingOK | Big | NoTxLock, Group: "cluster",
			Summary: "The controller's commands (Apache Kvrocks's): sets this node's id, pushes the topology and its version, reads the version, migrates a slot to another node (and, between nodes, imports it).",
			Syntax:  "SETNODEID id | SETNODES topology version [FORCE] | VERSION | MIGRATE slot target-id | IMPORT slot 0|1|2 | RESTORE slot payload",
			Parse:   parseClusterX, Payload: restorePayloadArg},
		&Spec{Name: "asking", Arity: 1, Flags: Fast, Group: "cluster",
			Summary: "Lets the next command use a slot this node is importing (after an -ASK redirect).", Parse: parseClusterFlagCmd},
		&Spec{Name: "readonly", Arity: 1, Flags: Fast | LoadingOK, Group: "cluster",
			Summary: "Accepted for cluster clients (this node has no replicas to read from).", Parse: parseClusterFlagCmd},
		&Spec{Name: "readwrite", Arity: 1, Flags: Fast | LoadingOK, Group: "cluster",
			Summary: "Accepted for cluster clients.", Parse: parseClusterFlagCmd},
	)
	RegisterInfoSection(InfoSection{Name: "Cluster", Fields: func(s *App) [][2]string {
		return [][2]string{{"cluster_enabled", yesNoDigit(s.Cluster != nil)}}
	}})
}

// redisMode is what HELLO and INFO call the server's mode.
func (s *App) redisMode() string {
	if s.Cluster != nil {
		return "cluster"
	}
	return "standalone"
}

func yesNoDigit(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// Cluster replies. The first two are kvrocks's: the controller takes a
// node that answers CLUSTER INFO with errClusterNotInit as a new node and
// pushes it the topology.
const (
	errClusterNotInit    Reply = "ERR CLUSTERDOWN The cluster is not initialized"
	errKeysNotInit       Reply = "CLUSTERDOWN The cluster is not initialized"
	errCrossSlot         Reply = "CROSSSLOT Keys in request don't hash to the same slot"
	errSlotNotServed     Reply = "CLUSTERDOWN Hash slot not served"
	errClusterDisabled   Reply = "ERR This instance has cluster support disabled"
	errInvalidSlot       Reply = "ERR Invalid slot"
	errInvalidNodeID     Reply = "ERR Invalid node id: want 40 characters of [A-Za-z0-9]"
	errInvalidVersion    Reply = "ERR Invalid cluster version"
	errResetWithKeys     Reply = "ERR CLUSTER RESET can't be called with master nodes containing keys"
	errGetKeysNoKeys     Reply = "ERR The command has no key arguments"
	errGetKeysBadCommand Reply = "ERR Invalid command specified"
	errGetKeysArity      Reply = "ERR Invalid number of arguments specified for command"
)

// ClusterState is a node's cluster identity and topology. Readers take
// the current view with one atomic load; CLUSTERX and CLUSTER RESET build
// a new view, write it to the state file and only then publish it, under
// mu (a leaf lock: docs/LOCKS.md).
type ClusterState struct {
	path string
	// sealKey authenticates the state file (cluster.Save): the
	// snapshot's, from which the file's own key is derived.
	sealKey []byte
	mu      sync.Mutex
	view    atomic.Pointer[clusterView]
	// mig and imp are the slot this node sends or receives (migrate.go).
	mig atomic.Pointer[migration]
	imp atomic.Pointer[importing]
	// handed and taken are the slots whose migration succeeded here, as
	// source (to the target node) and as target, until a topology push
	// gives them to their new owner (migrate.go, handoffs): copy-on-write
	// maps, written under mu.
	handed atomic.Pointer[map[int]*cluster.Node]
	taken  atomic.Pointer[map[int]string] // the id of the node taken from
	// saved is the state file's bytes as last written (saveLocked), under mu.
	saved []byte
}

// clusterView is one immutable state: the node id, the last topology
// pushed (nil before the first) and its version (-1 before the first).
type clusterView struct {
	id      string
	version int64
	top     *cluster.Topology
	myself  *cluster.Node // nil when this id is not in top
}

func newView(st *cluster.State) *clusterView {
	v := &clusterView{id: st.ID, version: st.Version, top: st.Topology}
	if v.top != nil {
		v.myself = v.top.Find(v.id)
	}
	return v
}

// StartCluster turns cluster mode on when the configuration asks for it:
// the node's id, topology and version are read from the state file in
// dir, or a new id is made and written. The file is authenticated with a
// key derived from the seal key: one the host changed (or sealed under
// another key) stops the start, as a snapshot that fails verification
// does. One of the unsealed layouts an earlier build wrote stops it too,
// unless cluster-config-upgrade says to read it, and is then sealed at
// once.
func (s *App) StartCluster() error {
	if !s.Opts.ClusterEnabled {
		return nil
	}
	if len(s.Snapshot.SealKey) == 0 {
		return errors.New("cluster mode needs a seal key: the state file is sealed with it")
	}
	cs := &ClusterState{path: filepath.Join(s.Opts.Dir, s.Opts.ClusterConfigFile), sealKey: s.Snapshot.SealKey}
	st, legacy, err := cluster.Load(cs.path, cs.sealKey)
	if err != nil {
		return fmt.Errorf("cluster state %s cannot be loaded: %w (a file changed outside the server is refused; "+
			"remove it to start as a new node, which the controller gives its id and topology again)", cs.path, err)
	}
	if legacy && !s.Opts.ClusterConfigUpgrade {
		return fmt.Errorf("cluster state %s is unsealed (written by an earlier build, or by anyone who can write %s): "+
			"start once with --cluster-config-upgrade yes to read it and seal it", cs.path, s.Opts.Dir)
	}
	if st == nil || legacy {
		if st == nil {
			st = &cluster.State{ID: cluster.NewID(), Version: -1}
		}
		if err := cluster.Save(cs.path, cs.sealKey, st); err != nil {
			return fmt.Errorf("cluster state: %w", err)
		}
		if legacy {
			s.Log.Warn("cluster state: the unsealed file of an earlier build was read and sealed", "file", cs.path)
		}
	}
	if s.Opts.ClusterConfigUpgrade && !legacy {
		// Left on, it believes whatever unsealed file the host writes at
		// the next start (review): it is for one start.
		s.Log.Warn("cluster-config-upgrade is set: the next start would believe an unsealed state file anyone who can write the data dir may write; unset it now that the file is sealed", "file", cs.path)
	}
	cs.view.Store(newView(st))
	// The slots handed and taken before a restart, which the topology
	// does not show moved yet.
	handed := map[int]*cluster.Node{}
	for slot, id := range st.Handed {
		if top := cs.view.Load().top; top != nil && top.Find(id) != nil {
			handed[slot] = top.Find(id)
		} else {
			s.Log.Warn("cluster state: a slot handed to a node the topology does not name", "slot", slot, "node", id)
		}
	}
	if len(handed) > 0 {
		cs.handed.Store(&handed)
	}
	if len(st.Taken) > 0 {
		taken := maps.Clone(st.Taken)
		cs.taken.Store(&taken)
	}
	// A slot that was moving when the node stopped: its migration or
	// import is over, and its keys may be on both nodes, as after a
	// failure that split them. A migration to the same node finishes it.
	for slot, id := range st.Migrating {
		if top := cs.view.Load().top; top != nil && top.Find(id) != nil {
			m := &migration{slot: slot, target: top.Find(id)}
			m.state.Store(migFail)
			m.settled.Store(true)
			m.moved.Store(1) // not known: taken as split
			cs.mig.Store(m)
		}
	}
	for slot, id := range st.Importing {
		im := &importing{slot: slot, from: id}
		im.state.Store(migFail)
		im.restored.Store(1) // not known: taken as kept
		cs.imp.Store(im)
	}
	cs.saved = st.Encode(cs.sealKey)
	s.Cluster = cs
	s.Log.Info("cluster mode", "node_id", st.ID, "version", st.Version, "handed", len(handed), "taken", len(st.Taken))
	return nil
}

// update builds, saves and publishes a new view from the current one.
// change returns the new state, or nil for no change.
func (cs *ClusterState) update(change func(cur *clusterView) (*cluster.State, error)) error {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	st, err := change(cs.view.Load())
	if err != nil || st == nil {
		return err
	}
	st = cs.movingState(st.ID, st.Version, st.Topology)
	if err := cluster.Save(cs.path, cs.sealKey, st); err != nil {
		return fmt.Errorf("cluster state not saved: %w", err)
	}
	cs.saved = st.Encode(cs.sealKey)
	cs.view.Store(newView(st))
	return nil
}

// KeyPositions returns the indexes of argv that are keys: those Keys
// finds for commands whose keys move (RedisAI's getkeys-api commands),
// else FirstKey..LastKey by Step.
func (s *Spec) KeyPositions(argv [][]byte) []int {
	if s.Keys != nil {
		return s.Keys(argv)
	}
	if s.FirstKey <= 0 {
		return nil
	}
	last := s.LastKey
	if last < 0 {
		last += len(argv)
	}
	var out []int
	for i := s.FirstKey; i <= last && i < len(argv); i += max(1, s.Step) {
		out = append(out, i)
	}
	return out
}

// route decides whether this node runs a command, before it runs: all of
// its keys must hash to one slot, and that slot must be this node's (or be
// on its way here or from here: routeMigrating).
func (s *App) route(c *Client, spec *Spec, argv [][]byte) error {
	cs := s.Cluster
	pos := spec.KeyPositions(argv)
	if len(pos) == 0 {
		return nil
	}
	slot := cluster.KeySlot(argv[pos[0]])
	for _, p := range pos[1:] {
		if cluster.KeySlot(argv[p]) != slot {
			return errCrossSlot
		}
	}
	v := cs.view.Load()
	if v.top == nil {
		return errKeysNotInit
	}
	owner := v.top.Owner(slot)
	mine := owner != nil && owner.ID == v.id
	if cs.mig.Load() != nil || cs.imp.Load() != nil {
		if err := s.routeMigrating(c, spec, argv, pos, slot, mine); err != errNotHere {
			return err
		}
	}
	if h := cs.handed.Load(); mine && h != nil && (*h)[slot] != nil {
		return Reply("MOVED " + strconv.Itoa(slot) + " " + (*h)[slot].Addr())
	}
	if t := cs.taken.Load(); !mine && t != nil && (*t)[slot] != "" {
		return nil // its keys are here: served until the topology says so
	}
	switch {
	case owner == nil:
		return errSlotNotServed
	case mine:
		return nil
	}
	return Reply("MOVED " + strconv.Itoa(slot) + " " + owner.Addr())
}

// ownsKey reports whether key hashes to a slot this node serves.
func (cs *ClusterState) ownsKey(key string) bool {
	v := cs.view.Load()
	if v.top == nil {
		return false
	}
	owner := v.top.Owner(cluster.KeySlot([]byte(key)))
	return owner != nil && owner.ID == v.id
}

// newModelID is a fresh UUID for a model stored under key "*": in cluster
// mode, one that hashes to a slot this node serves, so that clients routing
// by the returned key find the model here. A node that serves slots finds
// one in a few tries (one in three for a node of three).
func (s *App) newModelID() (string, error) {
	for range 100000 {
		id := uuid.NewString()
		if s.Cluster == nil || s.Cluster.ownsKey(id) {
			return id, nil
		}
	}
	return "", errSlotNotServed
}

func parseClusterFlagCmd(a Args) (Runner, error) {
	asking := isWord(a.V[0], "asking")
	return clusterFlagCmd{asking: asking}, nil
}

// clusterFlagCmd is ASKING, READONLY or READWRITE (asking: it is ASKING).
type clusterFlagCmd struct{ asking bool }

// Run implements Runner.
func (c clusterFlagCmd) Run(x *Ctx) error {
	if x.Cluster == nil {
		return errClusterDisabled
	}
	x.C.asking = c.asking // for the next command only (Dispatch)
	x.W.OK()
	return nil
}

// clusterCmd is CLUSTER INFO | NODES | SLOTS | SHARDS | MYID (the views of
// the topology pushed), KEYSLOT key, COUNTKEYSINSLOT slot, GETKEYSINSLOT
// slot count, RESET [HARD | SOFT] or HELP: slot is KEYSLOT's key's slot or
// the slot argument, n GETKEYSINSLOT's count.
type clusterCmd struct {
	sub  string
	slot int
	n    int64
	hard bool
}

// clusterArity is the argument count of CLUSTER's fixed-arity subcommands.
var clusterArity = map[string]int{"INFO": 0, "NODES": 0, "SLOTS": 0, "SHARDS": 0, "MYID": 0,
	"KEYSLOT": 1, "COUNTKEYSINSLOT": 1, "GETKEYSINSLOT": 2}

func parseCluster(a Args) (Runner, error) {
	sub := strings.ToUpper(string(a.Next()))
	rest := a.Rest()
	if n, ok := clusterArity[sub]; ok && len(rest) != n {
		return nil, subArityOf("cluster", sub)
	}
	c := clusterCmd{sub: sub}
	switch sub {
	case "INFO", "NODES", "SLOTS", "SHARDS", "MYID":
	case "KEYSLOT":
		c.slot = cluster.KeySlot(rest[0])
	case "COUNTKEYSINSLOT", "GETKEYSINSLOT":
		slot, err := parseSlotArg(rest[0])
		if err != nil {
			return nil, err
		}
		c.slot = slot
		if sub == "GETKEYSINSLOT" {
			n, ok := parseInt(rest[1])
			if !ok || n < 0 {
				return nil, Reply("ERR Invalid slot or number of keys")
			}
			c.n = min(n, 1<<30)
		}
	case "RESET":
		if len(rest) > 1 {
			return nil, errorf("ERR unknown subcommand or wrong number of arguments for 'reset'. Try CLUSTER HELP.")
		}
		if len(rest) == 1 {
			switch strings.ToUpper(string(rest[0])) {
			case "HARD":
				c.hard = true
			case "SOFT":
			default:
				return nil, errSyntax
			}
		}
	default:
		return nil, unknownSub("cluster", a.V[1])
	}
	return c, nil
}

// Run implements Runner. KEYSLOT answers in any mode (HELP too: withHelp); the others
// need cluster mode, and the views a topology.
func (c clusterCmd) Run(x *Ctx) error {
	switch c.sub {
	case "KEYSLOT":
		x.W.Int(int64(c.slot))
		return nil
	}
	if x.Cluster == nil {
		return errClusterDisabled
	}
	v := x.Cluster.view.Load()
	switch c.sub {
	case "MYID":
		x.W.BulkString(v.id)
		return nil
	case "COUNTKEYSINSLOT":
		x.W.Int(int64(len(keysInSlot(x.Keys, c.slot, -1))))
		return nil
	case "GETKEYSINSLOT":
		x.W.StringList(keysInSlot(x.Keys, c.slot, int(c.n)))
		return nil
	case "RESET":
		return c.reset(x)
	}
	if v.top == nil {
		return errClusterNotInit
	}
	switch c.sub {
	case "INFO":
		x.W.Verbatim(v.info(x.Cluster.migrationInfo()))
	case "NODES":
		x.W.Verbatim(v.nodes(x.Cluster.openSlots(v)))
	case "SLOTS":
		v.writeSlots(x.W)
	case "SHARDS":
		v.writeShards(x.W)
	}
	return nil
}

// reset is CLUSTER RESET: the topology forgotten, and with HARD the id.
func (c clusterCmd) reset(x *Ctx) error {
	if n, _ := x.Keys.Len(); n > 0 {
		return errResetWithKeys
	}
	err := x.Cluster.update(func(cur *clusterView) (*cluster.State, error) {
		st := &cluster.State{ID: cur.id, Version: -1}
		if c.hard {
			st.ID = cluster.NewID()
		}
		x.Cluster.handed.Store(nil) // under mu, as handoff writes them
		x.Cluster.taken.Store(nil)
		return st, nil
	})
	if err != nil {
		return err
	}
	x.W.OK()
	return nil
}

// parseSlotArg reads a slot argument as Redis does.
func parseSlotArg(b []byte) (int, error) {
	n, ok := parseInt(b)
	if !ok {
		return 0, errNotInteger
	}
	if n < 0 || n >= cluster.Slots {
		return 0, errInvalidSlot
	}
	return int(n), nil
}

// keysInSlot lists up to limit (-1: all) keys of slot, sorted. It walks
// the keyspace: there is no per-slot index yet (docs/CLUSTER.md).
func keysInSlot(k *modelstore.Keyspace, slot, limit int) []string {
	keys := k.SortedKeys(func(it modelstore.Item) bool { return cluster.KeySlot([]byte(it.Key)) == slot })
	if limit >= 0 && len(keys) > limit {
		keys = keys[:limit]
	}
	return keys
}

func parseClusterX(a Args) (Runner, error) {
	sub := strings.ToUpper(string(a.Next()))
	rest := a.Rest()
	wrong := subArityOf("clusterx", sub)
	switch sub {
	case "VERSION":
		if len(rest) != 0 {
			return nil, wrong
		}
		return clusterxVersionCmd{}, nil
	case "SETNODEID":
		if len(rest) != 1 {
			return nil, wrong
		}
		id := string(rest[0])
		if !cluster.ValidID(id) {
			return nil, errInvalidNodeID
		}
		return setNodeIDCmd{id: id}, nil
	case "SETNODES":
		if len(rest) != 2 && len(rest) != 3 {
			return nil, wrong
		}
		force := false
		if len(rest) == 3 {
			if !isWord(rest[2], "FORCE") {
				return nil, errSyntax
			}
			force = true
		}
		version, ok := parseInt(rest[1])
		if !ok || version < 0 {
			return nil, errInvalidVersion
		}
		top, err := cluster.ParseNodes(string(rest[0]))
		if err != nil {
			return nil, Reply("ERR " + strings.ReplaceAll(err.Error(), "\n", " "))
		}
		return setNodesCmd{top: top, version: version, force: force}, nil
	case "MIGRATE", "IMPORT", "RESTORE":
		return parseMigrate(strings.ToLower(sub), a, rest)
	}
	return nil, errorf("ERR unknown subcommand '%s'. Try CLUSTERX SETNODEID, SETNODES, VERSION.", truncate(a.V[1], 128))
}

// setNodesCmd is CLUSTERX SETNODES topology version [FORCE].
type setNodesCmd struct {
	top     *cluster.Topology
	version int64
	force   bool
}

// Run implements Runner.
func (c setNodesCmd) Run(x *Ctx) error {
	if x.Cluster == nil {
		return errClusterDisabled
	}
	err := x.Cluster.update(func(cur *clusterView) (*cluster.State, error) {
		// As kvrocks: an older version is refused and the same
		// one is a no-op, unless FORCE.
		if !c.force && cur.version >= 0 {
			if c.version < cur.version {
				return nil, errInvalidVersion
			}
			if c.version == cur.version {
				return nil, nil
			}
		}
		return &cluster.State{ID: cur.id, Version: c.version, Topology: c.top}, nil
	})
	if err != nil {
		return err
	}
	x.endMigration(x.Cluster.view.Load())
	x.W.OK()
	return nil
}

// setNodeIDCmd is CLUSTERX SETNODEID id.
type setNodeIDCmd struct{ id string }

// Run implements Runner.
func (c setNodeIDCmd) Run(x *Ctx) error {
	if x.Cluster == nil {
		return errClusterDisabled
	}
	err := x.Cluster.update(func(cur *clusterView) (*cluster.State, error) {
		if cur.id == c.id {
			return nil, nil
		}
		return &cluster.State{ID: c.id, Version: cur.version, Topology: cur.top}, nil
	})
	if err != nil {
		return err
	}
	x.W.OK()
	return nil
}

// clusterxVersionCmd is CLUSTERX VERSION.
type clusterxVersionCmd struct{}

// Run implements Runner.
func (clusterxVersionCmd) Run(x *Ctx) error {
	if x.Cluster == nil {
		return errClusterDisabled
	}
	x.W.Int(x.Cluster.view.Load().version)
	return nil
}

// info is CLUSTER INFO, with the fields kvrocks-controller reads: both
// epochs are the last version pushed; migration gives the slot migrating
// or importing (ClusterState.migrationInfo).
func (v *clusterView) info(migration [][2]string) string {
	assigned := v.top.Assigned()
	state := "ok"
	if assigned < cluster.Slots {
		state = "fail"
	}
	size := 0
	for i := range v.top.Nodes {
		if n := &v.top.Nodes[i]; n.Master() && len(v.top.Ranges(n)) > 0 {
			size++
		}
	}
	ver := strconv.FormatInt(v.version, 10)
	var b strings.Builder
	for _, f := range [][2]string{
		{"cluster_state", state},
		{"cluster_slots_assigned", strconv.Itoa(assigned)},
		{"cluster_slots_ok", strconv.Itoa(assigned)},
		{"cluster_slots_pfail", "0"},
		{"cluster_slots_fail", "0"},
		{"cluster_known_nodes", strconv.Itoa(len(v.top.Nodes))},
		{"cluster_size", strconv.Itoa(size)},
		{"cluster_current_epoch", ver},
		{"cluster_my_epoch", ver},
		{"cluster_stats_messages_sent", "0"},
		{"cluster_stats_messages_received", "0"},
		{"total_cluster_links_buffer_limit_exceeded", "0"},
	} {
		b.WriteString(f[0] + ":" + f[1] + "\r\n")
	}
	for _, f := range migration {
		b.WriteString(f[0] + ":" + f[1] + "\r\n")
	}
	return b.String()
}

// nodes is CLUSTER NODES: every node of the topology in pushed order, the
// same on every node but for the myself line, which has the myself flag
// and ends with open, this node's slots on the move (openSlots). The bus
// port is the port plus 10000, as Redis's default; there is no bus.
func (v *clusterView) nodes(open []string) string {
	var b strings.Builder
	ver := strconv.FormatInt(v.version, 10)
	for i := range v.top.Nodes {
		n := &v.top.Nodes[i]
		flags, master := "master", "-"
		if !n.Master() {
			flags, master = "slave", n.MasterID
		}
		if n.ID == v.id {
			flags = "myself," + flags
		}
		b.WriteString(n.ID + " " + n.Addr() + "@" + strconv.Itoa(n.Port+10000) + " " + flags + " " + master +
			" 0 0 " + ver + " connected")
		if n.Master() {
			for _, r := range v.top.Ranges(n) {
				b.WriteString(" " + r.String())
			}
		}
		if n.ID == v.id {
			for _, o := range open {
				b.WriteString(" " + o)
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}

type slotRange struct {
	r    cluster.Range
	node *cluster.Node
}

// ranges lists every owned range in slot order.
func (v *clusterView) ranges() []slotRange {
	var out []slotRange
	for i := range v.top.Nodes {
		n := &v.top.Nodes[i]
		if n.Master() {
			for _, r := range v.top.Ranges(n) {
				out = append(out, slotRange{r, n})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].r.Start < out[j].r.Start })
	return out
}

// writeSlots is CLUSTER SLOTS in Redis 7's shape: per range, start, end,
// then the master and its replicas as [ip, port, id, {}].
func (v *clusterView) writeSlots(w *Writer) {
	rs := v.ranges()
	w.Array(len(rs))
	for _, sr := range rs {
		reps := v.top.Replicas(sr.node)
		w.Array(3 + len(reps))
		w.Int(int64(sr.r.Start))
		w.Int(int64(sr.r.End))
		for _, n := range append([]*cluster.Node{sr.node}, reps...) {
			w.Array(4)
			w.BulkString(n.IP)
			w.Int(int64(n.Port))
			w.BulkString(n.ID)
			w.Map(0)
		}
	}
}

// writeShards is CLUSTER SHARDS in Redis 7's shape: per master, its slots
// as start/end pairs and its nodes, master first.
func (v *clusterView) writeShards(w *Writer) {
	var masters []*cluster.Node
	for i := range v.top.Nodes {
		if v.top.Nodes[i].Master() {
			masters = append(masters, &v.top.Nodes[i])
		}
	}
	w.Array(len(masters))
	for _, m := range masters {
		w.Map(2)
		w.BulkString("slots")
		rs := v.top.Ranges(m)
		w.Array(2 * len(rs))
		for _, r := range rs {
			w.Int(int64(r.Start))
			w.Int(int64(r.End))
		}
		w.BulkString("nodes")
		nodes := append([]*cluster.Node{m}, v.top.Replicas(m)...)
		w.Array(len(nodes))
		for _, n := range nodes {
			role := "master"
			if !n.Master() {
				role = "replica"
			}
			w.Map(7)
			w.BulkString("id")
			w.BulkString(n.ID)
			w.BulkString("port")
			w.Int(int64(n.Port))
			w.BulkString("ip")
			w.BulkString(n.IP)
			w.BulkString("endpoint")
			w.BulkString(n.IP)
			w.BulkString("role")
			w.BulkString(role)
			w.BulkString("replication-offset")
			w.Int(0)
			w.BulkString("health")
			w.BulkString("online")
		}
	}
}

// commandGetKeys is COMMAND GETKEYS: the keys of a command line, found as
// the cluster router finds them.
func commandGetKeys(argv [][]byte) ([]string, error) {
	if len(argv) < 2 { // as Redis 7.0: command|getkeys takes at least 4 arguments
		return nil, subArityOf("command", "getkeys")
	}
	spec := table.Lookup(argv[0])
	if spec == nil {
		return nil, errGetKeysBadCommand
	}
	if (spec.Arity > 0 && len(argv) != spec.Arity) || (spec.Arity < 0 && len(argv) < -spec.Arity) {
		return nil, errGetKeysArity
	}
	pos := spec.KeyPositions(argv)
	if len(pos) == 0 {
		return nil, errGetKeysNoKeys
	}
	out := make([]string, len(pos))
	for i, p := range pos {
		out[i] = string(argv[p])
	}
	return out, nil
}
