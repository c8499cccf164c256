package config

import (
	"fmt"
	"io"
	"strconv"
	"strings"
)

// doc is the documentation of one directive: what it means, the
// placeholder of its value where it has no default (args), and whether its
// value is a size (shown in Redis units).
type doc struct {
	text string
	args string
	mem  bool
}

// docs documents every directive of the table in config.go; a test fails
// when one is missing. `--help`, enclaveai.conf.example and the README's
// configuration table are generated from them and from the defaults.
var docs = map[string]doc{
	"port":                        {text: "TCP port of the RESP listener"},
	"bind":                        {text: "listen address (loopback unless configured)"},
	"dir":                         {text: "working directory: the sealed snapshot and the seal key live here"},
	"dbfilename":                  {text: "file name of the sealed snapshot in dir"},
	"requirepass":                 {text: "password of the default user; before AUTH a client cannot make the server allocate more than 16 KB a bulk", args: "<password>"},
	"user":                        {text: "may repeat: a named user for `AUTH name password` (also #<sha256 hex>, nopass, off, resetpass); with any configured, models and tensors belong to the user who stored them", args: "<name> on ><password>"},
	"maxclients":                  {text: "most clients connected at once"},
	"timeout":                     {text: "close clients idle for this many seconds (0: never)"},
	"proto-max-bulk-len":          {text: "largest single argument other than a model's BLOB chunks, refused on its length header before allocation", mem: true},
	"client-query-buffer-limit":   {text: "largest command, not counting the BLOB chunks of a model upload (bounded by max-model-size)", mem: true},
	"maxmemory":                   {text: "writes that would pass it get -OOM (0: no limit); model blobs count once however many keys share them", mem: true},
	"loglevel":                    {text: "debug, verbose, notice or warning"},
	"logfile":                     {text: "log file (empty: stderr); secrets and tensor contents are never logged", args: "<path>"},
	"onnxruntime-library":         {text: "path of libonnxruntime.so.1 (empty: beside the binary, then .cache/onnxruntime)", args: "<path>"},
	"max-models":                  {text: "beyond this many models the one stored longest ago is evicted, per user (0: no limit)"},
	"slowlog-log-slower-than":     {text: "SLOWLOG keeps the commands that ran at least this many microseconds (-1: none, 0: all); tensor and model bytes and passwords are never kept"},
	"latency-monitor-threshold":   {text: "LATENCY LATEST records the commands that ran at least this many milliseconds (0: none)"},
	"slowlog-max-len":             {text: "SLOWLOG keeps this many commands, the newest"},
	"inference-engine":            {text: "onnxruntime: ONNX Runtime, placed as engine-isolation says; go: the pure-Go engine (package goengine), the only one a CGO_ENABLED=0 or enclave build has, where it is the default; a model using an operator it lacks is refused at AI.MODELSTORE naming the operator (docs/ENCLAVE.md)"},
	"jwt-public-key-file":         {text: "PEM file of ECDSA P-256 public keys (several for rotation; PUBLIC KEY or CERTIFICATE blocks): turns on token authentication, AUTH <token>, AUTH <user> <token>, HELLO 3 AUTH <user> <token>; only ES256 tokens are accepted; a bad file stops the start", args: "<path>"},
	"jwt-issuer":                  {text: "when set, a token's iss must equal it", args: "<issuer>"},
	"jwt-audience":                {text: "when set, a token's aud must include it", args: "<audience>"},
	"jwt-leeway":                  {text: "seconds of clock skew allowed on a token's exp and nbf (0 to 300)"},
	"allow-modelstore":            {text: "no: AI.MODELSTORE, AI.MODELSET, AI.MODELDEL, and DEL, UNLINK, RENAME, EXPIRE, FLUSHALL of a model are refused: only loadmodel models exist"},
	"modelstore-requires-auth":    {text: "yes: uploads only from a client authenticated as a named user (a user directive or a token's sub), refused before any byte is buffered"},
	"max-model-bytes-per-user":    {text: "bound on the bytes of the model blobs under each user's keys (0: none); an upload past it is refused on the length header of the chunk that passes it", mem: true},
	"threads-per-queue":           {text: "workers of the run queue: at most this many model runs at once, however many clients (RedisAI's THREADS_PER_QUEUE, whose default is 1; AI.CONFIG changes it live; 0: one per CPU)"},
	"intra-op-parallelism":        {text: "threads of one model run (RedisAI's INTRA_OP_PARALLELISM; 0: one, the run queue worker's own, so runs use the cores side by side and no ONNX Runtime thread spins; AI.CONFIG sets it for models stored later)"},
	"inter-op-parallelism":        {text: "threads running independent operators of one run in parallel (RedisAI's INTER_OP_PARALLELISM; 0: none; AI.CONFIG sets it for models stored later)"},
	"max-model-size":              {text: "largest model, in one BLOB argument or many chunks; an upload past it is refused on the length header of the chunk that passes it", mem: true},
	"model-dir":                   {text: "the only directory AI.MODELSTORE ... FILE path may read (empty: FILE is refused)", args: "<path>"},
	"seal-key-file":               {text: "simulation mode only: the 256-bit key that seals snapshots (docs/ENCLAVE.md)"},
	"tls-port":                    {text: "TLS listener (0: none); its key is made at start unless tls-cert-file and tls-key-file are set"},
	"tls-cert-file":               {text: "PEM certificate of the TLS listener", args: "<path>"},
	"tls-key-file":                {text: "PEM private key of the TLS listener", args: "<path>"},
	"seal-policy":                 {text: "SGX mode: product (snapshots survive signed upgrades) or unique (only this exact build reads them)"},
	"save":                        {text: "snapshot rules, `<seconds> <changes>` pairs as Redis's (empty: no automatic snapshots)"},
	"cluster-enabled":             {text: "Redis Cluster mode: keys hash to 16384 slots, an external controller (kvrocks-controller, enclaveai-cli cluster) pushes which node serves which with CLUSTERX SETNODES, other nodes' keys get -MOVED (docs/CLUSTER.md)"},
	"cluster-config-file":         {text: "file in dir keeping the cluster node's id, topology and version across restarts (checksummed, replaced atomically)"},
	"appendonly":                  {text: "the sealed append-only log: every acknowledged write is written to the OS before its reply (docs/DURABILITY.md)"},
	"appendfsync":                 {text: "always (fsync before each reply), everysec (fsync every second), no (the OS decides)"},
	"appenddirname":               {text: "the log's directory under dir: manifest, base and incr files, sealed model files"},
	"auto-aof-rewrite-percentage": {text: "rewrite the log (as BGREWRITEAOF) once it has grown by this much (%) over its base and is at least auto-aof-rewrite-min-size"},
	"auto-aof-rewrite-min-size":   {text: "the smallest log auto-aof-rewrite-percentage rewrites", mem: true},
	"aof-load-truncated":          {text: "yes: a torn last record (a write cut short by a crash) is cut off at start and logged; no: the start stops"},
	"load-bad-snapshot":           {text: "yes: a snapshot (or append-only log) that fails verification is moved aside and the server starts empty (from the snapshot, for a bad log)"},
	"engine-isolation":            {text: "where ONNX Runtime runs: per-tenant in worker processes (with users, each user's models in workers of their own), shared in workers shared by all, off in the server process (docs/ENGINE_ISOLATION.md)"},
	"engine-workers":              {text: "worker processes per placement group (0: one per 8 cores, 1 to 8)"},
	"engine-worker-memory":        {text: "each worker's memory limit, RLIMIT_DATA (0: half the machine's memory); a worker that passes it dies alone", mem: true},
	"engine-store-timeout":        {text: "seconds a worker may take to create a session; past it the worker is killed and the store refused"},
	"loadmodel":                   {text: "may repeat: a model stored at start (owned by the default user)", args: "<key> ONNX CPU </path/model.onnx> [TAG t] [BATCHSIZE n]"},
}

// Doc returns a directive's meaning ("" for an unknown one).
func Doc(name string) string { return docs[name].text }

// DefaultValue is a directive's default as a configuration file writes it:
// sizes in Redis units, "" quoted, and "" for a repeated directive.
func DefaultValue(name string) string {
	d, ok := directives[name]
	if !ok || d.multi {
		return ""
	}
	v := d.get(Default())
	if docs[name].mem {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			v = formatMemory(n)
		}
	}
	if v == "" || strings.ContainsAny(v, " \t") {
		v = strconv.Quote(v)
	}
	return v
}

// formatMemory writes n in the largest Redis unit that divides it.
func formatMemory(n int64) string {
	for _, u := range []struct {
		suffix string
		size   int64
	}{{"gb", 1 << 30}, {"mb", 1 << 20}, {"kb", 1 << 10}} {
		if n != 0 && n%u.size == 0 {
			return strconv.FormatInt(n/u.size, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10)
}

// Help writes every directive with its default and meaning, as
// `enclaveai-server --help` shows them.
func Help(w io.Writer) {
	for _, name := range Names() {
		d := directives[name]
		value := DefaultValue(name)
		if d.multi || value == `""` {
			value = docs[name].args
		}
		mut := ""
		if d.mutable {
			mut = " (CONFIG SET)"
		}
		fmt.Fprintf(w, "  --%s %s\n      %s%s\n", name, value, docs[name].text, mut)
	}
}

// Example writes enclaveai.conf.example: every directive, commented out at
// its default, under its meaning.
func Example(w io.Writer) {
	fmt.Fprint(w, `# EnclaveAI configuration: one "directive value" per line, as redis.conf.
# Start with: bin/enclaveai-server enclaveai.conf [--directive value ...]
# Every directive is shown at its default, commented out. Sizes take Redis
# units (1k = 1000, 1kb = 1024, mb, gb). Generated from the directive table
# (config/help.go): go test ./config -run TestExample -update
`)
	for _, name := range Names() {
		d := directives[name]
		value := DefaultValue(name)
		if d.multi || value == `""` {
			value = docs[name].args
		}
		fmt.Fprintf(w, "\n# %s\n# %s %s\n", wrap(docs[name].text, "# "), name, value)
	}
}

// Markdown is the README's configuration table.
func Markdown() string {
	var b strings.Builder
	b.WriteString("| directive | default | |\n|---|---|---|\n")
	for _, name := range Names() {
		value := DefaultValue(name)
		if directives[name].multi || value == `""` {
			value = "none"
		} else {
			value = "`" + value + "`"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", name, value, strings.ReplaceAll(docs[name].text, "|", `\|`))
	}
	return b.String()
}

// wrap breaks text at 76 columns, continuing lines with prefix.
func wrap(text, prefix string) string {
	var b strings.Builder
	n := 0
	for i, word := range strings.Fields(text) {
		if i > 0 && n+1+len(word) > 76 {
			b.WriteString("\n" + prefix)
			n = 0
		} else if i > 0 {
			b.WriteByte(' ')
			n++
		}
		b.WriteString(word)
		n += len(word)
	}
	return b.String()
}
