package commands

import (
	"bytes"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/enclaveai/enclaveai/config"
	"github.com/enclaveai/enclaveai/modelstore"
)

func init() {
	admin := func(s *Spec) *Spec { s.Group = "server"; return s }
	register(
		admin(&Spec{Name: "info", Arity: -1, Flags: LoadingOK,
			Summary: "Returns information and statistics about the server.", Syntax: "[section [section ...]]", Parse: parseInfo}),
		admin(&Spec{Name: "config", Arity: -2, Flags: Admin | LoadingOK,
			Summary: "CONFIG GET, SET and RESETSTAT.", Parse: parseConfig, Subs: []Sub{
				{"GET <pattern> [<pattern> ...]", "The directives whose names match a glob-style pattern, with their values."},
				{"SET <directive> <value> [<directive> <value> ...]", "Sets directives that may change at run time: all of them or none."},
				{"RESETSTAT", "Resets INFO's statistics: commands, connections, errors, network bytes, the memory peak."},
			}}),
		admin(&Spec{Name: "time", Arity: 1, Flags: Fast | LoadingOK, Summary: "Returns the server time.", Parse: parseTime}),
		admin(&Spec{Name: "role", Arity: 1, Flags: Fast | LoadingOK,
			Summary: "Returns the replication role: master, with no replicas (EnclaveAI does not replicate).", Parse: parseRole}),
		admin(&Spec{Name: "command", Arity: -1, Flags: LoadingOK,
			Summary: "Describes the commands: COUNT, INFO, DOCS, LIST, GETKEYS.", Parse: parseCommand, Subs: []Sub{
				{"(no subcommand)", "Every command's details: name, arity, flags, key positions."},
				{"COUNT", "The number of commands."},
				{"INFO [<command-name> ...]", "The details of the named commands, or of every command."},
				{"DOCS [<command-name> ...]", "The summary and group of the named commands, or of every command."},
				{"LIST [FILTERBY (MODULE <module-name>|ACLCAT <category>|PATTERN <pattern>)]", "The commands' names: every one, the module ai's, those of an ACL category (as COMMAND INFO gives them), or those matching the pattern."},
				{"GETKEYS <full-command>", "The keys a command's arguments name."},
			}}),
		admin(&Spec{Name: "shutdown", Arity: -1, Flags: Admin | LoadingOK | NoTxLock | NoMulti,
			Summary: "Stops the server.", Syntax: "[NOSAVE | SAVE]", Parse: parseShutdown}),
	)
}

func parseTime(a Args) (Runner, error) {
	return timeCmd{}, nil
}

// timeCmd is TIME.
type timeCmd struct{}

// Run implements Runner.
func (timeCmd) Run(x *Ctx) error {
	now := time.Now()
	x.W.Array(2)
	x.W.BulkString(strconv.FormatInt(now.Unix(), 10))
	x.W.BulkString(strconv.FormatInt(int64(now.Nanosecond()/1000), 10))
	return nil
}

func parseRole(a Args) (Runner, error) {
	return roleCmd{}, nil
}

// roleCmd is ROLE: a master's reply, at offset 0 with no replicas.
type roleCmd struct{}

// Run implements Runner.
func (roleCmd) Run(x *Ctx) error {
	x.W.Array(3)
	x.W.BulkString("master")
	x.W.Int(0)
	x.W.Array(0)
	return nil
}

func parseShutdown(a Args) (Runner, error) {
	var nosave, save, other, abort bool
	for a.More() {
		switch {
		case a.Match("NOSAVE"):
			nosave = true
		case a.Match("SAVE"):
			save = true
		case a.Match("NOW"), a.Match("FORCE"):
			other = true // nothing to wait for or to force: no replicas
		case a.Match("ABORT"):
			abort = true
		default:
			return nil, errSyntax
		}
	}
	// As Redis 7: ABORT goes alone, and NOSAVE and SAVE contradict.
	switch {
	case abort && (nosave || save || other), nosave && save:
		return nil, errSyntax
	case abort:
		// A shutdown here never waits (for replicas): none is ever in
		// progress to abort.
		return nil, errNoShutdown
	case nosave:
		return shutdownCmd{save: 0}, nil
	case save:
		return shutdownCmd{save: 1}, nil
	}
	return shutdownCmd{save: -1}, nil // as configured
}

// errNoShutdown is Redis 7's SHUTDOWN ABORT with no shutdown in progress.
const errNoShutdown Reply = "ERR No shutdown in progress."

// shutdownCmd is SHUTDOWN [NOSAVE | SAVE]: save is 0 (NOSAVE), 1 (SAVE) or -1 (as configured).
type shutdownCmd struct{ save int }

// Run implements Runner.
func (c shutdownCmd) Run(x *Ctx) error {
	if x.Shutdown == nil {
		return Reply("ERR shutdown is not available")
	}
	if err := x.Shutdown(c.save == 1 || (c.save == -1 && x.SaveRulesConfigured())); err != nil {
		return errorf("ERR Errors trying to SHUTDOWN. Check logs.")
	}
	x.C.closeAfter = true
	return nil
}

func parseConfig(a Args) (Runner, error) {
	sub := strings.ToUpper(a.NextString())
	switch sub {
	case "GET":
		if !a.More() {
			return nil, subArityOf("config", sub)
		}
		patterns := a.Rest()
		return configGetCmd{patterns: patterns}, nil
	case "SET":
		if a.Remaining() < 2 {
			return nil, subArityOf("config", sub)
		}
		return parseConfigSet(a)
	case "RESETSTAT":
		if a.More() {
			return nil, subArityOf("config", sub)
		}
		return configResetStatCmd{}, nil
	}
	return nil, unknownSub("config", a.V[1])
}

// configResetStatCmd is CONFIG RESETSTAT.
type configResetStatCmd struct{}

// Run implements Runner.
func (configResetStatCmd) Run(x *Ctx) error {
	st := x.Stats()
	for _, c := range []interface{ Store(int64) }{&st.Commands, &st.Connections, &st.Rejected, &st.ExpiredKeys, &st.EvictedKeys, &st.Errors, &st.NetInput, &st.NetOutput} {
		c.Store(0)
	}
	x.errStats.reset()
	for _, spec := range table.Sorted() {
		spec.stats.reset() // INFO commandstats
	}
	x.usedPeak.Store(0) // as Redis's stat_peak_memory
	x.W.OK()
	return nil
}

// configSetCmd is CONFIG SET directive value [directive value ...]: every
// name known, settable and given once (parseConfigSet).
type configSetCmd struct{ pairs []configPair }

// configPair is one directive of CONFIG SET and its new value; name is as
// the client spelled it, which Redis's replies quote.
type configPair struct{ name, value string }

// parseConfigSet reads CONFIG SET's pairs after the subcommand. As Redis 7,
// an odd count is a syntax error, and every name is checked before any
// value is set: the first unknown, immutable or repeated one answers.
// Inside MULTI these refusals are queued, as Redis's are: they are not
// tableErrors.
func parseConfigSet(a Args) (Runner, error) {
	if a.Remaining()%2 != 0 {
		return nil, errSyntax // as Redis: pairs only
	}
	c := configSetCmd{pairs: make([]configPair, 0, a.Remaining()/2)}
	seen := map[string]bool{}
	for a.More() {
		p := configPair{name: a.NextString(), value: a.NextString()}
		if err := config.Settable(p.name); err != nil {
			return nil, configSetError{arg: p.name, err: err}
		}
		canon := strings.ToLower(p.name)
		if seen[canon] {
			return nil, configSetError{arg: p.name, err: errDuplicateParam}
		}
		seen[canon] = true
		c.pairs = append(c.pairs, p)
	}
	return c, nil
}

// Run implements Runner: all or nothing, as Redis 7. If a value is
// refused, the directives already set get their old values back.
func (c configSetCmd) Run(x *Ctx) error {
	old := make([]string, len(c.pairs))
	for i, p := range c.pairs {
		old[i], _ = x.Opts.Get(p.name) // known: parseConfigSet checked
	}
	for i, p := range c.pairs {
		if err := x.Opts.Set(p.name, p.value); err != nil {
			for j := range c.pairs[:i] {
				x.Opts.Set(c.pairs[j].name, old[j])
			}
			return configSetError{arg: p.name, err: err}
		}
	}
	if l := x.App.aof(); l != nil {
		x.App.applyFsyncPolicy(l)
	}
	x.W.OK()
	return nil
}

// configGetCmd is CONFIG GET pattern [pattern ...].
type configGetCmd struct{ patterns [][]byte }

// Run implements Runner.
func (c configGetCmd) Run(x *Ctx) error {
	var pairs []string
	seen := map[string]bool{}
	for _, name := range config.Names() {
		for _, p := range c.patterns {
			if !seen[name] && globMatch([]byte(strings.ToLower(string(p))), []byte(name)) {
				v, _ := x.Opts.Get(name)
				shown := name
				if !bytes.ContainsAny(p, "[*?") {
					shown = string(p) // as Redis 7.0: a name is answered as asked
				}
				pairs = append(pairs, shown, v)
				seen[name] = true
			}
		}
	}
	x.W.Map(len(pairs) / 2)
	for _, s := range pairs {
		x.W.BulkString(s)
	}
	return nil
}

// InfoSection is one section of INFO. This file's are Redis's own; other
// layers (models, persistence, enclave) register theirs at start.
type InfoSection struct {
	Name   string
	Fields func(s *App) [][2]string
	// NotDefault sections are shown only when asked for by name, or by
	// "all" or "everything" (as Redis's commandstats).
	NotDefault bool
	// Module sections are RedisAI's (ai_*): shown, as a module's in Redis
	// 7, for "modules", "everything", the module's name ("ai") or their
	// own, never by default or for "all".
	Module bool
	// AdminOnly sections, with users, are shown to admins only (isAdmin):
	// they tell of other users' models.
	AdminOnly bool
}

var extraSections []InfoSection

// RegisterInfoSection adds a section to INFO: after Redis's sections
// (infoOrder places those it names among them), in the order registered.
func RegisterInfoSection(sec InfoSection) { extraSections = append(extraSections, sec) }

// infoOrder is Redis 7's order of its INFO sections, registered ones
// (Persistence, Commandstats, Cluster) included.
var infoOrder = []string{"Server", "Clients", "Memory", "Persistence", "Stats", "Replication", "CPU",
	"Modules", "Commandstats", "Errorstats", "Cluster", "Keyspace"}

// builtinSections are the sections of this file.
var builtinSections = []InfoSection{
	{Name: "Server", Fields: serverInfo}, {Name: "Clients", Fields: clientsInfo},
	{Name: "Memory", Fields: memoryInfo}, {Name: "Stats", Fields: statsInfo},
	{Name: "Replication", Fields: replicationInfo}, {Name: "CPU", Fields: cpuInfo},
	{Name: "Modules", Fields: modulesInfo}, {Name: "Errorstats", Fields: errorStatsInfo},
	{Name: "Keyspace", Fields: keyspaceInfo},
}

func parseInfo(a Args) (Runner, error) {
	sections := keyStrings(a.Rest())
	return infoCmd{sections: sections}, nil
}

// infoCmd is INFO [section ...].
type infoCmd struct{ sections []string }

// Run implements Runner.
func (c infoCmd) Run(x *Ctx) error {
	x.W.Verbatim(x.Info(c.sections, !x.Opts.UsersEnabled() || x.isAdmin(x.C)))
	return nil
}

// Info renders INFO in Redis's format for the requested sections (all the
// default ones when none, "all" or "everything"); AdminOnly sections only
// when admin is set.
func (s *App) Info(sections []string, admin bool) string {
	want := map[string]bool{}
	all, every := len(sections) == 0, false
	for _, sec := range sections {
		sec = strings.ToLower(sec)
		if sec == "all" || sec == "everything" || sec == "default" {
			all = true
		}
		every = every || sec == "all" || sec == "everything"
		want[sec] = true
	}
	var b strings.Builder
	for _, sec := range s.infoSections(func(sec *InfoSection) bool {
		name := strings.ToLower(sec.Name)
		switch {
		case sec.AdminOnly && !admin:
			return false
		case sec.Module:
			return want["everything"] || want["modules"] || want[moduleName] || want[name]
		case sec.NotDefault:
			return every || want[name]
		}
		return all || want[name]
	}) {
		if b.Len() > 0 {
			b.WriteString("\r\n")
		}
		fmt.Fprintf(&b, "# %s\r\n", sec.name)
		for _, f := range sec.fields {
			b.WriteString(f[0])
			b.WriteByte(':')
			b.WriteString(f[1])
			b.WriteString("\r\n")
		}
	}
	return b.String()
}

// infoSection is one section of INFO, its fields in order.
type infoSection struct {
	name   string
	fields [][2]string
}

// infoSections computes the sections of INFO that want accepts, in INFO's
// order: Redis's (infoOrder), then the other registered ones, then the
// module's. INFO and the metrics endpoint (Metrics) read the same figures
// here.
func (s *App) infoSections(want func(sec *InfoSection) bool) []infoSection {
	secs := slices.Concat(builtinSections, extraSections)
	rank := func(sec *InfoSection) int {
		if i := slices.Index(infoOrder, sec.Name); i >= 0 {
			return i
		}
		if sec.Module {
			return len(infoOrder) + 1
		}
		return len(infoOrder)
	}
	slices.SortStableFunc(secs, func(a, b InfoSection) int { return rank(&a) - rank(&b) })
	var out []infoSection
	for i := range secs {
		if want(&secs[i]) {
			out = append(out, infoSection{secs[i].Name, secs[i].Fields(s)})
		}
	}
	return out
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func serverInfo(s *App) [][2]string {
	uptime := int64(time.Since(s.started).Seconds())
	port, _ := s.Opts.Get("port")
	return [][2]string{
		{"redis_version", RedisVersion}, {"enclaveai_version", Version},
		{"redis_mode", s.redisMode()}, {"os", runtime.GOOS + " " + runtime.GOARCH},
		{"arch_bits", "64"}, {"go_version", runtime.Version()},
		{"process_id", itoa(int64(os.Getpid()))}, {"run_id", s.runID}, {"tcp_port", port},
		{"uptime_in_seconds", itoa(uptime)}, {"uptime_in_days", itoa(uptime / 86400)},
		{"hz", "10"}, // Tick's rate, as Redis's serverCron's
		{"executable", executable()},
		// The engine that compiles new models (AI.MODELINFO's engine is
		// the one that compiled each).
		{"inference_engine", s.Models.Engine().Name()},
	}
}

func clientsInfo(s *App) [][2]string {
	return [][2]string{
		{"connected_clients", itoa(int64(s.NumClients()))},
		{"maxclients", itoa(s.Opts.MaxClients.Load())},
		{"blocked_clients", itoa(modelstore.Requests() + s.waiting.Load())},
	}
}

func memoryInfo(s *App) [][2]string {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	rss, peak := processRSS(), s.UsedMemoryPeak()
	return [][2]string{
		{"used_memory", itoa(s.UsedMemory())}, {"used_memory_human", humanBytes(s.UsedMemory())},
		{"used_memory_rss", itoa(rss)}, {"used_memory_rss_human", humanBytes(rss)},
		// As Redis's, the peak of used_memory (it was the process's peak
		// RSS: operator review); that is used_memory_rss_peak.
		{"used_memory_peak", itoa(peak)}, {"used_memory_peak_human", humanBytes(peak)},
		{"used_memory_rss_peak", itoa(peakRSS())},
		{"used_memory_go_heap", itoa(int64(ms.HeapInuse))},
		{"maxmemory", itoa(s.Opts.MaxMemory.Load())}, {"maxmemory_human", humanBytes(s.Opts.MaxMemory.Load())},
		{"maxmemory_policy", "noeviction"},
	}
}

func statsInfo(s *App) [][2]string {
	st := &s.stats
	return [][2]string{
		{"total_connections_received", itoa(st.Connections.Load())},
		{"total_commands_processed", itoa(st.Commands.Load())},
		{"instantaneous_ops_per_sec", itoa(s.opsPerSec())},
		{"total_net_input_bytes", itoa(st.NetInput.Load())},
		{"total_net_output_bytes", itoa(st.NetOutput.Load())},
		{"rejected_connections", itoa(st.Rejected.Load())},
		{"expired_keys", itoa(st.ExpiredKeys.Load())},
		{"evicted_keys", itoa(st.EvictedKeys.Load())},
		{"total_error_replies", itoa(st.Errors.Load())},
	}
}

// replicationInfo is a primary's without replicas: EnclaveAI does not
// replicate (a sealed keyspace is not sent to another process).
func replicationInfo(s *App) [][2]string {
	return [][2]string{
		{"role", "master"}, {"connected_slaves", "0"}, {"master_failover_state", "no-failover"},
		{"master_replid", s.replID}, {"master_replid2", strings.Repeat("0", 40)},
		{"master_repl_offset", "0"}, {"second_repl_offset", "-1"},
		{"repl_backlog_active", "0"}, {"repl_backlog_size", "0"},
		{"repl_backlog_first_byte_offset", "0"}, {"repl_backlog_histlen", "0"},
	}
}

// cpuInfo is the process's CPU time, in seconds, and its waited-for
// children's (engine workers that have ended).
func cpuInfo(*App) [][2]string {
	self, children := cpuTimes()
	return [][2]string{
		{"used_cpu_sys", self[0]}, {"used_cpu_user", self[1]},
		{"used_cpu_sys_children", children[0]}, {"used_cpu_user_children", children[1]},
	}
}

// cpuTimes reads getrusage: system and user seconds of the process and of
// its children, as INFO formats them (zero where unavailable).
func cpuTimes() (self, children [2]string) {
	read := func(who int) [2]string {
		var ru syscall.Rusage
		if syscall.Getrusage(who, &ru) != nil {
			return [2]string{"0.000000", "0.000000"}
		}
		sec := func(t syscall.Timeval) string {
			return fmt.Sprintf("%d.%06d", t.Sec, t.Usec)
		}
		return [2]string{sec(ru.Stime), sec(ru.Utime)}
	}
	return read(syscall.RUSAGE_SELF), read(syscall.RUSAGE_CHILDREN)
}

func keyspaceInfo(s *App) [][2]string {
	n, exp := s.Keys.Len()
	if n == 0 {
		return nil
	}
	return [][2]string{{"db0", fmt.Sprintf("keys=%d,expires=%d,avg_ttl=%d", n, exp, s.Keys.AvgTTL())}}
}

func executable() string {
	p, err := os.Executable()
	if err != nil {
		return ""
	}
	return p
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2fG", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.2fM", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.2fK", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%dB", n)
}

// processRSS reads the resident set size from /proc (0 where unavailable).
func processRSS() int64 { return procStatusKB("VmRSS:") * 1024 }

// peakRSS is the high-water mark of the resident set size.
func peakRSS() int64 { return procStatusKB("VmHWM:") * 1024 }

func procStatusKB(field string) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return n
		}
	}
	return 0
}

func parseCommand(a Args) (Runner, error) {
	if !a.More() {
		return commandCmd{}, nil
	}
	sub := strings.ToUpper(a.NextString())
	names := keyStrings(a.Rest())
	switch sub {
	case "COUNT":
		if len(names) != 0 {
			return nil, subArityOf("command", sub)
		}
		return commandCountCmd{}, nil
	case "LIST":
		return parseCommandList(a.V[2:])
	case "INFO":
		return commandInfoCmd{names: names}, nil
	case "GETKEYS":
		keys, err := commandGetKeys(a.V[2:])
		if err != nil {
			return nil, err
		}
		return commandGetKeysCmd{keys: keys}, nil
	case "DOCS":
		return commandDocsCmd{names: names}, nil
	}
	return nil, unknownSub("command", a.V[1])
}

// commandDocsCmd is COMMAND DOCS [name ...].
type commandDocsCmd struct{ names []string }

// Run implements Runner.
func (c commandDocsCmd) Run(x *Ctx) error {
	var specs []*Spec
	if len(c.names) == 0 {
		specs = table.Sorted()
	}
	for _, n := range c.names {
		if s := table.Lookup([]byte(n)); s != nil {
			specs = append(specs, s)
		}
	}
	x.W.Map(len(specs))
	for _, s := range specs {
		x.W.BulkString(s.Name)
		writeCommandDoc(x.W, s)
	}
	return nil
}

// commandGetKeysCmd is COMMAND GETKEYS command [arg ...], the keys found at parse.
type commandGetKeysCmd struct{ keys []string }

// Run implements Runner.
func (c commandGetKeysCmd) Run(x *Ctx) error {
	x.W.StringList(c.keys)
	return nil
}

// commandInfoCmd is COMMAND INFO [name ...].
type commandInfoCmd struct{ names []string }

// Run implements Runner.
func (c commandInfoCmd) Run(x *Ctx) error {
	specs := table.Sorted()
	if len(c.names) > 0 {
		specs = specs[:0]
		for _, n := range c.names {
			specs = append(specs, table.Lookup([]byte(n)))
		}
	}
	x.W.Array(len(specs))
	for _, s := range specs {
		if s == nil {
			x.W.Null() // redis-server 7: $-1
		} else {
			writeCommandInfo(x.W, s)
		}
	}
	return nil
}

// parseCommandList reads COMMAND LIST's arguments (rest), as Redis 7.0:
// none, or FILTERBY MODULE name | ACLCAT category | PATTERN pattern.
func parseCommandList(rest [][]byte) (Runner, error) {
	if len(rest) == 0 {
		return commandListCmd{}, nil
	}
	if len(rest) != 3 || !isWord(rest[0], "FILTERBY") {
		return nil, errSyntax
	}
	arg := rest[2]
	switch strings.ToUpper(string(rest[1])) {
	case "MODULE":
		// RedisAI's commands are the module ai's.
		return commandListCmd{keep: func(s *Spec) bool { return isAI(s) && strings.EqualFold(string(arg), moduleName) }}, nil
	case "ACLCAT":
		cat := "@" + strings.ToLower(string(arg))
		return commandListCmd{keep: func(s *Spec) bool { return slices.Contains(s.Categories(), cat) }}, nil
	case "PATTERN":
		pattern := []byte(strings.ToLower(string(arg)))
		return commandListCmd{keep: func(s *Spec) bool { return globMatch(pattern, []byte(s.Name)) }}, nil
	}
	return nil, errSyntax
}

// commandListCmd is COMMAND LIST [FILTERBY ...]: the commands keep keeps
// (nil: every one).
type commandListCmd struct{ keep func(*Spec) bool }

// Run implements Runner.
func (c commandListCmd) Run(x *Ctx) error {
	var names []string
	for _, s := range table.Sorted() {
		if c.keep == nil || c.keep(s) {
			names = append(names, s.Name)
		}
	}
	x.W.StringList(names)
	return nil
}

// commandCountCmd is COMMAND COUNT.
type commandCountCmd struct{}

// Run implements Runner.
func (commandCountCmd) Run(x *Ctx) error {
	x.W.Int(int64(len(table)))
	return nil
}

// commandCmd is COMMAND: every command's entry.
type commandCmd struct{}

// Run implements Runner.
func (commandCmd) Run(x *Ctx) error {
	specs := table.Sorted()
	x.W.Array(len(specs))
	for _, s := range specs {
		writeCommandInfo(x.W, s)
	}
	return nil
}

// writeCommandInfo writes one COMMAND entry in Redis 7's 10-element shape.
func writeCommandInfo(w *Writer, s *Spec) {
	w.Array(10)
	w.BulkString(s.Name)
	w.Int(int64(s.Arity))
	flags := s.FlagNames()
	w.Set(len(flags))
	for _, f := range flags {
		w.Simple(f)
	}
	w.Int(int64(s.FirstKey))
	w.Int(int64(s.LastKey))
	w.Int(int64(s.Step))
	cats := s.Categories()
	w.Set(len(cats))
	for _, c := range cats {
		w.Simple(c)
	}
	w.Set(0) // tips
	w.Array(0)
	w.Array(0)
}
