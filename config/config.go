// Package config holds the server's Options. One literal table
// (directives.go) is the single source of every directive: its name,
// default, meaning, whether CONFIG SET may change it at run time, and the
// setter and getter of its field. Default, Load, CONFIG GET/SET, --help,
// enclaveai.conf.example and the README's table all come from it.
// Directives are read like redis-server reads them: a file of
// `directive value` lines, then `--directive value` flags that override it.
//
// Concurrency: Options is read by every connection. Mutable directives are
// stored in atomics so that CONFIG SET never races with a reader; immutable
// ones are written only before the server starts.
package config

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
)

// Options is the complete server configuration.
type Options struct {
	Port                   atomic.Int64
	Bind                   string
	Dir                    string
	DBFilename             string
	Requirepass            atomic.Pointer[string]
	MaxClients             atomic.Int64
	Timeout                atomic.Int64 // seconds; 0 = never close idle clients
	ProtoMaxBulkLen        atomic.Int64
	ClientQueryBufferLimit atomic.Int64
	MaxMemory              atomic.Int64 // bytes; 0 = unlimited
	LogLevel               atomic.Pointer[string]
	LogFile                string
	ONNXRuntimeLibrary     string
	// EngineIsolation is where ONNX Runtime runs: "per-tenant" (default:
	// in worker processes, each user's models in workers of their own),
	// "shared" (in worker processes shared by all users) or "off" (in the
	// server process itself).
	EngineIsolation string
	// EngineWorkers is the number of worker processes per placement group
	// (0: one per 8 cores, at least 1 and at most 8; one per user when
	// each user has a group of their own).
	EngineWorkers int64
	// EngineWorkerMemory is each worker's memory limit in bytes (its
	// RLIMIT_DATA; 0: half the machine's memory).
	EngineWorkerMemory int64
	// EngineStoreTimeout is how long a worker may take to create a
	// session, in seconds.
	EngineStoreTimeout int64
	// EngineReplyPoll is how long, in microseconds, a run that is all the
	// server is doing polls for its engine worker's reply, and the worker
	// then for the next request (0: never).
	EngineReplyPoll int64
	// InferenceEngine is the engine that compiles and runs models:
	// EngineONNXRuntime or EngineGo (the default where the build has no
	// ONNX Runtime, which then refuses EngineONNXRuntime).
	InferenceEngine string
	MaxModels       atomic.Int64 // 0 = unlimited
	MaxModelSize    atomic.Int64
	// UploadSessionTimeout (seconds) and MaxUploadSessions bound the
	// resumable uploads of AI.UPLOAD.
	UploadSessionTimeout atomic.Int64
	MaxUploadSessions    atomic.Int64
	// The run queue's workers and the sessions' thread counts at start
	// (RedisAI's load-time THREADS_PER_QUEUE, INTRA_OP_PARALLELISM and
	// INTER_OP_PARALLELISM; AI.CONFIG changes them later). 0 means the
	// default: a worker per CPU, one thread per run, no inter-op pool.
	// Each is at most MaxThreads.
	ThreadsPerQueue    atomic.Int64
	IntraOpParallelism atomic.Int64
	InterOpParallelism atomic.Int64
	// SlowlogSlowerThan (µs; -1 off, 0 every command) and SlowlogMaxLen
	// are Redis's slowlog-log-slower-than and slowlog-max-len.
	SlowlogSlowerThan atomic.Int64
	SlowlogMaxLen     atomic.Int64
	// LatencyMonitorThreshold (ms; 0 off) is Redis's latency-monitor-threshold.
	LatencyMonitorThreshold atomic.Int64
	ModelDir                string
	SealKeyFile             string
	// TLS: a second listener on TLSPort (0 = none). Without cert and key
	// files the server generates its key pair in memory at start (inside an
	// enclave the private key then never leaves it).
	TLSPort     int64
	TLSCertFile string
	TLSKeyFile  string
	// TLSCACertFile is the PEM bundle of the CAs that other nodes'
	// certificates (tls-cluster) and clients' certificates
	// (TLSAuthClients) must chain to; "" for none.
	TLSCACertFile string
	// TLSClientCertFile and TLSClientKeyFile are the key pair this node
	// presents when it connects to another node; without them it presents
	// its listener's (tls-cert-file's, or marble mode's).
	TLSClientCertFile string
	TLSClientKeyFile  string
	// TLSAuthClients is "yes" (a TLS client must present a certificate
	// that chains to TLSCACertFile), "optional" (one it presents must) or
	// "no" (none is asked). Without TLSCACertFile none is asked.
	TLSAuthClients string
	// TLSCluster makes a slot migration's source connect to its target
	// over TLS, at the port the topology names (the target's tls-port),
	// and verify the target's certificate chain against TLSCACertFile
	// before it sends AUTH (docs/CLUSTER.md).
	TLSCluster bool
	// AttestRate bounds AI.ATTEST from clients that have not
	// authenticated: at most this many a second, server-wide (0: no
	// bound). In SGX each one has the quoting enclave sign a report.
	AttestRate atomic.Int64
	// SealPolicy is "product" (default: snapshots survive signed upgrades)
	// or "unique" (only the exact build can read them); SGX mode only.
	SealPolicy string
	// Marble runs the server as a MarbleRun marble (docs/ENCLAVE.md): the
	// seal key is the Coordinator's shared secret and the TLS certificate
	// the one it issued, both from the environment it sets.
	Marble bool
	// Save holds the `save <seconds> <changes> ...` snapshot rules, "" for none.
	Save atomic.Pointer[string]
	// LoadBadSnapshot, when true, starts with an empty keyspace if the
	// snapshot cannot be loaded (the bad file is moved aside, never overwritten).
	LoadBadSnapshot bool
	// AppendOnly turns the sealed append-only log on (docs/DURABILITY.md).
	AppendOnly bool
	// AppendFsync is always, everysec or no.
	AppendFsync atomic.Pointer[string]
	// AppendDirName is the log's directory under Dir.
	AppendDirName string
	// AutoAOFRewritePercentage and AutoAOFRewriteMinSize start a rewrite
	// when the log has grown by the percentage over its base and is at
	// least the size (percentage 0: never).
	AutoAOFRewritePercentage atomic.Int64
	AutoAOFRewriteMinSize    atomic.Int64
	// AOFLoadTruncated: a torn last record is cut off at start (yes) or
	// stops the start (no).
	AOFLoadTruncated bool
	// LoadModels are the `loadmodel` lines: each the arguments after the directive.
	LoadModels [][]string
	// Users are the `user` lines by name (users.go); nil when none.
	Users map[string]*User
	// JWTPublicKeyFile turns on token authentication (AUTH <token>): a PEM
	// file of ECDSA P-256 public keys, any of which may sign (rotation).
	// JWTIssuer and JWTAudience, when set, must match the token's iss and
	// aud; JWTLeeway is the clock skew allowed on exp and nbf, in seconds.
	JWTPublicKeyFile string
	JWTIssuer        string
	JWTAudience      string
	JWTLeeway        int64
	// AllowModelstore false refuses AI.MODELSTORE, AI.MODELSET and
	// AI.MODELDEL: only `loadmodel` models exist.
	AllowModelstore atomic.Bool
	// ModelstoreRequiresAuth refuses uploads from clients that have not
	// authenticated as a named (non-default) user.
	ModelstoreRequiresAuth atomic.Bool
	// MaxModelBytesPerUser bounds the bytes of the models each user owns
	// with those of its uploads under way (0 = unlimited).
	MaxModelBytesPerUser atomic.Int64
	// LogProgressBytes: a model upload and a snapshot save log their
	// progress every this many bytes (0: never).
	LogProgressBytes atomic.Int64
	// MetricsPort is the HTTP port of the Prometheus metrics endpoint
	// (0: none), on MetricsBind.
	MetricsPort int64
	MetricsBind string
	// ClusterEnabled turns Redis Cluster mode on: keys hash to slots whose
	// owners an external controller pushes (docs/CLUSTER.md).
	ClusterEnabled bool
	// ClusterConfigFile is the file in Dir that keeps the node's id,
	// topology and version across restarts, authenticated with a key
	// derived from the seal key.
	ClusterConfigFile string
	// ClusterConfigUpgrade lets the start read a ClusterConfigFile of the
	// unsealed layouts (1 and 2, written by the builds before the file was
	// sealed) and seal it; without it such a file stops the start, since
	// anyone who can write Dir can write one.
	ClusterConfigUpgrade bool
	// MasterUser and MasterAuth are what this node authenticates with on
	// another (a slot migration's target), as a Redis replica's
	// masteruser and masterauth on its master: AUTH MasterUser MasterAuth,
	// AUTH MasterAuth without a user, this node's Requirepass without
	// either. CONFIG GET never shows MasterAuth.
	MasterUser atomic.Pointer[string]
	MasterAuth atomic.Pointer[string]

	mu        sync.Mutex // serialises CONFIG SET
	slogLevel slog.LevelVar
	// loaded names the joined directives a file line or flag has set
	// while loading (apply): their later lines add to the first.
	loaded map[string]bool
}

// SlogLevel is the log level `loglevel` sets, live: CONFIG SET loglevel
// changes what the logger built on it writes.
func (o *Options) SlogLevel() *slog.LevelVar { return &o.slogLevel }

// Default returns Options at every directive's default (the table in
// directives.go): redis-server's where the directive exists in Redis,
// EnclaveAI's own otherwise.
func Default() *Options {
	o := &Options{}
	for i := range table {
		d := &table[i]
		if d.multi {
			continue
		}
		if err := d.set(o, []string{d.def}); err != nil {
			panic(fmt.Sprintf("config: the default of %s: %v", d.name, err))
		}
	}
	return o
}

// Names lists every directive, sorted.
func Names() []string {
	names := make([]string, 0, len(directives))
	for n := range directives {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Get returns a directive's current value as CONFIG GET shows it.
func (o *Options) Get(name string) (string, bool) {
	d, ok := directives[strings.ToLower(name)]
	if !ok {
		return "", false
	}
	return d.get(o), true
}

// MaxThreads bounds THREADS_PER_QUEUE, INTRA_OP_PARALLELISM and
// INTER_OP_PARALLELISM, as directives and in AI.CONFIG alike: the run
// queue starts a goroutine per worker, and ONNX Runtime a thread per
// intra- or inter-op thread of every session, when the value is set.
// Unbounded, AI.CONFIG THREADS_PER_QUEUE 100000000 never returned: it
// started goroutines under the run queue's lock, which model runs wait
// for, and the server's memory passed 3 GB within half a minute (found
// while looking into a FuzzDispatch hang).
const MaxThreads = 1024

// ErrUnknown and ErrImmutable are returned by Settable and Set.
var (
	ErrUnknown   = errors.New("unknown option")
	ErrImmutable = errors.New("can't set immutable config")
)

// Settable reports whether CONFIG SET may change name: nil, ErrUnknown
// (no such directive, or one that may repeat, loadmodel or user: Redis's
// CONFIG SET knows no loadmodule or user either) or ErrImmutable. It reads
// the directive table alone, so a command's parse can ask before anything
// is set, as Redis checks every name of a CONFIG SET before any value.
func Settable(name string) error {
	d, ok := directives[strings.ToLower(name)]
	if !ok || d.multi {
		return ErrUnknown
	}
	if !d.mutable {
		return ErrImmutable
	}
	return nil
}

// Set changes a directive at run time (CONFIG SET), refusing immutable ones.
func (o *Options) Set(name, value string) error {
	if err := Settable(name); err != nil {
		return err
	}
	d := directives[strings.ToLower(name)]
	if d.live != nil {
		if err := d.live(value); err != nil {
			return err
		}
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	return d.set(o, []string{value})
}

// apply sets a directive while loading (file or flags); immutable ones too.
func (o *Options) apply(name string, args []string) error {
	d, ok := directives[strings.ToLower(name)]
	if !ok {
		return fmt.Errorf("unknown directive %q", name)
	}
	if d.joined && len(args) > 0 {
		args = []string{strings.Join(args, " ")}
		// As redis-server's save lines: the first replaces the default,
		// the next ones add their pairs, an empty one clears (operator
		// review: only the last of three save lines was kept).
		if cur := d.get(o); o.loaded[d.name] && args[0] != "" && cur != "" {
			args[0] = cur + " " + args[0]
		}
		if o.loaded == nil {
			o.loaded = map[string]bool{}
		}
		o.loaded[d.name] = true
	}
	if !d.multi && len(args) != 1 {
		return fmt.Errorf("directive %q takes one argument", name)
	}
	if err := d.set(o, args); err != nil {
		return fmt.Errorf("directive %q: %v", name, err)
	}
	return nil
}

// Load builds Options the way redis-server does: an optional config file
// as the first argument, then `--directive value...` flags.
func Load(args []string) (*Options, error) {
	o := Default()
	if len(args) > 0 && !strings.HasPrefix(args[0], "--") {
		f, err := os.Open(args[0])
		if err != nil {
			return nil, err
		}
		err = o.ReadFile(f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", args[0], err)
		}
		args = args[1:]
	}
	for len(args) > 0 {
		name, ok := strings.CutPrefix(args[0], "--")
		if !ok {
			return nil, fmt.Errorf("expected --directive, got %q", args[0])
		}
		j := 1
		for j < len(args) && !strings.HasPrefix(args[j], "--") {
			j++
		}
		if err := o.apply(name, args[1:j]); err != nil {
			return nil, err
		}
		args = args[j:]
	}
	return o, o.Validate()
}

// ReadFile reads `directive value` lines; `#` starts a comment line.
func (o *Options) ReadFile(r io.Reader) error {
	sc := bufio.NewScanner(r)
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" || text[0] == '#' {
			continue
		}
		fields, err := SplitArgs(text)
		if err != nil {
			return fmt.Errorf("line %d: %v", line, err)
		}
		if err := o.apply(fields[0], fields[1:]); err != nil {
			return fmt.Errorf("line %d: %v", line, err)
		}
	}
	return sc.Err()
}

// Validate checks relations between directives.
func (o *Options) Validate() error {
	if o.Dir == "" {
		return errors.New("dir must not be empty")
	}
	if o.DBFilename == "" || strings.ContainsRune(o.DBFilename, '/') {
		return errors.New("dbfilename must be a plain file name")
	}
	if (o.JWTIssuer != "" || o.JWTAudience != "") && o.JWTPublicKeyFile == "" {
		return errors.New("jwt-issuer and jwt-audience need jwt-public-key-file")
	}
	if (o.TLSCertFile == "") != (o.TLSKeyFile == "") {
		return errors.New("tls-cert-file and tls-key-file go together")
	}
	if o.Marble && (o.TLSPort == 0 || o.TLSCertFile != "") {
		return errors.New("marble yes needs tls-port, and takes its certificate from MarbleRun, not tls-cert-file")
	}
	if (o.TLSClientCertFile == "") != (o.TLSClientKeyFile == "") {
		return errors.New("tls-client-cert-file and tls-client-key-file go together")
	}
	if o.TLSCluster {
		switch {
		case o.TLSPort == 0:
			return errors.New("tls-cluster yes needs tls-port: other nodes reach this one at its TLS port (the port the topology names)")
		case o.TLSCACertFile == "":
			return errors.New("tls-cluster yes needs tls-ca-cert-file: the CA that every node's certificate must chain to")
		case o.TLSCertFile == "" && !o.Marble:
			return errors.New("tls-cluster yes needs tls-cert-file and tls-key-file (or marble yes): " +
				"the key pair made at start chains to no CA, so no other node could verify this one")
		}
	}
	return nil
}
