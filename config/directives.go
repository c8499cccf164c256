package config

import (
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
)

// directive is one configuration directive. The table below is the single
// source of every directive: Default applies each default through its
// setter, Load and CONFIG SET go through the setters, CONFIG GET through
// the getters, and `--help`, enclaveai.conf.example and the README's
// configuration table are written from the names, defaults and docs.
type directive struct {
	name    string
	def     string // the default, as a configuration file writes it (sizes in Redis units)
	doc     string // what it means (--help, the example file, the README)
	args    string // placeholder of the value where there is no default to show
	mutable bool   // CONFIG SET may change it at run time
	multi   bool   // may repeat, takes all the line's arguments (loadmodel, user); no default
	joined  bool   // takes all the line's arguments joined by spaces, and its lines add up (save)
	// live, if set, checks a CONFIG SET value beyond what loading checks
	// (maxclients against the open-file limit).
	live func(v string) error
	value
}

// value reads and writes the Options field a directive names, as text.
type value struct {
	get func(o *Options) string
	set func(o *Options, args []string) error
}

// minWorkerMemory is the least engine-worker-memory. Measured with
// redis_tests/models/mlp.onnx (2026-12-07): a worker needs about 140 MB to
// load ONNX Runtime, store the model and run it (at 64mb the library did
// not map and at 128mb ORT's environment got bad_alloc, so no store ever
// worked); RLIMIT_DATA counts thread stacks too, 8 MB each, and at 16 runs
// at once (a worker's lanes, which threads-per-queue reaches on 16 CPUs)
// the worker peaked at 290-320 MB and at 256mb died of SIGABRT, unable to
// make a thread. 512 MB leaves a small model's tensors room beside that.
const minWorkerMemory = 512 << 20

// table lists every directive, in the order of the Options fields.
var table = []directive{
	{name: "port", def: "6379", doc: "TCP port of the RESP listener",
		value: integer(func(o *Options) *atomic.Int64 { return &o.Port }, 0, 65535)},
	{name: "bind", def: "127.0.0.1", doc: "listen address (loopback unless configured)",
		value: text(func(o *Options) *string { return &o.Bind }, nil)},
	{name: "dir", def: ".", doc: "working directory: the sealed snapshot and the seal key live here",
		value: text(func(o *Options) *string { return &o.Dir }, nil)},
	{name: "dbfilename", def: "dump.aidb", doc: "file name of the sealed snapshot in dir",
		value: text(func(o *Options) *string { return &o.DBFilename }, nil)},
	{name: "requirepass", mutable: true, args: "<password>",
		doc:   "password of the default user; before AUTH a client cannot make the server allocate more than 16 KB a bulk",
		value: atomicText(func(o *Options) *atomic.Pointer[string] { return &o.Requirepass }, nil)},
	{name: "maxclients", def: "10000", mutable: true, live: clientsFit,
		doc:   "most clients connected at once (lowered at start to what the open-file limit leaves, less 128 for the server's own files)",
		value: integer(func(o *Options) *atomic.Int64 { return &o.MaxClients }, 1, 1<<31-1)},
	{name: "timeout", def: "0", mutable: true, doc: "close clients idle for this many seconds (0: never)",
		value: integer(func(o *Options) *atomic.Int64 { return &o.Timeout }, 0, 1<<31-1)},
	{name: "proto-max-bulk-len", def: "512mb", mutable: true,
		doc:   "largest single argument other than a model's BLOB chunks, refused on its length header before allocation; also the most a model run's outputs may take together (refused in the engine worker's reply, before they are copied into the server)",
		value: memory(func(o *Options) *atomic.Int64 { return &o.ProtoMaxBulkLen }, 1<<20, 1<<62)},
	{name: "client-query-buffer-limit", def: "1gb", mutable: true,
		doc:   "largest command, each argument counting 80 bytes beyond its own (what the server spends on it); the bytes of a model upload's BLOB chunks are bounded by max-model-size instead",
		value: memory(func(o *Options) *atomic.Int64 { return &o.ClientQueryBufferLimit }, 1<<20, 1<<62)},
	{name: "maxmemory", def: "0", mutable: true,
		doc:   "writes that would pass it get -OOM (0: no limit); model blobs count once however many keys share them, and the commands a transaction holds queued and the uploads in progress (the chunks reserved on their length headers, the bytes a resumable upload holds) count too, as in INFO's used_memory",
		value: memory(func(o *Options) *atomic.Int64 { return &o.MaxMemory }, 0, 1<<62)},
	{name: "maxmemory-policy", def: "noeviction", mutable: true,
		doc:   "noeviction only: nothing is evicted, writes over maxmemory get -OOM",
		value: fixed("noeviction", "argument(s) must be one of the following: noeviction")},
	{name: "databases", def: "1", doc: "1 only: one database, SELECT 0",
		value: fixed("1", "argument must be 1: EnclaveAI has one database")},
	{name: "hz", def: "10", mutable: true, doc: "10 only: periodic work (key expiry, idle clients, the log's fsync every second) runs every 100 ms",
		value: fixed("10", "argument must be 10: the server's periodic work runs every 100 ms")},
	{name: "notify-keyspace-events", mutable: true, args: `""`, doc: "empty only: no keyspace notifications are published",
		value: fixed("", "argument must be empty: EnclaveAI publishes no keyspace notifications")},
	{name: "loglevel", def: "notice", mutable: true, doc: "debug, verbose, notice or warning",
		value: atomicText(func(o *Options) *atomic.Pointer[string] { return &o.LogLevel }, setLogLevel)},
	{name: "logfile", args: "<path>", doc: "log file (empty: stderr); secrets and tensor contents are never logged",
		value: text(func(o *Options) *string { return &o.LogFile }, nil)},
	{name: "onnxruntime-library", args: "<path>",
		doc:   "path of libonnxruntime.so.1 (empty: beside the binary, then .cache/onnxruntime)",
		value: text(func(o *Options) *string { return &o.ONNXRuntimeLibrary }, nil)},
	{name: "engine-isolation", def: "per-tenant",
		doc:   "where ONNX Runtime runs: per-tenant in worker processes (with users, each user's models in workers of their own), shared in workers shared by all, off in the server process (docs/ENGINE_ISOLATION.md)",
		value: text(func(o *Options) *string { return &o.EngineIsolation }, oneOf("argument must be one of: per-tenant, shared, off", "per-tenant", "shared", "off"))},
	{name: "engine-workers", def: "0", doc: "worker processes per placement group (0: one per 8 cores, 1 to 8, for the one group of shared isolation; one per tenant group under per-tenant isolation)",
		value: number(func(o *Options) *int64 { return &o.EngineWorkers }, false,
			func(n int64) bool { return n >= 0 && n <= 256 }, "argument must be between 0 and 256 inclusive")},
	{name: "engine-worker-memory", def: "0",
		doc: "each worker's memory limit, RLIMIT_DATA (0: half the machine's memory; at least 512mb: ONNX Runtime's load and a small model take about 150 MB, each thread's stack 8 MB more, about 320 MB at a worker's 16 runs at once); a worker that passes it dies alone",
		value: number(func(o *Options) *int64 { return &o.EngineWorkerMemory }, true,
			func(n int64) bool { return n == 0 || n >= minWorkerMemory }, "argument must be 0 (half the machine's memory) or a memory value of at least 512mb")},
	{name: "engine-store-timeout", def: "60", doc: "seconds a worker may take to create a session; past it the worker is killed and the store refused (a model read back from the snapshot or the log gets 4 times as long)",
		value: number(func(o *Options) *int64 { return &o.EngineStoreTimeout }, false,
			func(n int64) bool { return n >= 1 && n <= 86400 }, "argument must be between 1 and 86400 inclusive")},
	{name: "engine-reply-poll", def: "200",
		doc: "microseconds a model run polls for its worker's reply, and its worker then for the next request, where each would sleep until woken, while the run is all the server is doing (one client, the only one to send commands for 10 ms, and one run): a sleeping thread on an idle CPU is slow to wake, so this lowers one client's latency, at a CPU's cost; several clients never poll (docs/ENGINE_ISOLATION.md); 0: never; never on one CPU",
		value: number(func(o *Options) *int64 { return &o.EngineReplyPoll }, false,
			func(n int64) bool { return n >= 0 && n <= 10000 }, "argument must be between 0 and 10000 inclusive")},
	{name: "inference-engine", def: DefaultInferenceEngine,
		doc:   "onnxruntime: ONNX Runtime, placed as engine-isolation says; go: the pure-Go engine (package goengine), the only one a CGO_ENABLED=0 or enclave build has, where it is the default; a model using an operator it lacks is refused at AI.MODELSTORE naming the operator (docs/ENCLAVE.md)",
		value: text(func(o *Options) *string { return &o.InferenceEngine }, checkEngine)},
	{name: "max-models", def: "0", mutable: true,
		doc:   "beyond this many models the one stored longest ago is evicted, per user (0: no limit)",
		value: integer(func(o *Options) *atomic.Int64 { return &o.MaxModels }, 0, 1<<31-1)},
	{name: "max-model-size", def: "4gb", mutable: true,
		doc:   "largest model, in one BLOB argument or many chunks; an upload past it is refused on the length header of the chunk that passes it",
		value: memory(func(o *Options) *atomic.Int64 { return &o.MaxModelSize }, 1, 1<<62)},
	{name: "upload-session-timeout", def: "600", mutable: true,
		doc:   "seconds a resumable upload (AI.UPLOAD) may go without an APPEND that adds bytes before it is dropped with its bytes and its maxmemory reservation",
		value: integer(func(o *Options) *atomic.Int64 { return &o.UploadSessionTimeout }, 1, 1<<31)},
	{name: "max-upload-sessions", def: "16", mutable: true,
		doc:   "resumable uploads (AI.UPLOAD) held at once, per user when users are configured (all clients together otherwise); each holds the bytes it has received against maxmemory and counts its announced size against max-model-bytes-per-user",
		value: integer(func(o *Options) *atomic.Int64 { return &o.MaxUploadSessions }, 0, 1<<20)},
	{name: "threads-per-queue", def: "0",
		doc:   "workers of the run queue: at most this many model runs at once, however many clients (RedisAI's THREADS_PER_QUEUE, whose default is 1; AI.CONFIG changes it live; 0: one per CPU; at most 1024)",
		value: integer(func(o *Options) *atomic.Int64 { return &o.ThreadsPerQueue }, 0, MaxThreads)},
	{name: "intra-op-parallelism", def: "0",
		doc:   "threads of one model run (RedisAI's INTRA_OP_PARALLELISM; 0: one (the run queue worker's own, so runs use the cores side by side) below 8 CPUs, two from 8 CPUs; no ONNX Runtime thread spins; AI.CONFIG sets it for models stored later; at most 1024)",
		value: integer(func(o *Options) *atomic.Int64 { return &o.IntraOpParallelism }, 0, MaxThreads)},
	{name: "inter-op-parallelism", def: "0",
		doc:   "threads running independent operators of one run in parallel (RedisAI's INTER_OP_PARALLELISM; 0: none; AI.CONFIG sets it for models stored later; at most 1024)",
		value: integer(func(o *Options) *atomic.Int64 { return &o.InterOpParallelism }, 0, MaxThreads)},
	{name: "slowlog-log-slower-than", def: "10000", mutable: true,
		doc:   "SLOWLOG keeps the commands that ran at least this many microseconds (-1: none, 0: all); tensor and model bytes and passwords are never kept",
		value: integer(func(o *Options) *atomic.Int64 { return &o.SlowlogSlowerThan }, -1, 1<<62)},
	{name: "slowlog-max-len", def: "128", mutable: true, doc: "SLOWLOG keeps this many commands, the newest",
		value: integer(func(o *Options) *atomic.Int64 { return &o.SlowlogMaxLen }, 0, 1<<31-1)},
	{name: "latency-monitor-threshold", def: "0", mutable: true,
		doc:   "LATENCY LATEST records the commands that ran at least this many milliseconds (0: none)",
		value: integer(func(o *Options) *atomic.Int64 { return &o.LatencyMonitorThreshold }, 0, 1<<62)},
	{name: "model-dir", args: "<path>", doc: "the only directory AI.MODELSTORE ... FILE path may read (empty: FILE is refused)",
		value: text(func(o *Options) *string { return &o.ModelDir }, nil)},
	{name: "seal-key-file", def: "seal.key", doc: "simulation mode only: the 256-bit key that seals snapshots (docs/ENCLAVE.md)",
		value: text(func(o *Options) *string { return &o.SealKeyFile }, nil)},
	{name: "tls-port", def: "0", doc: "TLS listener (0: none); its key is made at start unless tls-cert-file and tls-key-file are set",
		value: number(func(o *Options) *int64 { return &o.TLSPort }, false,
			func(n int64) bool { return n >= 0 && n <= 65535 }, "argument must be a port number")},
	{name: "tls-cert-file", args: "<path>", doc: "PEM certificate of the TLS listener",
		value: text(func(o *Options) *string { return &o.TLSCertFile }, nil)},
	{name: "tls-key-file", args: "<path>", doc: "PEM private key of the TLS listener",
		value: text(func(o *Options) *string { return &o.TLSKeyFile }, nil)},
	{name: "tls-ca-cert-file", args: "<path>",
		doc:   "PEM file of the CAs that other nodes' certificates (tls-cluster) and TLS clients' certificates (tls-auth-clients) must chain to; the chain is verified, not the host name, as Redis does",
		value: text(func(o *Options) *string { return &o.TLSCACertFile }, nil)},
	{name: "tls-client-cert-file", args: "<path>",
		doc:   "PEM certificate this node presents to another node (a slot migration's target) under tls-cluster; empty: the TLS listener's (tls-cert-file's, or the marble's)",
		value: text(func(o *Options) *string { return &o.TLSClientCertFile }, nil)},
	{name: "tls-client-key-file", args: "<path>", doc: "PEM private key of tls-client-cert-file",
		value: text(func(o *Options) *string { return &o.TLSClientKeyFile }, nil)},
	{name: "tls-auth-clients", def: "yes",
		doc:   "with tls-ca-cert-file set: yes, a TLS client (another node's migration among them) must present a certificate that chains to it; optional, one it presents must; no, none is asked. Without tls-ca-cert-file none is asked (Redis refuses to start so; here clients check the server through AI.ATTEST)",
		value: text(func(o *Options) *string { return &o.TLSAuthClients }, oneOf("argument(s) must be one of the following: yes, no, optional", "yes", "no", "optional"))},
	{name: "tls-cluster", def: "no",
		doc:   "yes: a slot migration's source connects to its target over TLS at the port the topology names, which must then be each node's tls-port (as Redis Cluster announces its TLS port), verifies the target's certificate chain against tls-ca-cert-file and presents its own, all before it sends AUTH or a key; needs tls-port, tls-cert-file (or marble) and tls-ca-cert-file (docs/CLUSTER.md)",
		value: yesno(func(o *Options) *bool { return &o.TLSCluster })},
	{name: "attest-rate", def: "100", mutable: true,
		doc:   "most AI.ATTEST a second, server-wide, from clients that have not authenticated, beyond each connection's first, which is always answered (each costs a quote in SGX; authenticated clients are not counted; 0: no bound)",
		value: integer(func(o *Options) *atomic.Int64 { return &o.AttestRate }, 0, 1<<31-1)},
	{name: "seal-policy", def: "product", doc: "SGX mode: product (snapshots survive signed upgrades) or unique (only this exact build reads them)",
		value: text(func(o *Options) *string { return &o.SealPolicy }, oneOf("argument must be 'product' or 'unique'", "product", "unique"))},
	{name: "marble", def: "no",
		doc:   "yes: run as a MarbleRun marble: snapshots and the log are sealed with the Coordinator's shared secret ($ENCLAVEAI_MARBLE_SEAL_KEY, so every replica reads them) and tls-port serves the certificate the Coordinator issued (MARBLE_PREDEFINED_*)",
		value: yesno(func(o *Options) *bool { return &o.Marble })},
	{name: "save", def: "3600 1 300 100 60 10000", mutable: true, joined: true,
		doc:   "snapshot rules, `<seconds> <changes>` pairs as Redis's (empty: no automatic snapshots)",
		value: atomicText(func(o *Options) *atomic.Pointer[string] { return &o.Save }, checkSave)},
	{name: "load-bad-snapshot", def: "no",
		doc:   "yes: a snapshot (or append-only log) that fails verification is moved aside and the server starts empty (from the snapshot, for a bad log)",
		value: yesno(func(o *Options) *bool { return &o.LoadBadSnapshot })},
	{name: "appendonly", def: "yes",
		doc:   "the sealed append-only log: every acknowledged write is written to the OS before its reply (docs/DURABILITY.md)",
		value: yesno(func(o *Options) *bool { return &o.AppendOnly })},
	{name: "appendfsync", def: "everysec", mutable: true,
		doc: "always (fsync before each reply), everysec (fsync every second), no (the OS decides)",
		value: atomicText(func(o *Options) *atomic.Pointer[string] { return &o.AppendFsync },
			oneOf("argument(s) must be one of the following: always, everysec, no", "always", "everysec", "no"))},
	{name: "appenddirname", def: "appendonlydir", doc: "the log's directory under dir: manifest, base and incr files, sealed model files",
		value: text(func(o *Options) *string { return &o.AppendDirName }, plainName("appenddirname must be a plain directory name"))},
	{name: "auto-aof-rewrite-percentage", def: "100", mutable: true,
		doc:   "rewrite the log (as BGREWRITEAOF) once it has grown by this much (%) over its base and is at least auto-aof-rewrite-min-size",
		value: integer(func(o *Options) *atomic.Int64 { return &o.AutoAOFRewritePercentage }, 0, 1<<31-1)},
	{name: "auto-aof-rewrite-min-size", def: "64mb", mutable: true, doc: "the smallest log auto-aof-rewrite-percentage rewrites",
		value: memory(func(o *Options) *atomic.Int64 { return &o.AutoAOFRewriteMinSize }, 0, 1<<62)},
	{name: "aof-load-truncated", def: "yes",
		doc:   "yes: a torn last record, or a transaction without its end (a write cut short by a crash), is cut off at start and logged; no: the start stops",
		value: yesno(func(o *Options) *bool { return &o.AOFLoadTruncated })},
	{name: "loadmodel", multi: true, args: "<key> ONNX CPU </path/model.onnx> [TAG t] [BATCHSIZE n]",
		doc: "may repeat: a model stored at start (owned by the default user)",
		value: value{get: func(o *Options) string {
			lines := make([]string, len(o.LoadModels))
			for i, l := range o.LoadModels {
				lines[i] = strings.Join(l, " ")
			}
			return strings.Join(lines, "; ")
		}, set: func(o *Options, a []string) error {
			if len(a) < 4 {
				return errors.New("loadmodel needs: key backend device path [options]")
			}
			o.LoadModels = append(o.LoadModels, append([]string(nil), a...))
			return nil
		}}},
	{name: "user", multi: true, args: "<name> on ><password>",
		doc:   "may repeat: a named user for `AUTH name password` (also #<sha256 hex>, nopass, off, resetpass, and +@admin for the administrative commands, which are otherwise the default user's); with any configured, models and tensors belong to the user who stored them",
		value: value{get: func(o *Options) string { return o.usersString() }, set: func(o *Options, a []string) error { return o.addUser(a) }}},
	{name: "jwt-public-key-file", args: "<path>",
		doc:   "PEM file of ECDSA P-256 public keys (several for rotation; PUBLIC KEY or CERTIFICATE blocks): turns on token authentication, AUTH <token>, AUTH <user> <token>, HELLO 3 AUTH <user> <token>; only ES256 tokens are accepted; a bad file stops the start",
		value: text(func(o *Options) *string { return &o.JWTPublicKeyFile }, nil)},
	{name: "jwt-issuer", args: "<issuer>", doc: "when set, a token's iss must equal it",
		value: text(func(o *Options) *string { return &o.JWTIssuer }, nil)},
	{name: "jwt-audience", args: "<audience>", doc: "when set, a token's aud must include it",
		value: text(func(o *Options) *string { return &o.JWTAudience }, nil)},
	{name: "jwt-leeway", def: "30", doc: "seconds of clock skew allowed on a token's exp and nbf (0 to 300)",
		value: number(func(o *Options) *int64 { return &o.JWTLeeway }, false,
			func(n int64) bool { return n >= 0 && n <= 300 }, "argument must be between 0 and 300 inclusive (seconds)")},
	{name: "allow-modelstore", def: "yes", mutable: true,
		doc:   "no: AI.MODELSTORE, AI.MODELSET, AI.MODELDEL, and DEL, UNLINK, RENAME, EXPIRE, PERSIST, FLUSHALL of a model are refused: only loadmodel models exist",
		value: atomicFlag(func(o *Options) *atomic.Bool { return &o.AllowModelstore })},
	{name: "modelstore-requires-auth", def: "no", mutable: true,
		doc:   "yes: uploads only from a client authenticated as a named user (a user directive or a token's sub), refused before any byte is buffered",
		value: atomicFlag(func(o *Options) *atomic.Bool { return &o.ModelstoreRequiresAuth })},
	{name: "max-model-bytes-per-user", def: "0", mutable: true,
		doc:   "bound on the bytes of the model blobs under each user's keys together with the user's uploads in flight and resumable uploads held (0: none), however many run at once; an upload past it is refused on the length header of the chunk that passes it",
		value: memory(func(o *Options) *atomic.Int64 { return &o.MaxModelBytesPerUser }, 0, 1<<62)},
	{name: "log-progress-bytes", def: "256mb", mutable: true,
		doc:   "a model upload logs its progress (bytes, rate) every this many bytes and once received, when it is at least that big, and a snapshot save every this many bytes written (0: never; a snapshot load logs every second)",
		value: memory(func(o *Options) *atomic.Int64 { return &o.LogProgressBytes }, 0, 1<<62)},
	{name: "metrics-port", def: "0",
		doc: "HTTP port of the Prometheus metrics endpoint, GET /metrics (0: none): INFO's numeric fields, commandstats per command, AI.INFO's counters per model (these only when no authentication is configured), Go runtime and process metrics; it asks for no authentication",
		value: number(func(o *Options) *int64 { return &o.MetricsPort }, false,
			func(n int64) bool { return n >= 0 && n <= 65535 }, "argument must be a port number")},
	{name: "metrics-bind", def: "127.0.0.1", doc: "address of the metrics endpoint (loopback unless configured)",
		value: text(func(o *Options) *string { return &o.MetricsBind }, nil)},
	{name: "cluster-enabled", def: "no",
		doc:   "Redis Cluster mode: keys hash to 16384 slots, an external controller (kvrocks-controller, enclaveai-cli cluster) pushes which node serves which with CLUSTERX SETNODES, other nodes' keys get -MOVED (docs/CLUSTER.md)",
		value: yesno(func(o *Options) *bool { return &o.ClusterEnabled })},
	{name: "cluster-config-file", def: "nodes.aiconf",
		doc:   "file in dir keeping the cluster node's id, topology and version across restarts (authenticated with a key derived from the seal key, so that a file changed outside the server stops the start; replaced atomically)",
		value: text(func(o *Options) *string { return &o.ClusterConfigFile }, plainName("cluster-config-file must be a plain file name (it lives in dir)"))},
	{name: "cluster-config-upgrade", def: "no",
		doc:   "yes: a cluster-config-file that an earlier build wrote unsealed (layouts 1 and 2) is read and rewritten sealed; no: such a file stops the start, as anyone who can write dir can write one (set yes for the first start after the upgrade only)",
		value: yesno(func(o *Options) *bool { return &o.ClusterConfigUpgrade })},
	{name: "masteruser", mutable: true, args: "<username>",
		doc:   "the user a cluster node authenticates as on another node (a slot migration's source on its target, which must give it +@admin), as Redis's replicas on their master: AUTH masteruser masterauth",
		value: atomicText(func(o *Options) *atomic.Pointer[string] { return &o.MasterUser }, nil)},
	{name: "masterauth", mutable: true, args: "<password>",
		doc:   "password a cluster node gives another node: masteruser's, or without it the default user's; empty: the node's own requirepass; CONFIG GET shows (redacted), and it is never logged",
		value: secretText(func(o *Options) *atomic.Pointer[string] { return &o.MasterAuth })},
}

// directives indexes the table by name.
var directives = func() map[string]*directive {
	m := make(map[string]*directive, len(table))
	for i := range table {
		m[table[i].name] = &table[i]
	}
	return m
}()

// A check validates a text value and returns it as stored (e.g. lower-cased).
type check func(o *Options, v string) (string, error)

// text binds a string field.
func text(field func(*Options) *string, c check) value {
	return value{
		get: func(o *Options) string { return *field(o) },
		set: func(o *Options, a []string) error {
			v, err := run(c, o, a[0])
			if err == nil {
				*field(o) = v
			}
			return err
		}}
}

// atomicText binds a string field CONFIG SET may change while it is read.
func atomicText(field func(*Options) *atomic.Pointer[string], c check) value {
	return value{
		get: func(o *Options) string { return *field(o).Load() },
		set: func(o *Options, a []string) error {
			v, err := run(c, o, a[0])
			if err == nil {
				field(o).Store(&v)
			}
			return err
		}}
}

// secretText is a password this server sends, which CONFIG GET does not
// show: "(redacted)" when it is set, "" when not.
func secretText(field func(*Options) *atomic.Pointer[string]) value {
	v := atomicText(field, nil)
	v.get = func(o *Options) string {
		if *field(o).Load() == "" {
			return ""
		}
		return "(redacted)"
	}
	return v
}

// fixed is a setting this server does not vary, kept for the clients
// that read it (CONFIG GET): only its one value may be set.
func fixed(v, msg string) value {
	c := oneOf(msg, v)
	return value{
		get: func(*Options) string { return v },
		set: func(o *Options, a []string) error { _, err := c(o, a[0]); return err },
	}
}

func run(c check, o *Options, v string) (string, error) {
	if c == nil {
		return v, nil
	}
	return c(o, v)
}

// integer binds an atomic integer in [min, max]; memory one given in Redis units.
func integer(field func(*Options) *atomic.Int64, min, max int64) value {
	return atomicNumber(field, min, max, false)
}

func memory(field func(*Options) *atomic.Int64, min, max int64) value {
	return atomicNumber(field, min, max, true)
}

func atomicNumber(field func(*Options) *atomic.Int64, min, max int64, mem bool) value {
	return value{
		get: func(o *Options) string { return strconv.FormatInt(field(o).Load(), 10) },
		set: func(o *Options, a []string) error {
			n, err := parseNumber(a[0], mem)
			if err != nil {
				return err
			}
			if n < min || n > max {
				return fmt.Errorf("argument must be between %d and %d inclusive", min, max)
			}
			field(o).Store(n)
			return nil
		}}
}

// number binds a plain integer field, set only before the server starts,
// that ok accepts; msg is the error otherwise.
func number(field func(*Options) *int64, mem bool, ok func(int64) bool, msg string) value {
	return value{
		get: func(o *Options) string { return strconv.FormatInt(*field(o), 10) },
		set: func(o *Options, a []string) error {
			n, err := parseNumber(a[0], mem)
			if err != nil || !ok(n) {
				return errors.New(msg)
			}
			*field(o) = n
			return nil
		}}
}

func parseNumber(s string, mem bool) (int64, error) {
	if mem {
		n, err := ParseMemory(s)
		if err != nil {
			return 0, errors.New("argument must be a memory value")
		}
		return n, nil
	}
	// As Redis's string2ll: no sign but '-', no leading zero or space.
	digits := strings.TrimPrefix(s, "-")
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || digits == "" || digits[0] < '0' || digits[0] > '9' || (digits[0] == '0' && s != "0") {
		return 0, errors.New("argument couldn't be parsed into an integer")
	}
	return n, nil
}

// yesno binds a yes/no field; atomicFlag one CONFIG SET may change.
func yesno(field func(*Options) *bool) value {
	return value{
		get: func(o *Options) string { return yesNo(*field(o)) },
		set: func(o *Options, a []string) error {
			v, err := parseYesNo(a[0])
			if err == nil {
				*field(o) = v
			}
			return err
		}}
}

func atomicFlag(field func(*Options) *atomic.Bool) value {
	return value{
		get: func(o *Options) string { return yesNo(field(o).Load()) },
		set: func(o *Options, a []string) error {
			v, err := parseYesNo(a[0])
			if err == nil {
				field(o).Store(v)
			}
			return err
		}}
}

// oneOf accepts one of values, in any case, stored lower-cased.
func oneOf(msg string, values ...string) check {
	return func(_ *Options, v string) (string, error) {
		l := strings.ToLower(v)
		for _, ok := range values {
			if l == ok {
				return l, nil
			}
		}
		return "", errors.New(msg)
	}
}

// plainName accepts a file or directory name without a path.
func plainName(msg string) check {
	return func(_ *Options, v string) (string, error) {
		if v == "" || v == "." || v == ".." || strings.ContainsAny(v, "/\\") {
			return "", errors.New(msg)
		}
		return v, nil
	}
}

// setLogLevel also sets the level the logger reads.
func setLogLevel(o *Options, v string) (string, error) {
	l := strings.ToLower(v)
	level, ok := map[string]slog.Level{"debug": slog.LevelDebug, "verbose": slog.LevelDebug,
		"notice": slog.LevelInfo, "warning": slog.LevelWarn}[l]
	if !ok {
		return "", errors.New("argument(s) must be one of the following: debug, verbose, notice, warning")
	}
	o.slogLevel.Set(level)
	return l, nil
}

func checkSave(_ *Options, v string) (string, error) {
	if v != strings.Join(strings.Fields(v), " ") {
		// As Redis 7.0, which refuses blanks around the rules or two
		// between them (protocol review: "  " was stored as the rules).
		return "", errors.New("Invalid save parameters") //lint:ignore ST1005 Redis's words, sent to clients
	}
	_, err := ParseSaveRules(v)
	return v, err
}

func checkEngine(_ *Options, v string) (string, error) {
	switch l := strings.ToLower(v); l {
	case EngineGo:
		return l, nil
	case EngineONNXRuntime:
		if !HasONNXRuntime {
			return "", errors.New("this build has no ONNX Runtime (CGO_ENABLED=0 or the enclave build): only go")
		}
		return l, nil
	}
	return "", errors.New("argument must be one of: onnxruntime, go")
}
