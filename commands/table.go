// Package commands is EnclaveAI's command layer: the declarative command
// table, the dispatcher that enforces arity, authentication, limits and
// locking for every command, and one file per command family with a
// side-effect-free parse step and a run step.
//
// Concurrency rules:
//   - Each connection runs its commands one at a time in its own goroutine;
//     a slow command (inference) blocks only its own connection.
//   - App.tx is the transaction lock: every command runs under its read
//     side, EXEC under its write side, so a transaction is atomic. Commands
//     flagged NoTxLock (model runs, uploads) take it only around their short
//     keyspace updates, never around inference or compilation.
//   - Lock order: docs/LOCKS.md (every lock, what it guards, the hooks that
//     run under which). Client.mu guards only the fields CLIENT LIST reads
//     from other goroutines.
package commands

import (
	"slices"
	"sort"
	"strings"
)

// Flag is a command property the dispatcher acts on.
type Flag uint32

// Command flags, as in Redis's command table.
const (
	Write       Flag = 1 << iota // changes the keyspace
	Readonly                     // only reads
	DenyOOM                      // refused while memory is over maxmemory
	Admin                        // server administration
	NoAuth                       // allowed before AUTH
	LoadingOK                    // allowed while a snapshot loads
	Big                          // may carry payloads beyond client-query-buffer-limit
	Blocking                     // blocks its client (RedisAI's run commands, MONITOR): queued inside MULTI, an error inside EXEC
	NoMulti                      // refused inside MULTI, aborting the transaction (Redis's no-multi: SAVE, SHUTDOWN)
	Fast                         // O(1) or O(log N)
	NoTxLock                     // runs outside the transaction lock (see package doc)
	SkipSlowlog                  // never in SLOWLOG (EXEC: its queued commands are, each)
)

var flagNames = []struct {
	f    Flag
	name string
}{
	{Write, "write"}, {Readonly, "readonly"}, {DenyOOM, "denyoom"}, {Admin, "admin"},
	{NoAuth, "no_auth"}, {LoadingOK, "loading"}, {Big, "big_payload"},
	{Blocking, "blocking"}, {NoMulti, "no_multi"}, {Fast, "fast"}, {SkipSlowlog, "skip_slowlog"},
}

// Runner is a parsed command, ready to run: each command's parse makes a
// typed value (delCmd, modelExecCmd, ...) that a test can compare without
// running it (parse_*_test.go).
type Runner interface {
	Run(x *Ctx) error
}

// Spec is one command table entry.
type Spec struct {
	Name  string // lower-case, as COMMAND lists it
	Arity int    // Redis convention: n exact argument count (name included), -n at least n
	Flags Flag
	// FirstKey, LastKey, Step: key positions as COMMAND reports them
	// (LastKey -1 = the last argument).
	FirstKey, LastKey, Step int
	Group                   string // COMMAND DOCS group
	Summary                 string // COMMAND DOCS summary and the README
	Syntax                  string // arguments after the name, for the README
	// Parse turns the raw arguments (name included) into a Runner without
	// side effects. It may read configuration but never the keyspace.
	Parse func(a Args) (Runner, error)
	// Payload, for Big commands, reports whether argument i, given the
	// arguments before it (prev[0] is the name), is payload: data the
	// front end may read into an upload buffer (see upload.go).
	Payload func(prev [][]byte, i int) bool
	// Keys, for commands whose keys move with their arguments (RedisAI's
	// getkeys-api commands: COMMAND shows them movablekeys), returns the
	// indexes of the keys in argv; KeyPositions uses it instead of
	// FirstKey..LastKey. It must not fail: a malformed command gets the
	// keys found before the fault, and its parse reports the fault.
	Keys func(argv [][]byte) []int
	// AdminSubs are the subcommands (upper case) that are administrative
	// in a command not flagged Admin as a whole, as Redis flags
	// client|kill: with users, only admins run them (adminCommand).
	AdminSubs []string
	// Subs lists the subcommands of a command that has them: its HELP
	// subcommand (register adds it) and the README's syntax are written
	// from them, and a subcommand's parse is the command's Parse.
	Subs []Sub

	stats cmdStats // INFO commandstats (observe.go)
	// subNames are "name|sub" for each of Subs and HELP (register), as
	// CLIENT LIST names the command a client last ran.
	subNames []string
}

// lastName is how CLIENT LIST's cmd names the command argv ran as: Redis
// 7's "name|sub" for a subcommand, the name otherwise.
func (s *Spec) lastName(argv [][]byte) *string {
	if len(s.subNames) > 0 && len(argv) > 1 {
		for i, full := range s.subNames {
			if strings.EqualFold(full[len(s.Name)+1:], string(argv[1])) {
				return &s.subNames[i]
			}
		}
	}
	return &s.Name
}

// Sub is one subcommand: its name and arguments in Redis's HELP notation
// ("GET [<count>]") and what it does, HELP's line under it.
type Sub struct {
	Usage, Doc string
}

// syntax is the README's syntax of the command: Syntax, or its
// subcommands' usages.
func (s *Spec) syntax() string {
	if len(s.Subs) == 0 {
		return s.Syntax
	}
	usages := make([]string, len(s.Subs))
	for i, sub := range s.Subs {
		usages[i] = sub.Usage
	}
	return strings.Join(usages, " | ")
}

// withHelp gives a command with subcommands its HELP: Redis's first line,
// then each subcommand's usage and doc, then HELP's own.
func withHelp(s *Spec) {
	lines := []string{strings.ToUpper(s.Name) + " <subcommand> [<arg> [value] [opt] ...]. Subcommands are:"}
	for _, sub := range s.Subs {
		lines = append(lines, sub.Usage, "    "+sub.Doc)
	}
	lines = append(lines, "HELP", "    Print this help.")
	parse := s.Parse
	s.Parse = func(a Args) (Runner, error) {
		if len(a.V) > 1 && strings.EqualFold(string(a.V[1]), "HELP") {
			if len(a.V) > 2 {
				return nil, subArityOf(s.Name, "help")
			}
			return helpCmd{lines}, nil
		}
		return parse(a)
	}
}

// helpCmd is a command's HELP: its lines, as status replies.
type helpCmd struct{ lines []string }

// Run implements Runner.
func (c helpCmd) Run(x *Ctx) error {
	x.W.Array(len(c.lines))
	for _, l := range c.lines {
		x.W.Simple(l)
	}
	return nil
}

// Has reports whether the spec has flag f.
func (s *Spec) Has(f Flag) bool { return s.Flags&f != 0 }

// FlagNames lists the flags as COMMAND shows them.
func (s *Spec) FlagNames() []string {
	var out []string
	for _, fn := range flagNames {
		if s.Has(fn.f) {
			out = append(out, fn.name)
		}
	}
	if s.Keys != nil {
		out = append(out, "movablekeys")
	}
	return out
}

// Categories are the command's ACL categories, as COMMAND INFO lists them,
// in Redis's order: the ones Redis 7 gives every command from its flags
// (write, read, admin and dangerous, fast or else slow, blocking), and
// keyspace, connection and transaction from its group. Users take +@admin
// and -@admin (config/users.go); +@all is every category.
func (s *Spec) Categories() []string {
	var out []string
	add := func(ok bool, name string) {
		if ok {
			out = append(out, "@"+name)
		}
	}
	add(s.Group == "keyspace", "keyspace")
	add(s.Has(Readonly), "read")
	add(s.Has(Write), "write")
	add(s.Has(Admin), "admin")
	add(s.Has(Fast), "fast")
	add(!s.Has(Fast), "slow")
	add(s.Has(Blocking), "blocking")
	add(s.Has(Admin), "dangerous")
	add(s.Group == "connection", "connection")
	add(s.Group == "transactions", "transaction")
	return out
}

// Table is the command table, keyed by lower-case name.
type Table map[string]*Spec

// table is filled by each family's file through register.
var table = Table{}

func register(specs ...*Spec) {
	for _, s := range specs {
		if _, dup := table[s.Name]; dup || s.Name != strings.ToLower(s.Name) {
			panic("bad command table entry " + s.Name)
		}
		if len(s.Subs) > 0 {
			withHelp(s)
			for _, sub := range append(s.Subs, Sub{Usage: "HELP"}) {
				full := s.Name + "|" + strings.ToLower(strings.Fields(sub.Usage)[0])
				if !strings.HasPrefix(sub.Usage, "(") && !slices.Contains(s.subNames, full) {
					s.subNames = append(s.subNames, full)
				}
			}
		}
		table[s.Name] = s
	}
}

// Lookup finds a command by name, case-insensitively, without allocating
// for names of usual length.
func (t Table) Lookup(name []byte) *Spec {
	var buf [32]byte
	if len(name) > len(buf) {
		return t[strings.ToLower(string(name))]
	}
	for i, c := range name {
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		buf[i] = c
	}
	return t[string(buf[:len(name)])]
}

// Is reports whether name (any case) is s's name: a connection that repeats
// its last command (a pipeline) finds its entry without the table's hash.
func (s *Spec) Is(name []byte) bool {
	if len(name) != len(s.Name) {
		return false
	}
	for i, c := range name {
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != s.Name[i] {
			return false
		}
	}
	return true
}

// Commands returns the table.
func Commands() Table { return table }

// Sorted returns the specs sorted by name.
func (t Table) Sorted() []*Spec {
	out := make([]*Spec, 0, len(t))
	for _, s := range t {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
