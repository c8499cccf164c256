package commands

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/enclaveai/enclaveai/modelstore"
)

// Observability: per-command statistics (INFO commandstats), the slow log
// (SLOWLOG), MEMORY USAGE and the AI section of INFO (models and their run
// counters, aggregated).
//
// SLOWLOG GET [count] | LEN | RESET
// MEMORY USAGE key
func init() {
	admin := func(s *Spec) *Spec { s.Group = "server"; return s }
	register(
		admin(&Spec{Name: "slowlog", Arity: -2, Flags: Admin | LoadingOK,
			Summary: "The commands that ran longer than slowlog-log-slower-than, payloads redacted.",
			Parse:   parseSlowlog, Subs: []Sub{
				{"GET [<count>]", "The count most recent entries (10; -1: all): id, time, microseconds, arguments, address, name."},
				{"LEN", "The number of entries."},
				{"RESET", "Empties the slow log."},
			}}),
		admin(&Spec{Name: "memory", Arity: -2, Flags: Readonly, Keys: subcommandKey,
			Summary: "MEMORY USAGE key: the bytes a key holds (a model's shared bytes included).",
			Parse:   parseMemory, Subs: []Sub{
				{"USAGE <key> [SAMPLES <count>]", "The bytes a key holds."},
			}}),
	)
	RegisterInfoSection(InfoSection{Name: "Commandstats", Fields: commandStats, NotDefault: true})
	RegisterInfoSection(InfoSection{Name: "AI", Fields: aiInfo, NotDefault: true, AdminOnly: true})
}

// cmdStats are one command's counters (INFO commandstats), striped
// (stripes.go): a client's command adds to one stripe's line.
type cmdStats struct{ s striped[cmdCounts] }

type cmdCounts struct{ calls, usec, rejected, failed atomic.Int64 }

// of is the stripe client c adds to.
func (st *cmdStats) of(c *Client) *cmdCounts { return st.s.of(c.ID) }

// sum adds the stripes up.
func (st *cmdStats) sum() (calls, usec, rejected, failed int64) {
	st.s.each(func(x *cmdCounts) {
		calls, usec, rejected, failed = calls+x.calls.Load(), usec+x.usec.Load(), rejected+x.rejected.Load(), failed+x.failed.Load()
	})
	return
}

// reset zeroes the counts (CONFIG RESETSTAT).
func (st *cmdStats) reset() {
	st.s.each(func(x *cmdCounts) {
		for _, n := range []*atomic.Int64{&x.calls, &x.usec, &x.rejected, &x.failed} {
			n.Store(0)
		}
	})
}

// recordRun counts a command that ran, and logs it if it was slow. Only
// these count in total_commands_processed, as Redis counts the commands
// it calls: not one refused before it runs (unknown, wrong arity, NOAUTH)
// nor one queued by MULTI, which counts when EXEC runs it (operator
// review: every command received was counted).
func (s *App) recordRun(c *Client, spec *Spec, argv [][]byte, d time.Duration, failed bool) {
	s.stats.Commands.Add(c.ID, 1)
	us := d.Microseconds()
	st := spec.stats.of(c)
	st.calls.Add(1)
	st.usec.Add(us)
	if failed {
		st.failed.Add(1)
	}
	if limit := s.Opts.SlowlogSlowerThan.Load(); limit >= 0 && us >= limit && !spec.Has(SkipSlowlog) {
		s.slow.add(c, argv, us, int(s.Opts.SlowlogMaxLen.Load()))
	}
	if th := s.Opts.LatencyMonitorThreshold.Load(); th > 0 && d.Milliseconds() >= th {
		s.latency.record(d.Milliseconds())
	}
}

func commandStats(*App) [][2]string {
	var out [][2]string
	for _, spec := range table.Sorted() {
		calls, usec, rejected, failed := spec.stats.sum()
		if calls == 0 && rejected == 0 {
			continue
		}
		per := 0.0
		if calls > 0 {
			per = float64(usec) / float64(calls)
		}
		out = append(out, [2]string{"cmdstat_" + spec.Name, fmt.Sprintf("calls=%d,usec=%d,usec_per_call=%.2f,rejected_calls=%d,failed_calls=%d",
			calls, usec, per, rejected, failed)})
	}
	return out
}

// aiInfo aggregates the models' AI.INFO counters, then one line per model
// (the first maxInfoModels by key).
func aiInfo(s *App) [][2]string {
	type row struct {
		key string
		m   *modelstore.Model
	}
	var rows []row
	var bytes, calls, errs, usec, samples int64
	for _, it := range s.Keys.Items() {
		if m, ok := it.Value.(*modelstore.Model); ok {
			rows = append(rows, row{it.Key, m})
			bytes += int64(len(m.Blob.Data))
			calls += m.Stats.Calls.Load()
			errs += m.Stats.Errors.Load()
			usec += m.Stats.Duration.Load()
			samples += m.Stats.Samples.Load()
		}
	}
	per := func(u, n int64) string {
		if n == 0 {
			return "0.00"
		}
		return fmt.Sprintf("%.2f", float64(u)/float64(n))
	}
	out := [][2]string{
		{"models", itoa(int64(len(rows)))}, {"model_bytes", itoa(bytes)},
		{"model_calls", itoa(calls)}, {"model_errors", itoa(errs)}, {"model_run_usec", itoa(usec)},
		{"model_usec_per_call", per(usec, calls)}, {"model_samples", itoa(samples)},
	}
	slices.SortFunc(rows, func(a, b row) int { return strings.Compare(a.key, b.key) })
	for i, r := range rows {
		if i == maxInfoModels {
			break
		}
		st := &r.m.Stats
		c := st.Calls.Load()
		out = append(out, [2]string{"model" + strconv.Itoa(i), fmt.Sprintf(
			"calls=%d,errors=%d,usec=%d,usec_per_call=%s,samples=%d,batchsize=%d,bytes=%d,key=%s",
			c, st.Errors.Load(), st.Duration.Load(), per(st.Duration.Load(), c), st.Samples.Load(),
			r.m.BatchSize, len(r.m.Blob.Data), r.key)})
	}
	return out
}

// maxInfoModels bounds the per-model lines of INFO ai.
const maxInfoModels = 100

// slowEntry is one SLOWLOG entry.
type slowEntry struct {
	id         int64
	at         int64 // unix seconds
	usec       int64
	args       []string
	addr, name string
}

// slowLog is the ring of the slowest recent commands.
type slowLog struct {
	mu      sync.Mutex
	nextID  int64
	entries []slowEntry // newest first
}

func (l *slowLog) add(c *Client, argv [][]byte, usec int64, maxLen int) {
	e := slowEntry{at: time.Now().Unix(), usec: usec, args: slowArgs(argv), addr: c.Addr}
	c.mu.Lock()
	e.name = c.name
	c.mu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	e.id = l.nextID
	l.nextID++
	l.entries = slices.Insert(l.entries, 0, e)
	if len(l.entries) > maxLen {
		l.entries = l.entries[:maxLen]
	}
}

// Limits of an entry's arguments, as Redis's.
const (
	slowMaxArgs = 32
	slowMaxArg  = 128
)

// slowArgs renders a command for the slow log: at most slowMaxArgs
// arguments of at most slowMaxArg bytes, and never a tensor's or a model's
// bytes (what follows BLOB, up to a DAG's next |>: "(n bytes redacted)";
// what follows VALUES: "(redacted)", whose length would tell the value)
// nor a secret (AUTH's arguments, HELLO's AUTH user and
// password, CONFIG SET's value of requirepass, masterauth or user: "(redacted)", as Redis 7
// writes them, without their length).
func slowArgs(argv [][]byte) []string {
	var out []string
	payload, values := false, false // after BLOB or VALUES; VALUES
	secrets := 0                    // the next arguments that are secrets (-1: all)
	configSet := len(argv) > 1 && strings.EqualFold(string(argv[0]), "config") && strings.EqualFold(string(argv[1]), "set")
	hello := len(argv) > 0 && strings.EqualFold(string(argv[0]), "hello")
	name := false // the next argument is HELLO SETNAME's client name: a value, whatever it says
	// Only a DAG's arguments are split by |>: elsewhere it is a key or a
	// value like any other (AI.TENSORSET |> STRING BLOB ... showed its blob).
	dag := len(argv) > 0 && isDAGName(argv[0])
	for i, a := range argv {
		if len(out) == slowMaxArgs-1 && len(argv) > slowMaxArgs {
			out = append(out, fmt.Sprintf("... (%d more arguments)", len(argv)-i))
			break
		}
		switch {
		case secrets != 0, configSet && i >= 3 && i%2 == 1 && secretDirective(argv[i-1]):
			out = append(out, "(redacted)")
			if secrets > 0 {
				secrets--
			}
			continue
		case dag && string(a) == "|>":
			payload = false
		case payload && values:
			// Without its length: a VALUES element's length is its
			// content's (a number's digits, a STRING's length), which
			// the admin reading MONITOR may not see (security review).
			out = append(out, "(redacted)")
			continue
		case payload:
			out = append(out, fmt.Sprintf("(%d bytes redacted)", len(a)))
			continue
		}
		s := string(a)
		if len(s) > slowMaxArg {
			s = s[:slowMaxArg] + fmt.Sprintf("... (%d more bytes)", len(a)-slowMaxArg)
		}
		out = append(out, s)
		// A key (AI.TENSORSET blob ...), not a keyword; HELLO's first
		// argument is its version, or AUTH when a client left it out.
		if (i == 1 && !hello) || (dag && i >= 2 && string(argv[i-2]) == "|>") {
			continue
		}
		if name {
			// A client named "auth" hid HELLO's AUTH and user name, and
			// showed the password (security review).
			name = false
			continue
		}
		switch strings.ToUpper(string(a)) {
		case "SETNAME":
			name = hello && i >= 2 // not where the version goes (a malformed HELLO still hides AUTH's)
		case "BLOB", "VALUES":
			payload, values = true, strings.EqualFold(string(a), "VALUES")
		case "AUTH":
			if i == 0 {
				secrets = -1
			} else if hello {
				secrets = 2
			}
		}
	}
	return out
}

// secretDirective reports whether CONFIG SET's value of the directive
// name holds a secret: requirepass, masterauth, and user (its ">password"
// rules; not a CONFIG SET directive, but a client may try, and the slow
// log keeps the refused command).
func secretDirective(name []byte) bool {
	return strings.EqualFold(string(name), "requirepass") || strings.EqualFold(string(name), "masterauth") ||
		strings.EqualFold(string(name), "user")
}

// isDAGName reports whether name is one of the DAG commands (dag.go: the
// AI.DAG family, all of whose names start so), without a list of its own.
func isDAGName(name []byte) bool {
	const family = "ai.dag"
	return len(name) > len(family) && strings.EqualFold(string(name[:len(family)]), family)
}

// repr quotes a MONITOR argument as Redis does (sdscatrepr): printable
// ASCII as is, \\ \" \n \r \t \a \b escaped, other bytes as \xhh.
func repr(b *strings.Builder, s string) {
	const hex = "0123456789abcdef"
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '\\', '"':
			b.WriteByte('\\')
			b.WriteByte(c)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '\a':
			b.WriteString(`\a`)
		case '\b':
			b.WriteString(`\b`)
		default:
			if c >= 0x20 && c < 0x7f {
				b.WriteByte(c)
			} else {
				b.WriteString(`\x`)
				b.WriteByte(hex[c>>4])
				b.WriteByte(hex[c&15])
			}
		}
	}
	b.WriteByte('"')
}

func parseSlowlog(a Args) (Runner, error) {
	sub := strings.ToUpper(string(a.V[1]))
	count := 10
	switch {
	case sub == "GET" && a.Len() <= 2:
		if a.Len() == 2 {
			n, err := strconv.Atoi(string(a.V[2]))
			if err != nil || n < -1 {
				return nil, errorf("ERR count should be greater than or equal to -1")
			}
			count = n
		}
	case sub == "GET":
		// Redis 7.0's text for a GET with more than a count.
		return nil, errorf("ERR unknown subcommand or wrong number of arguments for '%s'. Try SLOWLOG HELP.", truncate(a.V[1], 128))
	case sub == "LEN" || sub == "RESET":
		if a.Len() != 1 {
			return nil, subArityOf("slowlog", sub)
		}
	default:
		return nil, unknownSub("slowlog", a.V[1])
	}
	return slowlogCmd{sub: sub, count: count}, nil
}

// slowlogCmd is SLOWLOG GET [count] | LEN | RESET.
type slowlogCmd struct {
	sub   string
	count int
}

// Run implements Runner.
func (c slowlogCmd) Run(x *Ctx) error {
	l := &x.slow
	l.mu.Lock()
	defer l.mu.Unlock()
	switch c.sub {
	case "LEN":
		x.W.Int(int64(len(l.entries)))
	case "RESET":
		l.entries = nil
		x.W.OK()
	default:
		n := len(l.entries)
		if c.count >= 0 && c.count < n {
			n = c.count
		}
		x.W.Array(n)
		for _, e := range l.entries[:n] {
			x.W.Array(6)
			x.W.Int(e.id)
			x.W.Int(e.at)
			x.W.Int(e.usec)
			x.W.Array(len(e.args))
			for _, s := range e.args {
				x.W.BulkString(s)
			}
			x.W.BulkString(e.addr)
			x.W.BulkString(e.name)
		}
	}
	return nil
}

func parseMemory(a Args) (Runner, error) {
	switch {
	case !strings.EqualFold(string(a.V[1]), "USAGE"):
		return nil, unknownSub("memory", a.V[1])
	case a.Len() < 2:
		return nil, subArityOf("memory", "usage")
	}
	// As Redis 7.0: SAMPLES n pairs (n ≥ 0; 0 is all), repeated or not.
	for i := 3; i < len(a.V); i += 2 {
		if i+1 >= len(a.V) || !isWord(a.V[i], "SAMPLES") {
			return nil, errSyntax
		}
		n, ok := parseInt(a.V[i+1])
		if !ok {
			return nil, errNotInteger
		}
		if n < 0 {
			return nil, errSyntax
		}
	}
	key := string(a.V[2])
	return memoryUsageCmd{key: key}, nil
}

// memoryUsageCmd is MEMORY USAGE key [SAMPLES n].
type memoryUsageCmd struct{ key string }

// Run implements Runner.
func (c memoryUsageCmd) Run(x *Ctx) error {
	v, err := x.lookupOrNull(c.key)
	if v == nil {
		return err
	}
	n := int64(len(c.key)) + v.MemSize() + 48
	if m, isModel := v.(*modelstore.Model); isModel {
		n += int64(len(m.Blob.Data))
	}
	x.W.Int(n)
	return nil
}

// MONITOR: every command the server dispatches, one line each, to the
// clients that asked, as Redis writes them (`+<time> [0 <addr>] "arg" ...`)
// but with payloads and passwords redacted as in the slow log. As in Redis
// 7, administrative commands are not shown, and a monitor whose replies
// CLIENT REPLY turned off is sent nothing. A monitor
// too slow to take the lines loses them (monitorBacklog per client), rather
// than slowing every other client down.
//
// LATENCY LATEST | RESET: with latency-monitor-threshold (ms) above 0, the
// latest and longest command that ran at least that long ("command" event).
func init() {
	admin := func(s *Spec) *Spec { s.Group = "server"; return s }
	register(
		admin(&Spec{Name: "monitor", Arity: 1, Flags: Admin | LoadingOK | Blocking,
			Summary: "Streams every command the server runs but administrative ones, payloads and passwords redacted.", Parse: parseMonitor}),
		admin(&Spec{Name: "latency", Arity: -2, Flags: Admin | LoadingOK,
			Summary: "LATENCY LATEST and RESET: commands slower than latency-monitor-threshold.",
			Parse:   parseLatency, Subs: []Sub{
				{"LATEST", "The latest and the longest command over latency-monitor-threshold: event, time, ms, max ms."},
				{"RESET [<event> ...]", "Forgets them; the number of events reset."},
			}}),
	)
}

const monitorBacklog = 4096

// monitorSet is the clients in MONITOR mode.
type monitorSet struct {
	n    atomic.Int32
	mu   sync.Mutex
	subs map[*Client]*monitorSub
}

// monitorSub is one monitor: the lines its writer goroutine sends, and
// whether it has ended (stopMonitor), after which the lines still queued
// are dropped rather than written.
type monitorSub struct {
	ch      chan []byte
	stopped atomic.Bool
	// until is when the monitor's login lapses (unix ms; 0: never): a
	// token's exp plus the leeway. From then on it is sent nothing, as
	// its commands would get NOAUTH (security review: the stream went on
	// after the token expired). A monitor sends no AUTH to renew it.
	until int64
}

// feedMonitors writes a command to the monitors, if any (one atomic load
// otherwise).
func (s *App) feedMonitors(c *Client, spec *Spec, argv [][]byte) {
	if s.mon.n.Load() == 0 {
		return
	}
	if _, ok := adminCommand(spec, argv); ok {
		return
	}
	now := time.Now()
	var b strings.Builder
	fmt.Fprintf(&b, "+%d.%06d [0 %s]", now.Unix(), now.Nanosecond()/1000, c.Addr)
	for _, a := range slowArgs(argv) {
		b.WriteByte(' ')
		repr(&b, a)
	}
	b.WriteString("\r\n")
	line := []byte(b.String())
	s.mon.mu.Lock()
	for mc, sub := range s.mon.subs {
		if mc.repliesOff.Load() || (sub.until != 0 && now.UnixMilli() >= sub.until) {
			continue
		}
		if mc == c {
			// A monitor's own command: its line follows the command's
			// reply, as in Redis, where both go to the client's output
			// buffer in turn. The writer goroutine could send it before
			// the reply, which is still in c.W (ownMonitorLines).
			c.monOwn = append(c.monOwn, line[1:len(line)-2])
			continue
		}
		select {
		case sub.ch <- line:
		default:
		}
	}
	s.mon.mu.Unlock()
}

// stopMonitor ends a client's MONITOR mode (it disconnected, or RESET):
// the lines not yet written are dropped.
func (s *App) stopMonitor(c *Client) {
	s.mon.mu.Lock()
	defer s.mon.mu.Unlock()
	if sub, ok := s.mon.subs[c]; ok {
		delete(s.mon.subs, c)
		s.mon.n.Add(-1)
		c.monitor.Store(false)
		// The writer drops what is left; nothing here waits for it (under
		// mon.mu only non-blocking work: docs/LOCKS.md).
		sub.stopped.Store(true)
		close(sub.ch)
	}
}

func parseMonitor(a Args) (Runner, error) {
	return monitorCmd{}, nil
}

// monitorCmd is MONITOR.
type monitorCmd struct{}

// Run implements Runner.
func (monitorCmd) Run(x *Ctx) error {
	w, ok := x.C.closer.(io.Writer)
	if !ok {
		return errorf("ERR MONITOR needs a network connection")
	}
	if x.C.monitor.Load() {
		return nil // as Redis: a monitor's MONITOR has no reply
	}
	// The monitor is registered before its OK leaves: a command another
	// client sends once it has read the OK is seen (the OK went out first,
	// and a command that ran meanwhile was missed: test_observe, make
	// test). Lines fed before the writer starts wait in the channel.
	sub := &monitorSub{ch: make(chan []byte, monitorBacklog), until: x.C.authUntil}
	s := x.App
	s.mon.mu.Lock()
	if s.mon.subs == nil {
		s.mon.subs = map[*Client]*monitorSub{}
	}
	s.mon.subs[x.C] = sub
	s.mon.n.Add(1)
	x.C.monitor.Store(true)
	s.mon.mu.Unlock()
	// The replies before and MONITOR's OK (unless CLIENT REPLY drops it)
	// leave now, ahead of the first line the monitor goroutine writes.
	if x.C.reply == replyOn {
		x.W.OK()
	}
	_, err := w.Write(x.W.Bytes())
	x.W.Reset()
	if err != nil {
		s.stopMonitor(x.C)
		return nil
	}
	go func() {
		failed := false
		for line := range sub.ch {
			if failed || sub.stopped.Load() {
				continue
			}
			if _, err := w.Write(line); err != nil {
				failed = true
				x.C.Kill()
			}
		}
	}()
	return nil
}

// latencyEvent is LATENCY LATEST's record of one event.
type latencyEvent struct {
	mu          sync.Mutex
	at          int64 // unix seconds of the latest
	latest, max int64 // ms
}

func (e *latencyEvent) record(ms int64) {
	e.mu.Lock()
	e.at, e.latest = time.Now().Unix(), ms
	e.max = max(e.max, ms)
	e.mu.Unlock()
}

func parseLatency(a Args) (Runner, error) {
	sub := strings.ToUpper(string(a.V[1]))
	switch {
	case sub == "LATEST" && a.Len() != 1:
		return nil, subArityOf("latency", sub)
	case sub == "RESET":
		// As Redis: the named events, or every one; "command" is the
		// only event this server records.
		reset := a.Len() == 1
		for _, ev := range a.V[2:] {
			reset = reset || strings.EqualFold(string(ev), "command")
		}
		return latencyCmd{sub: sub, reset: reset}, nil
	case sub != "LATEST":
		return nil, unknownSub("latency", a.V[1])
	}
	return latencyCmd{sub: sub}, nil
}

// latencyCmd is LATENCY LATEST | RESET; reset: RESET names the command event.
type latencyCmd struct {
	sub   string
	reset bool
}

// Run implements Runner.
func (c latencyCmd) Run(x *Ctx) error {
	e := &x.App.latency
	e.mu.Lock()
	defer e.mu.Unlock()
	if c.sub == "RESET" {
		n := int64(0)
		if !c.reset {
			x.W.Int(0)
			return nil
		}
		if e.at != 0 {
			n = 1
		}
		e.at, e.latest, e.max = 0, 0, 0
		x.W.Int(n)
		return nil
	}
	if e.at == 0 {
		x.W.Array(0)
		return nil
	}
	x.W.Array(1)
	x.W.Array(4)
	x.W.BulkString("command")
	x.W.Int(e.at)
	x.W.Int(e.latest)
	x.W.Int(e.max)
	return nil
}

// errorStats counts error replies by their code, the error's first word
// (INFO errorstats), for at most maxErrorCodes codes: the first word of
// an error can come from a client ("-foo bar" is not one of ours, but a
// bound costs nothing).
type errorStats struct {
	mu sync.Mutex
	n  map[string]int64
}

const maxErrorCodes = 128

func (e *errorStats) count(text string) {
	code, _, _ := strings.Cut(text, " ")
	e.mu.Lock()
	if e.n == nil {
		e.n = map[string]int64{}
	}
	if _, ok := e.n[code]; ok || len(e.n) < maxErrorCodes {
		e.n[code]++
	}
	e.mu.Unlock()
}

func (e *errorStats) reset() {
	e.mu.Lock()
	e.n = nil
	e.mu.Unlock()
}

// errorStatsInfo is INFO errorstats: errorstat_<CODE>:count=N, codes in order.
func errorStatsInfo(s *App) [][2]string {
	e := &s.errStats
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([][2]string, 0, len(e.n))
	for _, code := range slices.Sorted(maps.Keys(e.n)) {
		out = append(out, [2]string{"errorstat_" + code, "count=" + itoa(e.n[code])})
	}
	return out
}
