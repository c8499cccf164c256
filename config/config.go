// Package config holds the server's Options: every directive with its
// default, its parser and whether CONFIG SET may change it at run time.
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
	"strconv"
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
	// InferenceEngine is the engine that compiles and runs models:
	// EngineONNXRuntime or EngineGo (the default where the build has no
	// ONNX Runtime, which then refuses EngineONNXRuntime).
	InferenceEngine string
	MaxModels       atomic.Int64 // 0 = unlimited
	MaxModelSize    atomic.Int64
	// The run queue's workers and the sessions' thread counts at start
	// (RedisAI's load-time THREADS_PER_QUEUE, INTRA_OP_PARALLELISM and
	// INTER_OP_PARALLELISM; AI.CONFIG changes them later). 0 means the
	// default: a worker per CPU, one thread per run, no inter-op pool.
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
	// SealPolicy is "product" (default: snapshots survive signed upgrades)
	// or "unique" (only the exact build can read them); SGX mode only.
	SealPolicy string
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
	// (0 = unlimited).
	MaxModelBytesPerUser atomic.Int64
	// ClusterEnabled turns Redis Cluster mode on: keys hash to slots whose
	// owners an external controller pushes (docs/CLUSTER.md).
	ClusterEnabled bool
	// ClusterConfigFile is the file in Dir that keeps the node's id,
	// topology and version across restarts.
	ClusterConfigFile string

	mu        sync.Mutex // serialises CONFIG SET
	slogLevel slog.LevelVar
}

// SlogLevel is the log level `loglevel` sets, live: CONFIG SET loglevel
// changes what the logger built on it writes.
func (o *Options) SlogLevel() *slog.LevelVar { return &o.slogLevel }

// Default returns Options with redis-server's defaults where a directive
// exists in Redis, and EnclaveAI's own otherwise.
func Default() *Options {
	o := &Options{Bind: "127.0.0.1", Dir: ".", DBFilename: "dump.aidb", SealKeyFile: "seal.key", SealPolicy: "product",
		AppendOnly: true, AppendDirName: "appendonlydir", AOFLoadTruncated: true, ClusterConfigFile: "nodes.aiconf",
		EngineIsolation: "per-tenant", EngineStoreTimeout: 60, InferenceEngine: DefaultInferenceEngine, JWTLeeway: 30}
	o.AllowModelstore.Store(true)
	everysec := "everysec"
	o.AppendFsync.Store(&everysec)
	o.AutoAOFRewritePercentage.Store(100)
	o.AutoAOFRewriteMinSize.Store(64 << 20)
	o.Port.Store(6379)
	empty, info, save := "", "notice", "3600 1 300 100 60 10000"
	o.Requirepass.Store(&empty)
	o.Save.Store(&save)
	o.LogLevel.Store(&info)
	o.MaxClients.Store(10000)
	o.ProtoMaxBulkLen.Store(512 << 20)
	o.ClientQueryBufferLimit.Store(1 << 30)
	o.MaxModelSize.Store(4 << 30)
	o.SlowlogSlowerThan.Store(10000)
	o.SlowlogMaxLen.Store(128)
	return o
}

// directive describes one configuration directive.
type directive struct {
	name    string
	mutable bool
	get     func(o *Options) string
	set     func(o *Options, args []string) error
	multi   bool // may repeat, takes all the line's arguments (loadmodel)
	joined  bool // takes all the line's arguments joined by spaces (save)
}

func str(p func(o *Options) *string) (func(*Options) string, func(*Options, []string) error) {
	return func(o *Options) string { return *p(o) },
		func(o *Options, a []string) error { *p(o) = a[0]; return nil }
}

func atomicStr(p func(o *Options) *atomic.Pointer[string]) (func(*Options) string, func(*Options, []string) error) {
	return func(o *Options) string { return *p(o).Load() },
		func(o *Options, a []string) error { v := a[0]; p(o).Store(&v); return nil }
}

func num(p func(o *Options) *atomic.Int64, min, max int64, memory bool) (func(*Options) string, func(*Options, []string) error) {
	return func(o *Options) string { return strconv.FormatInt(p(o).Load(), 10) },
		func(o *Options, a []string) error {
			var n int64
			var err error
			if memory {
				n, err = ParseMemory(a[0])
			} else {
				n, err = strconv.ParseInt(a[0], 10, 64)
			}
			if err != nil && memory {
				return fmt.Errorf("argument must be a memory value")
			}
			if err != nil {
				return fmt.Errorf("argument couldn't be parsed into an integer")
			}
			if n < min || n > max {
				return fmt.Errorf("argument must be between %d and %d inclusive", min, max)
			}
			p(o).Store(n)
			return nil
		}
}

var directives = func() map[string]*directive {
	ds := []*directive{}
	add := func(name string, mutable bool, get func(*Options) string, set func(*Options, []string) error) {
		ds = append(ds, &directive{name: name, mutable: mutable, get: get, set: set})
	}
	g, s := num(func(o *Options) *atomic.Int64 { return &o.Port }, 0, 65535, false)
	add("port", false, g, s)
	g, s = str(func(o *Options) *string { return &o.Bind })
	add("bind", false, g, s)
	g, s = str(func(o *Options) *string { return &o.Dir })
	add("dir", false, g, s)
	g, s = str(func(o *Options) *string { return &o.DBFilename })
	add("dbfilename", false, g, s)
	g, s = atomicStr(func(o *Options) *atomic.Pointer[string] { return &o.Requirepass })
	add("requirepass", true, g, s)
	g, s = num(func(o *Options) *atomic.Int64 { return &o.MaxClients }, 1, 1<<31-1, false)
	add("maxclients", true, g, s)
	g, s = num(func(o *Options) *atomic.Int64 { return &o.Timeout }, 0, 1<<31-1, false)
	add("timeout", true, g, s)
	g, s = num(func(o *Options) *atomic.Int64 { return &o.ProtoMaxBulkLen }, 1<<20, 1<<62, true)
	add("proto-max-bulk-len", true, g, s)
	g, s = num(func(o *Options) *atomic.Int64 { return &o.ClientQueryBufferLimit }, 1<<20, 1<<62, true)
	add("client-query-buffer-limit", true, g, s)
	g, s = num(func(o *Options) *atomic.Int64 { return &o.MaxMemory }, 0, 1<<62, true)
	add("maxmemory", true, g, s)
	// Setters wrapped in closures get their own variable: s is reused below.
	g, setLevel := atomicStr(func(o *Options) *atomic.Pointer[string] { return &o.LogLevel })
	add("loglevel", true, g, func(o *Options, a []string) error {
		switch l := strings.ToLower(a[0]); l {
		case "debug", "verbose", "notice", "warning":
			o.slogLevel.Set(map[string]slog.Level{"debug": slog.LevelDebug, "verbose": slog.LevelDebug,
				"notice": slog.LevelInfo, "warning": slog.LevelWarn}[l])
			return setLevel(o, []string{l})
		}
		return errors.New("argument(s) must be one of the following: debug, verbose, notice, warning")
	})
	g, s = str(func(o *Options) *string { return &o.LogFile })
	add("logfile", false, g, s)
	g, s = str(func(o *Options) *string { return &o.ONNXRuntimeLibrary })
	add("onnxruntime-library", false, g, s)
	add("engine-isolation", false, func(o *Options) string { return o.EngineIsolation }, func(o *Options, a []string) error {
		switch v := strings.ToLower(a[0]); v {
		case "per-tenant", "shared", "off":
			o.EngineIsolation = v
			return nil
		}
		return errors.New("argument must be one of: per-tenant, shared, off")
	})
	add("inference-engine", false, func(o *Options) string { return o.InferenceEngine }, func(o *Options, a []string) error {
		switch v := strings.ToLower(a[0]); v {
		case EngineGo:
			o.InferenceEngine = v
			return nil
		case EngineONNXRuntime:
			if !HasONNXRuntime {
				return errors.New("this build has no ONNX Runtime (CGO_ENABLED=0 or the enclave build): only go")
			}
			o.InferenceEngine = v
			return nil
		}
		return errors.New("argument must be one of: onnxruntime, go")
	})
	add("engine-workers", false, func(o *Options) string { return strconv.FormatInt(o.EngineWorkers, 10) },
		func(o *Options, a []string) error {
			n, err := strconv.ParseInt(a[0], 10, 64)
			if err != nil || n < 0 || n > 256 {
				return errors.New("argument must be between 0 and 256 inclusive")
			}
			o.EngineWorkers = n
			return nil
		})
	add("engine-worker-memory", false, func(o *Options) string { return strconv.FormatInt(o.EngineWorkerMemory, 10) },
		func(o *Options, a []string) error {
			n, err := ParseMemory(a[0])
			if err != nil || n < 0 || (n > 0 && n < 64<<20) {
				return errors.New("argument must be 0 (half the machine's memory) or a memory value of at least 64mb")
			}
			o.EngineWorkerMemory = n
			return nil
		})
	add("engine-store-timeout", false, func(o *Options) string { return strconv.FormatInt(o.EngineStoreTimeout, 10) },
		func(o *Options, a []string) error {
			n, err := strconv.ParseInt(a[0], 10, 64)
			if err != nil || n < 1 || n > 86400 {
				return errors.New("argument must be between 1 and 86400 inclusive")
			}
			o.EngineStoreTimeout = n
			return nil
		})
	g, s = num(func(o *Options) *atomic.Int64 { return &o.MaxModels }, 0, 1<<31-1, false)
	add("max-models", true, g, s)
	g, s = num(func(o *Options) *atomic.Int64 { return &o.MaxModelSize }, 1, 1<<62, true)
	add("max-model-size", true, g, s)
	g, s = num(func(o *Options) *atomic.Int64 { return &o.ThreadsPerQueue }, 0, 1024, false)
	add("threads-per-queue", false, g, s)
	g, s = num(func(o *Options) *atomic.Int64 { return &o.IntraOpParallelism }, 0, 1024, false)
	add("intra-op-parallelism", false, g, s)
	g, s = num(func(o *Options) *atomic.Int64 { return &o.InterOpParallelism }, 0, 1024, false)
	add("inter-op-parallelism", false, g, s)

	g, s = num(func(o *Options) *atomic.Int64 { return &o.SlowlogSlowerThan }, -1, 1<<62, false)
	add("slowlog-log-slower-than", true, g, s)
	g, s = num(func(o *Options) *atomic.Int64 { return &o.SlowlogMaxLen }, 0, 1<<31-1, false)
	add("slowlog-max-len", true, g, s)
	g, s = num(func(o *Options) *atomic.Int64 { return &o.LatencyMonitorThreshold }, 0, 1<<62, false)
	add("latency-monitor-threshold", true, g, s)
	g, s = str(func(o *Options) *string { return &o.ModelDir })
	add("model-dir", false, g, s)
	g, s = str(func(o *Options) *string { return &o.SealKeyFile })
	add("seal-key-file", false, g, s)
	add("tls-port", false, func(o *Options) string { return strconv.FormatInt(o.TLSPort, 10) },
		func(o *Options, a []string) error {
			n, err := strconv.ParseInt(a[0], 10, 64)
			if err != nil || n < 0 || n > 65535 {
				return errors.New("argument must be a port number")
			}
			o.TLSPort = n
			return nil
		})
	g, s = str(func(o *Options) *string { return &o.TLSCertFile })
	add("tls-cert-file", false, g, s)
	g, s = str(func(o *Options) *string { return &o.TLSKeyFile })
	add("tls-key-file", false, g, s)
	add("seal-policy", false, func(o *Options) string { return o.SealPolicy }, func(o *Options, a []string) error {
		switch strings.ToLower(a[0]) {
		case "product", "unique":
			o.SealPolicy = strings.ToLower(a[0])
			return nil
		}
		return errors.New("argument must be 'product' or 'unique'")
	})
	g, setSave := atomicStr(func(o *Options) *atomic.Pointer[string] { return &o.Save })
	add("save", true, g, func(o *Options, a []string) error {
		if _, err := ParseSaveRules(a[0]); err != nil {
			return err
		}
		return setSave(o, a)
	})
	ds[len(ds)-1].joined = true
	add("appendonly", false, func(o *Options) string { return yesNo(o.AppendOnly) },
		func(o *Options, a []string) error {
			v, err := parseYesNo(a[0])
			o.AppendOnly = v
			return err
		})
	g, setFsync := atomicStr(func(o *Options) *atomic.Pointer[string] { return &o.AppendFsync })
	add("appendfsync", true, g, func(o *Options, a []string) error {
		switch l := strings.ToLower(a[0]); l {
		case "always", "everysec", "no":
			return setFsync(o, []string{l})
		}
		return errors.New("argument(s) must be one of the following: always, everysec, no")
	})
	add("appenddirname", false, func(o *Options) string { return o.AppendDirName }, func(o *Options, a []string) error {
		if a[0] == "" || a[0] == "." || a[0] == ".." || strings.ContainsAny(a[0], "/\\") {
			return errors.New("appenddirname must be a plain directory name")
		}
		o.AppendDirName = a[0]
		return nil
	})
	g, s = num(func(o *Options) *atomic.Int64 { return &o.AutoAOFRewritePercentage }, 0, 1<<31-1, false)
	add("auto-aof-rewrite-percentage", true, g, s)
	g, s = num(func(o *Options) *atomic.Int64 { return &o.AutoAOFRewriteMinSize }, 0, 1<<62, true)
	add("auto-aof-rewrite-min-size", true, g, s)
	add("aof-load-truncated", false, func(o *Options) string { return yesNo(o.AOFLoadTruncated) },
		func(o *Options, a []string) error {
			v, err := parseYesNo(a[0])
			o.AOFLoadTruncated = v
			return err
		})
	add("load-bad-snapshot", false, func(o *Options) string { return yesNo(o.LoadBadSnapshot) },
		func(o *Options, a []string) error {
			v, err := parseYesNo(a[0])
			o.LoadBadSnapshot = v
			return err
		})
	g, s = str(func(o *Options) *string { return &o.JWTPublicKeyFile })
	add("jwt-public-key-file", false, g, s)
	g, s = str(func(o *Options) *string { return &o.JWTIssuer })
	add("jwt-issuer", false, g, s)
	g, s = str(func(o *Options) *string { return &o.JWTAudience })
	add("jwt-audience", false, g, s)
	add("jwt-leeway", false, func(o *Options) string { return strconv.FormatInt(o.JWTLeeway, 10) },
		func(o *Options, a []string) error {
			n, err := strconv.ParseInt(a[0], 10, 64)
			if err != nil || n < 0 || n > 300 {
				return errors.New("argument must be between 0 and 300 inclusive (seconds)")
			}
			o.JWTLeeway = n
			return nil
		})
	add("allow-modelstore", true, func(o *Options) string { return yesNo(o.AllowModelstore.Load()) },
		func(o *Options, a []string) error {
			v, err := parseYesNo(a[0])
			if err == nil {
				o.AllowModelstore.Store(v)
			}
			return err
		})
	add("modelstore-requires-auth", true, func(o *Options) string { return yesNo(o.ModelstoreRequiresAuth.Load()) },
		func(o *Options, a []string) error {
			v, err := parseYesNo(a[0])
			if err == nil {
				o.ModelstoreRequiresAuth.Store(v)
			}
			return err
		})
	g, s = num(func(o *Options) *atomic.Int64 { return &o.MaxModelBytesPerUser }, 0, 1<<62, true)
	add("max-model-bytes-per-user", true, g, s)
	add("cluster-enabled", false, func(o *Options) string { return yesNo(o.ClusterEnabled) },
		func(o *Options, a []string) error {
			v, err := parseYesNo(a[0])
			o.ClusterEnabled = v
			return err
		})
	add("cluster-config-file", false, func(o *Options) string { return o.ClusterConfigFile }, func(o *Options, a []string) error {
		if a[0] == "" || a[0] == "." || a[0] == ".." || strings.ContainsAny(a[0], "/\\") {
			return errors.New("cluster-config-file must be a plain file name (it lives in dir)")
		}
		o.ClusterConfigFile = a[0]
		return nil
	})
	ds = append(ds, &directive{name: "loadmodel", multi: true,
		get: func(o *Options) string {
			lines := make([]string, len(o.LoadModels))
			for i, l := range o.LoadModels {
				lines[i] = strings.Join(l, " ")
			}
			return strings.Join(lines, "; ")
		},
		set: func(o *Options, a []string) error {
			if len(a) < 4 {
				return errors.New("loadmodel needs: key backend device path [options]")
			}
			o.LoadModels = append(o.LoadModels, append([]string(nil), a...))
			return nil
		}})
	ds = append(ds, &directive{name: "user", multi: true,
		get: func(o *Options) string { return o.usersString() },
		set: func(o *Options, a []string) error { return o.addUser(a) }})
	m := make(map[string]*directive, len(ds))
	for _, d := range ds {
		m[d.name] = d
	}
	return m
}()

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

// ErrUnknown and ErrImmutable are returned by Set.
var (
	ErrUnknown   = errors.New("unknown option")
	ErrImmutable = errors.New("can't set immutable config")
)

// Set changes a directive at run time (CONFIG SET), refusing immutable ones.
func (o *Options) Set(name, value string) error {
	d, ok := directives[strings.ToLower(name)]
	if !ok || d.multi {
		return ErrUnknown
	}
	if !d.mutable {
		return ErrImmutable
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
	return nil
}

// SaveRule is one `save <seconds> <changes>` pair.
type SaveRule struct{ Seconds, Changes int64 }

// ParseSaveRules parses "3600 1 300 100"; "" means no automatic snapshots.
func ParseSaveRules(s string) ([]SaveRule, error) {
	f := strings.Fields(s)
	if len(f)%2 != 0 {
		return nil, errors.New("save needs pairs of <seconds> <changes>")
	}
	rules := make([]SaveRule, 0, len(f)/2)
	for i := 0; i < len(f); i += 2 {
		sec, err1 := strconv.ParseInt(f[i], 10, 64)
		ch, err2 := strconv.ParseInt(f[i+1], 10, 64)
		if err1 != nil || err2 != nil || sec < 1 || ch < 1 {
			return nil, fmt.Errorf("invalid save rule %q %q", f[i], f[i+1])
		}
		rules = append(rules, SaveRule{sec, ch})
	}
	return rules, nil
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func parseYesNo(s string) (bool, error) {
	switch strings.ToLower(s) {
	case "yes":
		return true, nil
	case "no":
		return false, nil
	}
	return false, errors.New("argument must be 'yes' or 'no'")
}

// ParseMemory parses a size with Redis units: 1k=1000, 1kb=1024, m/mb, g/gb.
func ParseMemory(s string) (int64, error) {
	l := strings.ToLower(s)
	mul := int64(1)
	for _, u := range []struct {
		suffix string
		mul    int64
	}{{"kb", 1 << 10}, {"mb", 1 << 20}, {"gb", 1 << 30}, {"k", 1000}, {"m", 1000 * 1000}, {"g", 1000 * 1000 * 1000}, {"b", 1}} {
		if strings.HasSuffix(l, u.suffix) {
			l, mul = strings.TrimSuffix(l, u.suffix), u.mul
			break
		}
	}
	n, err := strconv.ParseInt(l, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("invalid memory value %q", s)
	}
	if n > (1<<63-1)/mul {
		return 0, fmt.Errorf("memory value %q overflows", s)
	}
	return n * mul, nil
}

// SplitArgs splits a line into arguments like Redis's sdssplitargs: spaces
// separate, "double quotes" take \n \r \t \b \a \" \\ and \xHH escapes,
// 'single quotes' take \' only. A quote may open in the middle of an
// argument (a"b c" is one argument, ab c); a closing quote must be followed
// by white space or the end. As in C, a NUL byte ends the line.
func SplitArgs(line string) ([]string, error) {
	if j := strings.IndexByte(line, 0); j >= 0 {
		line = line[:j]
	}
	errUnbalanced := errors.New("unbalanced quotes")
	var out []string
	i := 0
	for {
		for i < len(line) && isSpace(line[i]) {
			i++
		}
		if i >= len(line) {
			return out, nil
		}
		cur := []byte{}
		inq, insq := false, false
		for done := false; !done; i++ {
			switch {
			case inq:
				if i >= len(line) {
					return nil, errUnbalanced
				}
				c := line[i]
				switch {
				case c == '\\' && i+3 < len(line) && line[i+1] == 'x' && isHex(line[i+2]) && isHex(line[i+3]):
					v, _ := strconv.ParseUint(line[i+2:i+4], 16, 8)
					cur = append(cur, byte(v))
					i += 3
				case c == '\\' && i+1 < len(line):
					i++
					switch c = line[i]; c {
					case 'n':
						c = '\n'
					case 'r':
						c = '\r'
					case 't':
						c = '\t'
					case 'b':
						c = '\b'
					case 'a':
						c = '\a'
					}
					cur = append(cur, c)
				case c == '"':
					if i+1 < len(line) && !isSpace(line[i+1]) {
						return nil, errUnbalanced
					}
					done = true
				default:
					cur = append(cur, c)
				}
			case insq:
				if i >= len(line) {
					return nil, errUnbalanced
				}
				c := line[i]
				switch {
				case c == '\\' && i+1 < len(line) && line[i+1] == '\'':
					i++
					cur = append(cur, '\'')
				case c == '\'':
					if i+1 < len(line) && !isSpace(line[i+1]) {
						return nil, errUnbalanced
					}
					done = true
				default:
					cur = append(cur, c)
				}
			case i >= len(line):
				done = true
			default:
				switch c := line[i]; c {
				case ' ', '\n', '\r', '\t':
					done = true
				case '"':
					inq = true
				case '\'':
					insq = true
				default:
					cur = append(cur, c)
				}
			}
		}
		out = append(out, string(cur))
	}
}

// isSpace is C's isspace in the "C" locale.
func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'
}

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}
