package commands

import (
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"strings"

	"github.com/enclaveai/enclaveai/modelstore"
)

// EnclaveAI answers as Redis 7 with RedisAI 1.2.7 loaded as module "ai"
// (../shared/REDISAI.md §6): MODULE LIST and HELLO list it, INFO's Modules
// section names it, and its INFO sections (ai_versions, ai_git,
// ai_load_time_configs, ai_backends_info, ai_cpu) come with INFO modules,
// INFO ai and INFO everything.
const (
	moduleName    = "ai"
	moduleVersion = 10207 // RedisAI 1.2.7, as MODULE LIST gives it
)

// Revision is the build's git revision (INFO's ai_git_sha); the main
// package sets it at start.
var Revision = "unknown"

func init() {
	register(&Spec{Name: "module", Arity: -2, Flags: Admin, Group: "server",
		Summary: "MODULE LIST: RedisAI, built in as module ai. Modules cannot be loaded or unloaded.",
		Parse:   parseModule, Subs: []Sub{
			{"LIST", "The modules: RedisAI 1.2.7, as module ai, built in."},
			{"LOAD <path> [<arg> ...]", "Refused: modules cannot be loaded."},
			{"UNLOAD <name>", "Refused: modules cannot be unloaded."},
		}})
	for _, sec := range []InfoSection{
		{Name: "ai_versions", Fields: func(*App) [][2]string {
			return [][2]string{{"ai_RedisAI_version", "1.2.7"}, {"ai_low_level_API_version", "1"}, {"ai_rdb_version", "4"}}
		}},
		{Name: "ai_git", Fields: func(*App) [][2]string { return [][2]string{{"ai_git_sha", Revision}} }},
		{Name: "ai_load_time_configs", Fields: aiConfigsInfo},
		{Name: "ai_backends_info", Fields: aiBackendsInfo},
		{Name: "ai_cpu", Fields: func(*App) [][2]string {
			self, children := cpuTimes()
			return [][2]string{
				{"ai_self_used_cpu_sys", self[0]}, {"ai_self_used_cpu_user", self[1]},
				{"ai_children_used_cpu_sys", children[0]}, {"ai_children_used_cpu_user", children[1]},
			}
		}},
	} {
		sec.Module = true
		RegisterInfoSection(sec)
	}
}

// aiConfigsInfo is ai_load_time_configs: the AI.CONFIG settings as they
// are now (RedisAI's can only be set at load; ours can change since).
func aiConfigsInfo(s *App) [][2]string {
	return [][2]string{
		{"ai_threads_per_queue", itoa(s.AI.ThreadsPerQueue.Load())},
		{"ai_inter_op_parallelism", itoa(s.AI.InterOpParallelism.Load())},
		{"ai_intra_op_parallelism", itoa(s.AI.IntraOpParallelism.Load())},
		{"ai_model_execution_timeout", itoa(s.AI.ModelExecutionTimeout.Load())},
		{"ai_backend_memory_limit", "0"},
	}
}

// aiBackendsInfo is ai_backends_info, for ONNX Runtime (not the pure-Go
// engine of an enclave build): its version once it is loaded, in this
// process (engine-isolation off) or in an engine worker, and how
// many runs may be in flight at once (RedisAI's
// maximum_run_sessions_number: the run queue's workers). RedisAI's
// ai_onnxruntime_memory counts its allocator's bytes, which this server
// does not track: it is left out rather than made up.
func aiBackendsInfo(s *App) [][2]string {
	if !strings.HasPrefix(s.Models.Engine().Name(), "onnxruntime") {
		return nil
	}
	var out [][2]string
	v := modelstore.RuntimeVersion()
	if p, ok := s.Models.Engine().(interface{ RuntimeVersion() string }); ok {
		v = p.RuntimeVersion() // engine workers': this process has not loaded it
	}
	if v != "" {
		out = append(out, [2]string{"ai_onnxruntime_version", v})
	}
	return append(out, [2]string{"ai_onnxruntime_maximum_run_sessions_number", itoa(s.AI.ThreadsPerQueue.Load())})
}

// modulesInfo is INFO's Modules section, in Redis 7's format.
func modulesInfo(*App) [][2]string {
	return [][2]string{{"module", "name=" + moduleName + ",ver=" + strconv.Itoa(moduleVersion) +
		",api=1,filters=0,usedby=[],using=[],options=[]"}}
}

// writeModules writes the list of modules as MODULE LIST and HELLO give
// it: one map (name, ver, path, args) for RedisAI.
func writeModules(w *Writer) {
	w.Array(1)
	w.Map(4)
	w.BulkString("name")
	w.BulkString(moduleName)
	w.BulkString("ver")
	w.Int(moduleVersion)
	w.BulkString("path")
	w.BulkString(executable())
	w.BulkString("args")
	w.Array(0)
}

func parseModule(a Args) (Runner, error) {
	sub := strings.ToUpper(a.NextString())
	switch sub {
	case "LIST":
		if a.More() {
			return nil, subArityOf("module", sub)
		}
		return moduleListCmd{}, nil
	case "LOAD", "LOADEX":
		if !a.More() {
			return nil, subArityOf("module", sub)
		}
		return nil, Reply("ERR Error loading the extension. Please check the server logs.")
	case "UNLOAD":
		if a.Remaining() != 1 {
			return nil, subArityOf("module", sub)
		}
		if strings.EqualFold(a.NextString(), moduleName) {
			return nil, Reply("ERR Error unloading module: the module exports one or more module-side data types, can't unload")
		}
		return nil, Reply("ERR Error unloading module: no such module with that name")
	}
	return nil, unknownSub("module", a.V[1])
}

// moduleListCmd is MODULE LIST.
type moduleListCmd struct{}

// Run implements Runner.
func (moduleListCmd) Run(x *Ctx) error {
	writeModules(x.W)
	return nil
}

// randomHex is n random bytes in hex.
func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b) // crypto/rand does not fail
	return hex.EncodeToString(b)
}
