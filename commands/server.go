package commands

import (
	"crypto/tls"
	"io"
	"log/slog"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/enclaveai/enclaveai/config"
	"github.com/enclaveai/enclaveai/jwtauth"
	"github.com/enclaveai/enclaveai/modelstore"
	"github.com/enclaveai/enclaveai/persistence"
	"github.com/enclaveai/enclaveai/receipt"
)

// Version is EnclaveAI's version; RedisVersion is the Redis version whose
// protocol and replies it follows (clients read it from HELLO and INFO).
const (
	Version      = "0.1.0"
	RedisVersion = "7.2.0"
)

// App is the application core: the state every command sees (options,
// keyspace, model registry, clients, statistics, the log and snapshots).
// The network front end (package server, whose Server owns the sockets)
// calls Dispatch for each command.
type App struct {
	// stopping counts the final saves under way or done (FinalSave),
	// which refuse writes while it is above 0: a SHUTDOWN's that fails
	// must not let writes go on under a SIGTERM's that runs beside it.
	// Changed under the transaction lock's write side, read under its
	// read side.
	stopping atomic.Int32

	Opts   *config.Options
	Keys   *modelstore.Keyspace
	Models *modelstore.Registry // model blobs and sessions, shared by keys
	AI     *AISettings
	Log    *slog.Logger

	// Queue is the CPU device's run queue; THREADS_PER_QUEUE workers
	// serve it.
	Queue *modelstore.RunQueue

	// uploading is the payload bytes of uploads in flight (upload.go) and
	// of the resumable uploads held (up, upload_session.go).
	uploading atomic.Int64
	up        uploads
	// quota is the bytes each user has claimed against
	// max-model-bytes-per-user for models to come (policy.go).
	quota quota
	// queuedMem is the argument bytes of the commands MULTI holds queued,
	// every client's (Client.multiMem): memory that maxmemory bounds, as
	// Redis counts a transaction's queue in used_memory.
	queuedMem atomic.Int64
	// slow is SLOWLOG's ring, mon the MONITOR clients, latency LATENCY's
	// record (observe.go).
	slow     slowLog
	mon      monitorSet
	latency  latencyEvent
	errStats errorStats // INFO errorstats
	// replID is INFO replication's master_replid, made at start; runID,
	// INFO server's run_id, another.
	replID, runID string
	// opsSamples are (mono ns, commands) pairs Tick takes, for INFO's
	// instantaneous_ops_per_sec, as Redis's 16 samples of its cron.
	opsMu      sync.Mutex
	opsSamples [16][2]int64
	opsNext    int

	// Snapshot is the sealed snapshot's state; the front end sets SealKey.
	Snapshot Snapshotter
	// aofLog is the append-only log, nil with appendonly no (aof.go; aof).
	// It is set once the data is loaded, while clients are served their
	// -LOADING replies and the tick runs: hence atomic.
	aofLog   atomic.Pointer[persistence.Log]
	aofState aofState
	// LogFS is the append-only log's file layer, nil for the OS's; tests
	// make it fail (ENOSPC, EIO, fsync errors).
	LogFS persistence.FS
	// Cluster is the node's cluster state; nil unless cluster-enabled
	// (cluster.go).
	Cluster *ClusterState
	// Enclave is set by the front end at start.
	Enclave EnclaveInfo
	// PeerTLS is how this node connects to another (a slot migration's
	// target) under tls-cluster, set by the front end at start
	// (cluster.PeerTLS); nil: over plain TCP.
	PeerTLS *tls.Config
	// jwt checks tokens; nil without jwt-public-key-file (jwt.go).
	jwt *jwtauth.Verifier
	// refusedTokens spaces the log's "token refused" lines (jwt.go).
	refusedTokens logThrottle
	// receipts signs inference receipts with a key made at start
	// (receipt.go).
	receipts *receipt.Signer
	// attests bounds AI.ATTEST before AUTH (attest-rate; enclave.go).
	attests attestBucket

	tx txLock // transaction lock (package doc, docs/LOCKS.md)

	clientsMu sync.Mutex
	clients   map[int64]*Client
	nextID    atomic.Int64

	started time.Time
	clock   atomic.Int64 // unix ms, refreshed by Tick
	// waiting counts the clients blocked in WAIT or WAITAOF (INFO's
	// blocked_clients, with the runs waiting or running).
	waiting atomic.Int64
	// usedPeak is UsedMemoryPeak's high-water mark.
	usedPeak atomic.Int64
	// wallOffset is the wall clock's unix ns less mono's reading, taken
	// together by NewApp and Tick (setClock, wallMs).
	wallOffset atomic.Int64
	loading    atomic.Bool
	stats      Stats

	// Shutdown is called by SHUTDOWN; set by the front end.
	Shutdown func(save bool) error
}

// Stats are the counters INFO stats shows.
type Stats struct {
	Connections, Rejected, ExpiredKeys, Errors atomic.Int64
	// EvictedKeys counts the models max-models evicted (the keyspace
	// itself evicts nothing: maxmemory-policy is noeviction).
	EvictedKeys atomic.Int64
	// Counted for each command or read and write: striped.
	Commands, NetInput, NetOutput Counter
}

// NewApp builds the command layer over a fresh keyspace.
func NewApp(opts *config.Options, log *slog.Logger) *App {
	s := &App{Opts: opts, Log: log, clients: make(map[int64]*Client), started: time.Now()}
	s.up.m = make(map[string]*uploadSession)
	s.quota.held = make(map[string]int64)
	s.Models = modelstore.NewRegistry(nil)
	rs, err := receipt.NewSigner()
	if err != nil {
		panic("receipt key: " + err.Error()) // crypto/rand does not fail
	}
	s.receipts = rs
	s.replID, s.runID = randomHex(20), randomHex(20)
	s.AI = newAISettings(opts)
	s.Queue = modelstore.NewRunQueue(int(s.AI.ThreadsPerQueue.Load()))
	// Model blobs are accounted once by the registry, however many keys
	// share them, and uploads in progress and queued transactions apart
	// (heldApart): the keyspace's budget is what they leave.
	s.Keys = modelstore.NewKeyspace(func() int64 {
		limit := opts.MaxMemory.Load()
		if limit == 0 {
			return 0
		}
		return max(1, limit-s.Models.Bytes()-s.heldApart())
	})
	s.setClock(time.Now())
	s.Snapshot.lastStatus.Store(true)
	return s
}

// Release lets go of values removed from the keyspace: a model value drops
// its reference to the shared ONNX Runtime session.
func (s *App) Release(vs []modelstore.Value) {
	for _, v := range vs {
		if r, ok := v.(interface{ Release() }); ok {
			r.Release()
		}
	}
}

// Stats returns the server's counters.
func (s *App) Stats() *Stats { return &s.stats }

// Start is the application's start, in two steps around the front end's
// listening. Prepare, before the listener opens: the token keys
// (jwt-public-key-file) and the cluster state; a bad file stops the
// start. Load, once clients may connect (they are answered -LOADING
// meanwhile): the data (the append-only log, or the snapshot) and the
// loadmodel models. Each returns the first real error; the front end stops
// on it.
func (s *App) Prepare() error {
	if err := s.SetupJWT(); err != nil {
		return err
	}
	return s.StartCluster()
}

// Load is the second step of the start (Prepare).
func (s *App) Load() error {
	s.SetLoading(true)
	if err := s.LoadData(); err != nil {
		return err
	}
	// Handoffs the topology already settled end now, with their slots'
	// keys left here: a crash between a push's save and the handoffs'
	// (endMigration) left them in the state file (diff review).
	if s.Cluster != nil {
		if v := s.Cluster.view.Load(); v.top != nil {
			s.endMigration(v)
		}
	}
	if err := s.LoadStartupModels(); err != nil {
		return err
	}
	s.SetLoading(false)
	return nil
}

// SetLoading marks the server as loading a snapshot (-LOADING replies).
func (s *App) SetLoading(on bool) { s.loading.Store(on) }

// Tick runs periodic work: the cached clock, expiry of keys, idle
// resumable uploads and idle clients. The front end calls it about every
// 100 ms.
func (s *App) Tick() {
	now := time.Now()
	s.setClock(now)
	s.UsedMemoryPeak()
	s.sampleOps()
	if expired := s.Keys.SweepExpired(); len(expired) > 0 {
		s.stats.ExpiredKeys.Add(int64(len(expired)))
		s.Release(expired)
	}
	s.expireUploads(now)
	if !s.loading.Load() && s.Snapshot.cur.Load() == nil && s.saveRulesDue(now.Unix()) {
		s.BackgroundSave()
	}
	if s.aof() != nil && !s.loading.Load() {
		s.aofTick(now.UnixMilli())
	}
	if modelstore.Requests()+s.waiting.Load() > 0 {
		s.dropGone(now.UnixMilli())
	}
	if t := s.Opts.Timeout.Load(); t > 0 {
		limit := now.UnixMilli() - t*1000
		for _, c := range s.ClientList() {
			// As Redis, a monitor is never idle.
			if c.lastActive.Load() < limit && !c.busy.Load() && !c.monitor.Load() {
				c.Kill()
			}
		}
	}
}

// goneAfter is how long a client must have been blocked before Tick asks
// whether its peer has gone: most runs end well before it.
const goneAfter = 100 // ms

// hangup is what a client's closer also tells, where it can (the front
// end's sockets): whether the peer has closed its side of the connection.
type hangup interface{ PeerClosed() bool }

// dropGone closes the clients blocked for goneAfter or longer, in a run
// or in WAIT / WAITAOF, whose peer has closed the connection, as Redis
// frees a blocked client once its read finds the end of the stream: the
// run they wait for is withdrawn (Kill), so that it neither holds the
// client's slot and connection nor makes up a batch's MINBATCHSIZE, and
// its outputs are not stored. A client that closed only its sending side
// is closed too, as in Redis, which reads the end of the stream as the
// client's end.
func (s *App) dropGone(now int64) {
	for _, c := range s.ClientList() {
		if at := c.blocked.Load(); at != 0 && at <= now-goneAfter {
			if h, ok := c.closer.(hangup); ok && h.PeerClosed() {
				c.Kill()
			}
		}
	}
}

// setClock refreshes the cached clock and the offset wallMs adds to the
// monotonic clock, from one reading.
func (s *App) setClock(now time.Time) {
	s.clock.Store(now.UnixMilli())
	s.wallOffset.Store(now.UnixNano() - int64(now.Sub(s.started)))
}

// mono is the monotonic clock, in ns since the App started: one clock
// read, where time.Now makes two (the wall clock's and the monotonic's),
// each 30-40 ns on the 2-CPU VM of docs/BENCHMARKS.md, where every
// command reads the clock.
func (s *App) mono() int64 { return int64(time.Since(s.started)) }

// wallMs is a reading of mono as unix ms: the wall clock as of the last
// Tick, moved on by the monotonic clock (a step of the wall clock shows
// within a tick).
func (s *App) wallMs(mono int64) int64 { return (mono + s.wallOffset.Load()) / int64(time.Millisecond) }

// Touch records that c's connection moved bytes: the front end calls it
// after each read from it and each 256 KB written to it, as Redis
// refreshes a client's last interaction on reads and writes, so that
// `timeout` closes only clients that are idle, not one still sending a
// long command or reading a large reply (protocol review: a 30 MB upload
// sent over a slow link was cut after `timeout`, and so was a 64 MB reply
// read at 16 MB/s).
//
// It reads the clock Tick keeps (no clock read on the read path): the
// activity it marks may be a tick old, which closes a client at most a
// tick before its timeout.
func (s *App) Touch(c *Client) { c.lastActive.Store(max(c.lastActive.Load(), s.clock.Load())) }

// Client is one connection's state.
type Client struct {
	ID      int64
	Addr    string
	LAddr   string
	W       *Writer
	created time.Time
	closer  io.Closer

	authed bool
	// authUntil ends a token login: unix ms after which the client is
	// no longer authenticated (0: never; jwt.go).
	authUntil  int64
	multi      queue // commands queued by MULTI
	inMulti    bool
	multiDirty bool // a command failed to queue: EXEC aborts
	// watch is the keys WATCHed: EXEC runs nothing once one has changed.
	watch      modelstore.KeyWatch
	asking     bool      // ASKING: the next command may use an importing slot
	attested   bool      // an AI.ATTEST was answered (enclave.go)
	closeAfter bool      // QUIT: close once the reply is flushed
	reply      replyMode // CLIENT REPLY (setReply)
	// repliesOff is reply == replyOff, for the MONITOR feed, which other
	// clients' goroutines run: a monitor whose replies are off is sent no
	// lines, as in Redis.
	repliesOff atomic.Bool
	// monitor is MONITOR mode (App.mon holds its line channel): no idle
	// timeout, flag O in CLIENT LIST.
	monitor atomic.Bool
	// monOwn is the monitor lines of this monitor's own command, written
	// after its reply (ownMonitorLines); only its goroutine touches it.
	monOwn   [][]byte
	internal bool // the server's own client (loadmodel): no upload policy

	// upload is the running command's payload buffer (DispatchUpload);
	// payload is an AI.MODELSTORE's Upload, whose claim against
	// max-model-bytes-per-user (Upload.Admit) the store hands back as the
	// model is stored, and whose maxmemory reservation (Upload.Reserve)
	// the model's blob takes over (compileModel).
	upload  *modelstore.ModelBuffer
	payload *Upload
	// ctx is the running command's Ctx (Dispatch): one per client rather
	// than one allocated per command. No Runner keeps its Ctx past Run.
	ctx Ctx
	// scratch holds the running command's parsed form (Args.scratch).
	scratch scratch

	// logSeq is the log record the replies in W since offset logMark wait
	// for (0: none); logReplies counts those replies (aof.go, CommitClient).
	logSeq uint64
	// woff is the log record of the client's last write, committed or not:
	// WAITAOF waits until it is fsynced.
	woff       uint64
	logMark    int
	logReplies int

	lastActive atomic.Int64           // unix ms
	busy       atomic.Bool            // a command is running
	lastCmd    atomic.Pointer[string] // CLIENT LIST's cmd (Spec.lastName)
	killed     atomic.Bool
	// killMu orders Kill against the keyspace update of a command that ran
	// outside the transaction lock (Ctx.Update): the update lands before
	// Kill returns, or not at all.
	killMu sync.Mutex
	// killCh closes when Kill is first called: the run queue withdraws
	// the client's request (RunRequest.Cancel), which would otherwise keep
	// its connection open until it ran, and a batch waiting for
	// MINBATCHSIZE would count its rows.
	killCh chan struct{}
	// blocked is when (unix ms, Tick's clock) the client began to wait
	// for a run or in WAIT / WAITAOF, 0 when it does not: Tick closes a
	// client blocked that long whose peer has gone (dropGone).
	blocked atomic.Int64
	proto   atomic.Int32 // mirror of W.proto for CLIENT LIST
	// qbuf and qbufFree are the front end's input buffer as it last
	// reported it, before or after a read (SetQueryBuf), for CLIENT LIST;
	// rbs the reply buffer's size as of its last command's start or its
	// last rest (SetReplyBuf).
	qbuf, qbufFree, rbs atomic.Int32
	// omem is the size of the reply a write in progress was given (0
	// between writes; SetPending): what a client that does not read
	// leaves waiting, Redis's omem.
	omem atomic.Int64
	// multiLen and multiMem mirror multi for CLIENT LIST: its length (-1
	// outside MULTI) and its commands' argument bytes (enqueue), which
	// App.queuedMem counts too.
	multiLen atomic.Int32
	multiMem atomic.Int64

	mu      sync.Mutex // guards the fields below, read by CLIENT LIST
	user    string     // who authenticated ("default" until AUTH)
	name    string
	libName string
	libVer  string
}

type queued struct {
	spec   *Spec
	runner Runner
	err    error
	up     *modelstore.ModelBuffer // a queued upload's buffer, referenced
	argv   [][]byte                // its arguments (detached), for MONITOR when EXEC runs it
}

// writes reports whether q is a write: EXEC with it waits for no
// shutdown and is refused under MISCONF.
func (q queued) writes() bool { return q.spec.Has(Write) }

// SetQueryBuf records c's input buffer for CLIENT LIST: the bytes read and
// not yet parsed, and the room left after them (0, 0: it holds none).
func (c *Client) SetQueryBuf(used, free int) {
	c.qbuf.Store(int32(used))
	c.qbufFree.Store(int32(free))
}

// SetReplyBuf records the size of c's reply buffer for CLIENT LIST (0:
// it holds none).
func (c *Client) SetReplyBuf(size int) { c.rbs.Store(int32(size)) }

// SetPending records the size of the reply being written to c, for CLIENT
// LIST (0 once written).
func (c *Client) SetPending(n int64) { c.omem.Store(n) }

// startMulti enters MULTI with an empty queue.
func (c *Client) startMulti() {
	c.inMulti, c.multi, c.multiDirty = true, nil, false
	c.multiLen.Store(0)
}

// enqueue adds a command to c's MULTI queue, counting the bytes of its
// arguments (an upload's chunks included) as its memory.
func (s *App) enqueue(c *Client, q queued) {
	var mem int64
	for _, v := range q.argv {
		mem += int64(len(v))
	}
	c.multi = append(c.multi, q)
	c.multiLen.Store(int32(len(c.multi)))
	c.multiMem.Add(mem)
	s.queuedMem.Add(mem)
}

// endMulti leaves MULTI and returns what was queued, its memory no longer
// counted (EXEC's commands are about to store what they hold); the caller
// drops it with release once done with it.
func (s *App) endMulti(c *Client) queue {
	q := c.multi
	c.inMulti, c.multi, c.multiDirty = false, nil, false
	c.asking = false // it held for the whole transaction (check), and ends with it
	c.multiLen.Store(-1)
	s.queuedMem.Add(-c.multiMem.Swap(0))
	s.unwatch(c)
	return q
}

// unwatch forgets the keys c WATCHed (EXEC, DISCARD, UNWATCH, RESET and a
// closed connection do, as in Redis).
func (s *App) unwatch(c *Client) {
	if c.watch.Watching() {
		s.Keys.Unwatch(&c.watch)
	}
}

// queue is the commands MULTI queued.
type queue []queued

// release drops the upload buffers the queued commands hold.
func (q queue) release() {
	for _, cmd := range q {
		if cmd.up != nil {
			cmd.up.Unref()
		}
	}
}

// NewClient registers a connection. closer is closed by CLIENT KILL.
func (s *App) NewClient(addr, laddr string, closer io.Closer) *Client {
	c := &Client{ID: s.nextID.Add(1), Addr: addr, LAddr: laddr, W: NewWriter(),
		created: time.Now(), closer: closer, killCh: make(chan struct{})}
	c.authed = *s.Opts.Requirepass.Load() == ""
	c.user = "default"
	c.proto.Store(2)
	c.multiLen.Store(-1)
	c.lastActive.Store(time.Now().UnixMilli())
	s.clientsMu.Lock()
	s.clients[c.ID] = c
	s.clientsMu.Unlock()
	s.stats.Connections.Add(1)
	return c
}

// RemoveClient unregisters a closed connection.
func (s *App) RemoveClient(c *Client) {
	s.endMulti(c).release()
	s.stopMonitor(c)
	s.clientsMu.Lock()
	delete(s.clients, c.ID)
	s.clientsMu.Unlock()
}

// ClientList returns the connected clients in id order.
func (s *App) ClientList() []*Client {
	s.clientsMu.Lock()
	out := make([]*Client, 0, len(s.clients))
	for _, c := range s.clients {
		out = append(out, c)
	}
	s.clientsMu.Unlock()
	sortClients(out)
	return out
}

// NumClients is the number of connected clients.
func (s *App) NumClients() int {
	s.clientsMu.Lock()
	defer s.clientsMu.Unlock()
	return len(s.clients)
}

func sortClients(cs []*Client) {
	sort.Slice(cs, func(i, j int) bool { return cs[i].ID < cs[j].ID })
}

// setProto switches the client's protocol version.
func (c *Client) setProto(p int) {
	c.W.proto = p
	c.proto.Store(int32(p))
}

// Kill closes the client's connection; its goroutine then ends. A
// command of the client's still running (a model compiling) changes no key
// once Kill has returned (Ctx.Update), as in Redis, where a client is
// killed between commands.
func (c *Client) Kill() {
	c.killMu.Lock()
	first := c.killed.CompareAndSwap(false, true)
	c.killMu.Unlock()
	if first && c.killCh != nil {
		close(c.killCh) // a run it waits for in the queue is withdrawn
	}
	if first && c.closer != nil {
		c.closer.Close()
	}
}

// Authed reports whether the client may run commands that need auth.
func (c *Client) Authed() bool { return c.authedAt(time.Now().UnixMilli()) }

// authedAt is Authed at unix ms now: a token login lapses at its expiry.
func (c *Client) authedAt(now int64) bool {
	return c.authed && (c.authUntil == 0 || now < c.authUntil)
}

// User is the user the client authenticated as ("default" without AUTH).
func (c *Client) User() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.user
}

// login records a successful authentication.
func (c *Client) login(l login) {
	c.authed, c.authUntil = true, 0
	if !l.expires.IsZero() {
		c.authUntil = l.expires.UnixMilli()
	}
	c.mu.Lock()
	c.user = l.user
	c.mu.Unlock()
}

// CloseAfterReply reports whether the connection should close after
// flushing (QUIT).
func (c *Client) CloseAfterReply() bool { return c.closeAfter }

// Ctx is what a Runner sees: the server and the calling client.
type Ctx struct {
	*App
	C *Client
	W *Writer
	// locked is true when the command already runs under App.tx.
	locked bool
	// spec and argv are the command's, for fenced: under App.tx a write
	// to a migrating slot is refused while its migration closes, and a
	// read is routed again (migrate.go).
	spec   *Spec
	argv   [][]byte
	runner Runner
}

// Update runs f under the transaction lock's read side when the command
// runs outside it (NoTxLock commands), so that keyspace updates made after
// long work cannot interleave with a transaction.
func (x *Ctx) Update(f func() error) error {
	if x.locked {
		return f()
	}
	x.tx.RLock(x.C)
	defer x.tx.RUnlock(x.C)
	if err := x.fenced(); err != nil {
		return err
	}
	if x.stopping.Load() > 0 {
		return errShuttingDown
	}
	// A client killed while its command compiled or ran (CLIENT KILL)
	// leaves the keyspace as Kill found it.
	x.C.killMu.Lock()
	defer x.C.killMu.Unlock()
	if x.C.killed.Load() {
		return errKilled
	}
	return f()
}

// view runs f under the transaction lock's read side when the command
// runs outside it (NoTxLock), so that what f reads of the keyspace in
// several steps (a DAG's LOADed keys and models, a run's model and
// inputs) is read as one, never in the middle of a transaction: RedisAI
// reads them on Redis's one thread.
func (x *Ctx) view(f func() error) error {
	if x.locked {
		return f()
	}
	x.tx.RLock(x.C)
	defer x.tx.RUnlock(x.C)
	return f()
}

// errKilled ends a killed client's command; the client never reads it.
var errKilled = Reply("ERR the client was killed while the command ran")

// Limits the front end applies while reading a command, before allocating
// (server.Limits adds how the front end reads a model's chunks).
type Limits struct {
	MaxArgs  int64 // multibulk length
	MaxBulk  int64 // one argument (proto-max-bulk-len)
	MaxQuery int64 // all arguments of one command (client-query-buffer-limit)
	// Unauth marks the limits of a client that has not authenticated:
	// refusals then say so, in Redis's words.
	Unauth bool
}

// Redis's limits for clients that have not authenticated (CVE-2021-32675).
const (
	unauthMaxArgs = 10
	unauthMaxBulk = 16 << 10
)

// PreLimits bound a command before its name is read.
func (s *App) PreLimits(c *Client) Limits {
	// The cached clock (Tick's): read for every command, and twice, the
	// real one cost 3% of a pipelined TENSORSET's CPU. A token that lapsed
	// within the last tick gets one more command read with the limits of
	// the authenticated; Dispatch, on the monotonic clock moved to wall
	// time (wallMs), refuses it NOAUTH.
	if !c.authedAt(s.clock.Load()) {
		return Limits{MaxArgs: unauthMaxArgs, MaxBulk: unauthMaxBulk, MaxQuery: unauthMaxArgs * unauthMaxBulk, Unauth: true}
	}
	return Limits{MaxArgs: 1 << 30, MaxBulk: s.Opts.ProtoMaxBulkLen.Load(), MaxQuery: s.Opts.ClientQueryBufferLimit.Load()}
}

// CommandLimits bound the rest of a command once its name is known. The
// payload of a Big command (Spec.Payload: a model's BLOB chunks) is not
// bounded by client-query-buffer-limit but by Upload.Admit and
// Upload.Reserve, which the front end asks as each chunk's length arrives;
// the rest of it is.
func (s *App) CommandLimits(c *Client, spec *Spec) Limits {
	return s.PreLimits(c)
}

// Dispatch runs one command and appends its reply to c.W. It enforces, in
// Redis's order: known command, arity, authentication, MULTI queueing,
// loading, maxmemory, then parse and run under the right lock.
func (s *App) Dispatch(c *Client, argv [][]byte, owned Ownership) {
	s.dispatch(c, nil, argv, owned)
}

// dispatch is Dispatch with the command's table entry, when the caller
// has looked it up (nil: look it up).
func (s *App) dispatch(c *Client, spec *Spec, argv [][]byte, owned Ownership) {
	if c.killed.Load() {
		// CLIENT KILL returned: what the client had pipelined is not run
		// (Redis frees a killed client with its unread commands).
		return
	}
	if c.reply == replyOn {
		s.dispatchOne(c, spec, argv, owned)
	} else {
		s.dispatchSilent(c, spec, argv, owned)
	}
	if c.monOwn != nil {
		c.ownMonitorLines()
	}
	c.replied()
}

// ownMonitorLines appends the monitor lines of a monitor's own commands
// (feedMonitors) after the command's reply, a whole EXEC's included, unless
// CLIENT REPLY drops the reply: as Redis, whose CLIENT REPLY SKIP has its
// own line sent and the skipped command's dropped.
func (c *Client) ownMonitorLines() {
	if c.reply == replyOn || c.reply == replySkipNext {
		for _, l := range c.monOwn {
			c.W.Simple(string(l))
		}
	}
	c.monOwn = nil
}

// replied moves CLIENT REPLY's state past one command: a skipped reply
// was this one, and SKIP's own command skips the next.
func (c *Client) replied() {
	// Never to or from replyOff: repliesOff stays as setReply left it.
	switch c.reply {
	case replySkipThis:
		c.reply = replyOn
	case replySkipNext:
		c.reply = replySkipThis
	}
}

// setReply sets CLIENT REPLY's state (CLIENT REPLY, RESET).
func (c *Client) setReply(m replyMode) {
	c.reply = m
	c.repliesOff.Store(m == replyOff)
}

// replyMode is CLIENT REPLY's state of a client.
type replyMode uint8

const (
	replyOn       replyMode = iota
	replyOff                // CLIENT REPLY OFF: no replies until CLIENT REPLY ON (or RESET)
	replySkipNext           // CLIENT REPLY SKIP is running: the next command is skipped
	replySkipThis           // this command's reply is dropped
)

// dispatchSilent runs a command whose reply CLIENT REPLY drops, as Redis
// does: the command runs and nothing of its reply is sent, unless it is
// CLIENT REPLY ON or RESET, which turn replies back on and answer.
func (s *App) dispatchSilent(c *Client, spec *Spec, argv [][]byte, owned Ownership) {
	// Before a read, the replies before it are made final (a failed log
	// commit rewrites them: CommitClient), so that what follows mark is
	// this command's alone (run would commit before a read anyway, which
	// may stream its reply). A write leaves them pending: a pipeline of
	// writes with replies off (a bulk load) is committed once, as with
	// replies on, not once a command.
	if spec == nil {
		spec = table.Lookup(argv[0])
	}
	if spec == nil || !spec.Has(Write|txControl) {
		s.CommitClient(c)
	}
	pending := c.logSeq != 0
	w := c.W
	mark := w.Len()
	stream := w.stream
	if stream != nil {
		// A streamed reply (a large AI.MODELGET) sends the replies before
		// it and drops its own.
		w.stream = func(bufs ...[]byte) error {
			var err error
			if mark > 0 {
				err = stream(bufs[0][:mark])
				mark = 0
			}
			return err
		}
	}
	s.dispatchOne(c, spec, argv, owned)
	w.stream = stream
	if c.reply == replyOn {
		return
	}
	w.truncate(min(mark, w.Len()))
	switch {
	case c.logSeq == 0:
	case !pending:
		// Its own record started the pending ones: replies after it wait
		// for it, but it has none of its own.
		c.logMark, c.logReplies = w.Len(), 0
	default:
		// Its reply, counted among those waiting, is gone.
		c.logReplies--
	}
}

// dispatchOne runs one command (dispatch) and appends its reply to c.W.
func (s *App) dispatchOne(c *Client, spec *Spec, argv [][]byte, owned Ownership) {
	if c.logSeq != 0 {
		c.logReplies++ // this command's reply follows an uncommitted write's
	}
	// Not the cached clock: it may lag by a tick, and Tick would then close
	// a client before it has been idle for the whole timeout. The same
	// reading, of the monotonic clock alone, starts the command's duration
	// (one clock read, not three: they were 4% of a pipelined TENSORSET's
	// CPU, and 37% of BenchmarkTensorGet's when time.Now read two clocks).
	start := s.mono()
	now := s.wallMs(start)
	c.lastActive.Store(now)
	if spec == nil {
		spec = table.Lookup(argv[0])
	}
	if err := s.check(c, spec, argv, now); err != nil {
		if spec != nil {
			spec.stats.of(c).rejected.Add(1)
		}
		if spec != nil && spec.Name == "exec" {
			// As Redis: a refused EXEC ends the transaction, and says why.
			s.endMulti(c).release() // and unwatches, as Redis's discardTransaction
			s.replyError(c.W, errorf("EXECABORT Transaction discarded because of: %s", strings.TrimPrefix(errorText(err), "ERR ")))
			return
		}
		s.refuse(c, err)
		return
	}
	c.lastCmd.Store(spec.lastName(argv))
	a := NewArgs(argv, owned)
	a.upload = c.upload
	a.scratch = &c.scratch
	if c.inMulti && !spec.Has(txControl) {
		// As in Redis, only an unknown command or a wrong arity (checked
		// above) or the same of a subcommand (tableError) aborts the
		// transaction; any other error is queued and becomes that
		// command's reply inside EXEC's array.
		a = a.Detach()
		var r Runner
		var err error
		switch {
		case spec.Has(Blocking) && isAI(spec):
			// RedisAI refuses its blocking commands in a transaction
			// before it reads their arguments (EXEC answered a queued
			// one's arity or syntax error instead).
			err = errInMulti
		case badArity(spec, argv):
			err = arityError(spec) // a RedisAI command's (check)
		default:
			r, err = spec.Parse(a)
		}
		if err == nil && spec.Has(Blocking) {
			err = blockingInExec(spec)
		}
		if _, ok := err.(tableError); ok {
			// An unknown subcommand or its wrong count aborts too.
			spec.stats.of(c).rejected.Add(1)
			s.refuse(c, err)
			return
		}
		var up *modelstore.ModelBuffer
		if err != nil {
			r = nil
		} else if a.upload != nil {
			// The queued command keeps the upload's chunks where they are
			// until EXEC or DISCARD, rather than a copy of them.
			up = a.upload
			up.Ref()
		}
		s.enqueue(c, queued{spec: spec, runner: r, err: err, up: up, argv: a.V})
		c.W.Simple("QUEUED")
		return
	}
	r, err := spec.Parse(a)
	if err != nil {
		s.replyError(c.W, err)
		if _, ok := err.(tableError); ok {
			// A refusal Redis makes from its command table: rejected,
			// and not shown.
			spec.stats.of(c).rejected.Add(1)
			return
		}
		// Redis checks other arguments as the command runs: a call that
		// failed, shown to the monitors and timed for the slow log
		// (protocol review: EXPIRE k abc counted rejected_calls).
		s.feedMonitors(c, spec, argv)
		s.recordRun(c, spec, argv, time.Duration(s.mono()-start), true)
		return
	}
	c.ctx = Ctx{App: s, C: c, W: c.W, spec: spec, argv: argv, runner: r}
	err = s.run(&c.ctx, spec, r)
	// As Redis, a command goes to the monitors once it has run (RESET's
	// own is not sent to the monitor it ends), a queued one when EXEC
	// runs it, a discarded one never. From here on an AI.TENSORSET's blob
	// is the stored tensor's buffer, which another client's AI.TENSORSET
	// may already have recycled with other bytes (modelstore/tensorbuf.go):
	// the monitors and the slow log read its length only (slowArgs).
	s.feedMonitors(c, spec, argv)
	// The parsed command may hold its arguments (a blob): let them go.
	c.scratch = scratch{}
	s.recordRun(c, spec, argv, time.Duration(s.mono()-start), err != nil)
}

// refuse answers a command refused before it runs or queues; inside MULTI
// the refusal aborts the transaction (EXEC answers EXECABORT).
func (s *App) refuse(c *Client, err error) {
	if c.inMulti {
		c.multiDirty = true
	}
	s.replyError(c.W, err)
}

// txControl marks MULTI, EXEC, DISCARD, QUIT, RESET: run at once inside a
// transaction instead of being queued.
const txControl = Flag(1 << 31)

// badArity reports whether argv has a number of arguments spec refuses.
func badArity(spec *Spec, argv [][]byte) bool {
	return (spec.Arity > 0 && len(argv) != spec.Arity) || (spec.Arity < 0 && len(argv) < -spec.Arity)
}

func arityError(spec *Spec) error {
	return errorf("ERR wrong number of arguments for '%s' command", spec.Name)
}

// isAI reports whether spec is one of RedisAI's commands.
func isAI(spec *Spec) bool { return strings.HasPrefix(spec.Name, "ai.") }

// adminCommand reports whether argv is an administrative command (Admin,
// or one of the spec's AdminSubs), and its name as Redis's NOPERM error
// gives it (client|kill).
func adminCommand(spec *Spec, argv [][]byte) (string, bool) {
	if spec.Has(Admin) {
		return spec.Name, true
	}
	if len(spec.AdminSubs) > 0 && len(argv) > 1 {
		// As the parsers read it (strings.ToUpper: "kıll" is KILL, which
		// EqualFold alone does not see), and as EqualFold does.
		arg := string(argv[1])
		upper := strings.ToUpper(arg)
		for _, sub := range spec.AdminSubs {
			if upper == sub || strings.EqualFold(arg, sub) {
				return spec.Name + "|" + strings.ToLower(sub), true
			}
		}
	}
	return "", false
}

// checkAdmin refuses an administrative command (adminCommand) to a user
// without +@admin, when users are enabled: at dispatch, and before a
// payload's bytes are read (StartUpload).
func (s *App) checkAdmin(c *Client, spec *Spec, argv [][]byte) error {
	if !s.Opts.UsersEnabled() {
		return nil
	}
	if name, ok := adminCommand(spec, argv); ok && !s.isAdmin(c) {
		return errorf("NOPERM User %s has no permissions to run the '%s' command", c.User(), name)
	}
	return nil
}

// isAdmin reports whether c's user may run administrative commands: the
// default user, and named users given +@admin (a token's user only when a
// user directive of its name gives it +@admin).
func (s *App) isAdmin(c *Client) bool {
	user := c.User()
	if user == "default" {
		return true
	}
	u := s.Opts.Users[user]
	return u != nil && u.Admin
}

// blockingInExec is the reply inside EXEC of a Blocking command queued in
// a transaction: RedisAI's text for its commands, Redis's for MONITOR.
func blockingInExec(spec *Spec) error {
	if spec.Name == "monitor" {
		return errMonitorInTx
	}
	return errInMulti
}

func (s *App) check(c *Client, spec *Spec, argv [][]byte, now int64) error {
	if spec == nil {
		// Redis's text: the arguments quoted until 128 bytes of them are
		// shown, each cut to what is left of the 128.
		var b strings.Builder
		for _, a := range argv[1:] {
			if b.Len() >= 128 {
				break
			}
			n := 128 - b.Len()
			b.WriteString("'")
			b.Write(truncate(a, n))
			b.WriteString("' ")
		}
		return errorf("ERR unknown command '%s', with args beginning with: %s", truncate(argv[0], 128), b.String())
	}
	// RedisAI registers its commands with arity -1 and checks the count
	// itself, when the command runs: inside MULTI a wrong count is queued
	// and answered in EXEC's array (dispatch), and aborts nothing.
	if badArity(spec, argv) && !(c.inMulti && isAI(spec)) {
		return arityError(spec)
	}
	if !spec.Has(NoAuth) && !c.authedAt(now) {
		return errNoAuth
	}
	if err := s.checkAdmin(c, spec, argv); err != nil {
		return err
	}
	// Redis Cluster's redirections come before anything runs; the
	// server's own client (startup models, the log's replay) is exempt.
	if s.Cluster != nil && !c.internal {
		err := s.route(c, spec, argv)
		if !spec.Has(txControl) && spec.Name != "asking" && !c.inMulti {
			// ASKING is for the one command after it, or, as in Redis,
			// for a whole transaction: EXEC ends it (go-redis's
			// TxPipelined sends ASKING, MULTI, ..., EXEC).
			c.asking = false
		}
		if err != nil {
			return err
		}
	}
	if s.loading.Load() && !spec.Has(LoadingOK) {
		return errLoading
	}
	// As Redis's MISCONF: while the log or the snapshot cannot be written,
	// writes are refused and reads go on. So is an EXEC whose queue holds
	// a write, before any of it runs (durability review: the queued writes
	// changed memory, and their replies became MISCONF).
	if spec.Has(Write) || spec.Name == "exec" && slices.ContainsFunc(c.multi, queued.writes) {
		if err := s.persistErr(); err != nil {
			return err
		}
	}
	// Over maxmemory a deny-oom command is refused, and inside MULTI that
	// refusal aborts the transaction (EXECABORT), as in Redis. As in
	// Redis too, inside MULTI any command that would be queued is: what a
	// queue holds is memory (resource review: 150 queued 10 MB ECHOs held
	// 1.5 GB under maxmemory 200mb, and every other client's writes got
	// -OOM).
	queuing := c.inMulti && !spec.Has(txControl)
	if spec.Has(DenyOOM) || queuing {
		if max := s.Opts.MaxMemory.Load(); max > 0 && s.UsedMemory() > max {
			return modelstore.ErrOOM
		}
	}
	if c.inMulti && spec.Has(NoMulti) {
		return errNoMulti
	}
	return nil
}

// truncate cuts an argument quoted in an error text to n bytes (Redis's
// %.128s); quotes are left as they are, as Redis does.
func truncate(b []byte, n int) []byte {
	if len(b) > n {
		b = b[:n]
	}
	return b
}

// logWriter is a parsed command of a family not flagged Write that writes
// to the log all the same (CLUSTERX RESTORE): its reply waits for the log
// as a write's does.
type logWriter interface{ writesLog() bool }

func writesLog(r Runner) bool {
	w, ok := r.(logWriter)
	return ok && w.writesLog()
}

// run executes a parsed command under the lock its flags ask for (none
// for NoTxLock), answers its error if it fails, and returns that error;
// a command that wrote to the append-only log marks the client, so that
// its reply waits for the log's commit (CommitClient).
func (s *App) run(x *Ctx, spec *Spec, r Runner) error {
	x.C.busy.Store(true)
	defer x.C.busy.Store(false)
	var err error
	var seq uint64
	mark := x.W.Len()
	aof := s.aof()
	logged := aof != nil && (spec.Has(Write|txControl) || writesLog(r))
	switch {
	case logged:
		seq = aof.Seq()
	case aof != nil && x.C.logSeq != 0:
		// A read may stream its reply, and the writes' replies before it
		// with it: their records go first. Its own reply, counted by
		// Dispatch, is not written yet.
		x.C.logReplies--
		s.CommitClient(x.C)
		mark = x.W.Len()
	}
	if spec.Has(NoTxLock) {
		err = r.Run(x)
	} else {
		s.tx.RLock(x.C)
		x.locked = true
		if err = x.fenced(); err == nil {
			if spec.Has(Write) && s.stopping.Load() > 0 {
				err = errShuttingDown
			} else {
				err = r.Run(x)
			}
		}
		s.tx.RUnlock(x.C)
	}
	if err != nil {
		s.replyError(x.W, x.movedOut(err))
	}
	// What a write changed must be in the log before its reply leaves
	// (EXEC's queued writes included): CommitClient, before the front end
	// sends the replies, commits once for all the pipelined commands.
	if logged {
		if now := aof.Seq(); now != seq {
			if x.C.logSeq == 0 {
				x.C.logMark, x.C.logReplies = mark, 1
			}
			x.C.logSeq, x.C.woff = now, now
		}
	}
	return err
}

func (s *App) replyError(w *Writer, err error) {
	s.stats.Errors.Add(1)
	text := errorText(err)
	s.errStats.count(text)
	w.Error(text)
}

// clientInfo formats one CLIENT LIST line.
func (s *App) clientInfo(c *Client) string {
	c.mu.Lock()
	name, lib, ver, user := c.name, c.libName, c.libVer, c.user
	c.mu.Unlock()
	cmd := "NULL"
	if name := c.lastCmd.Load(); name != nil {
		cmd = *name
	}
	// The buffers the connection holds; tot-mem is their sum (Redis's adds
	// the client's own structures).
	qbuf, qfree, rbs := int(c.qbuf.Load()), int(c.qbufFree.Load()), int(c.rbs.Load())
	// A reply being written is one block (oll 1) of omem bytes, in the
	// reply buffer (rbs) or where a streamed chunk lies: tot-mem does not
	// count it again. There is no fixed buffer apart from it (obl 0).
	omem, oll := c.omem.Load(), 0
	if omem > 0 {
		oll = 1
	}
	// A transaction's queue: its length (-1 outside MULTI, flag x inside)
	// and its arguments' bytes.
	multi, mmem, flags := int(c.multiLen.Load()), c.multiMem.Load(), ""
	if c.monitor.Load() {
		flags += "O"
	}
	if multi >= 0 {
		flags += "x"
	}
	if flags == "" {
		flags = "N"
	}
	now := time.Now()
	idle := (s.clock.Load() - c.lastActive.Load()) / 1000
	if idle < 0 {
		idle = 0
	}
	return "id=" + strconv.FormatInt(c.ID, 10) + " addr=" + c.Addr + " laddr=" + c.LAddr +
		" fd=0 name=" + name + " age=" + strconv.FormatInt(int64(now.Sub(c.created).Seconds()), 10) +
		" idle=" + strconv.FormatInt(idle, 10) + " flags=" + flags + " db=0 sub=0 psub=0 ssub=0 multi=" + strconv.Itoa(multi) +
		" qbuf=" + strconv.Itoa(qbuf) + " qbuf-free=" + strconv.Itoa(qfree) + " argv-mem=0 multi-mem=" + strconv.FormatInt(mmem, 10) + " rbs=" + strconv.Itoa(rbs) +
		" rbp=0 obl=0 oll=" + strconv.Itoa(oll) + " omem=" + strconv.FormatInt(omem, 10) + " tot-mem=" + strconv.FormatInt(int64(qbuf+qfree+rbs)+mmem, 10) + " events=r cmd=" + cmd +
		" user=" + user + " redir=-1 resp=" + strconv.Itoa(int(c.proto.Load())) + " lib-name=" + lib + " lib-ver=" + ver
}

// UsedMemory is the memory accounted to keys, values and model blobs, and
// held apart from them (heldApart): the uploads in progress and the
// commands that transactions hold queued.
func (s *App) UsedMemory() int64 { return s.Keys.Used() + s.Models.Bytes() + s.heldApart() }

// sampleOps records the commands run so far, for opsPerSec.
func (s *App) sampleOps() {
	s.opsMu.Lock()
	s.opsSamples[s.opsNext%len(s.opsSamples)] = [2]int64{s.mono(), s.stats.Commands.Load()}
	s.opsNext++
	s.opsMu.Unlock()
}

// opsPerSec is the commands a second over Tick's last 16 samples (about
// 1.6 s), as Redis's instantaneous_ops_per_sec.
func (s *App) opsPerSec() int64 {
	s.opsMu.Lock()
	defer s.opsMu.Unlock()
	n := min(s.opsNext, len(s.opsSamples))
	if n < 2 {
		return 0
	}
	last := s.opsSamples[(s.opsNext-1)%len(s.opsSamples)]
	first := s.opsSamples[(s.opsNext-n)%len(s.opsSamples)]
	if last[0] <= first[0] {
		return 0
	}
	return max(0, (last[1]-first[1])*1e9/(last[0]-first[0])) // CONFIG RESETSTAT between: 0
}

// UsedMemoryPeak is the highest UsedMemory seen, by Tick (every 100 ms)
// or an INFO, as Redis samples its peak in serverCron.
func (s *App) UsedMemoryPeak() int64 {
	cur := s.UsedMemory()
	for {
		p := s.usedPeak.Load()
		if cur <= p || s.usedPeak.CompareAndSwap(p, cur) {
			return max(p, cur)
		}
	}
}

// fits reports ErrOOM when n more bytes would pass maxmemory: the check
// before memory a command makes from nothing (a zero tensor, a model's
// output) is allocated.
func (s *App) fits(n int64) error {
	if max := s.Opts.MaxMemory.Load(); max > 0 && s.UsedMemory()+n > max {
		return modelstore.ErrOOM
	}
	return nil
}

// ReplyError answers c with err's RESP error text.
func (s *App) ReplyError(c *Client, err error) {
	// A refusal stands for the command it refuses: CLIENT REPLY may drop
	// it, and a SKIP is spent on it.
	mark := c.W.Len()
	s.replyError(c.W, err) // counted even when dropped, as Redis counts it
	if c.reply != replyOn {
		c.W.truncate(mark)
	}
	c.replied()
}
