package commands

import (
	"errors"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/enclaveai/enclaveai/config"
)

func TestConfigGet(t *testing.T) {
	h := newHarness(t)
	all := len(config.Names())
	h.run(
		row("CONFIG GET maxmemory", `["maxmemory" "0"]`),
		row("CONFIG GET MAXMEMORY", `["MAXMEMORY" "0"]`), // as asked, as redis-server 7.0.15 (hunt)
		row("config get maxmemory maxmemory", `["maxmemory" "0"]`),
		row("CONFIG GET max*", `["max-model-bytes-per-user" "0" "max-model-size" "4294967296" "max-models" "0" "max-upload-sessions" "16" "maxclients" "10000" "maxmemory" "0" "maxmemory-policy" "noeviction"]`),
		row("CONFIG GET port bind", `["bind" "127.0.0.1" "port" "6379"]`),
		row("CONFIG GET p?rt", `["port" "6379"]`),
		row("CONFIG GET [pb]ind", `["bind" "127.0.0.1"]`),
		row("CONFIG GET nosuch", `[]`),
		row("CONFIG GET", "-ERR wrong number of arguments for 'config|get' command"),
		row("CONFIG", "-ERR wrong number of arguments for 'config' command"),
		row("CONFIG FOO", "-ERR unknown subcommand 'FOO'. Try CONFIG HELP."),
		row("HELLO 3", "~^%"),
		row("CONFIG GET maxmemory", `%{"maxmemory" "0"}`),
		row("CONFIG GET nosuch", `%{}`),
	)
	if got := decode(t, h.do("CONFIG GET *")).([]any); len(got) != 2*all {
		t.Errorf("CONFIG GET * returned %d items, want %d", len(got), 2*all)
	}
}

func TestConfigSet(t *testing.T) {
	h := newHarness(t)
	h.run(
		row("CONFIG SET maxmemory 1mb", "+OK"),
		row("CONFIG GET maxmemory", `["maxmemory" "1048576"]`),
		row("CONFIG SET maxmemory abc", "-ERR CONFIG SET failed (possibly related to argument 'maxmemory') - argument must be a memory value"),
		row("CONFIG SET timeout abc", "-ERR CONFIG SET failed (possibly related to argument 'timeout') - argument couldn't be parsed into an integer"),
		row("CONFIG SET maxclients 0", "-ERR CONFIG SET failed (possibly related to argument 'maxclients') - argument must be between 1 and 2147483647 inclusive"),
		row("CONFIG SET port 1", "-ERR CONFIG SET failed (possibly related to argument 'port') - can't set immutable config"),
		row("CONFIG SET dir /", "-ERR CONFIG SET failed (possibly related to argument 'dir') - can't set immutable config"),
		row("CONFIG SET foo bar", "-ERR Unknown option or number of arguments for CONFIG SET - 'foo'"),
		row("CONFIG SET loadmodel m", "-ERR Unknown option or number of arguments for CONFIG SET - 'loadmodel'"),
		// As redis-server 7.0.15 (operator review: "CONFIG SET failed ... unknown option").
		row("CONFIG SET user x", "-ERR Unknown option or number of arguments for CONFIG SET - 'user'"),
		row("CONFIG SET maxmemory", "-ERR wrong number of arguments for 'config|set' command"),
		row("CONFIG SET maxmemory 1 timeout", "-ERR syntax error"),
		// Several at once: all or nothing (redis-server 7).
		row("CONFIG SET maxmemory 2mb timeout abc", "-ERR CONFIG SET failed (possibly related to argument 'timeout') - argument couldn't be parsed into an integer"),
		row("CONFIG GET maxmemory", `["maxmemory" "1048576"]`),
		row("CONFIG SET maxmemory 2mb foo 1", "-ERR Unknown option or number of arguments for CONFIG SET - 'foo'"),
		row("CONFIG GET maxmemory", `["maxmemory" "1048576"]`),
		row("CONFIG SET maxmemory 1 MAXMEMORY 2", "-ERR CONFIG SET failed (possibly related to argument 'MAXMEMORY') - duplicate parameter"),
		// Every name is checked (unknown, immutable, repeated) before any
		// value, and the first bad name answers: as redis-server 7.0.15.
		row("CONFIG SET maxmemory abc logfile x", "-ERR CONFIG SET failed (possibly related to argument 'logfile') - can't set immutable config"),
		row("CONFIG SET logfile x foo 1", "-ERR CONFIG SET failed (possibly related to argument 'logfile') - can't set immutable config"),
		row("CONFIG SET foo 1 logfile x", "-ERR Unknown option or number of arguments for CONFIG SET - 'foo'"),
		row("CONFIG SET logfile x logfile y", "-ERR CONFIG SET failed (possibly related to argument 'logfile') - can't set immutable config"),
		row("CONFIG SET timeout abc maxmemory 1 MaxMemory 2 foo 3", "-ERR CONFIG SET failed (possibly related to argument 'MaxMemory') - duplicate parameter"),
		row("CONFIG SET logfile x user y", "-ERR CONFIG SET failed (possibly related to argument 'logfile') - can't set immutable config"),
		row("CONFIG SET maxmemory 2mb port 1", "-ERR CONFIG SET failed (possibly related to argument 'port') - can't set immutable config"),
		row("CONFIG GET maxmemory", `["maxmemory" "1048576"]`),
		// Inside MULTI these are queued and answered by EXEC, as Redis's.
		row("MULTI", "+OK"),
		row("CONFIG SET foo 1", "+QUEUED"),
		row("CONFIG SET a 1 b", "+QUEUED"),
		row("CONFIG SET logfile x", "+QUEUED"),
		row("CONFIG SET maxmemory 1 maxmemory 2", "+QUEUED"),
		row("EXEC", "[-ERR Unknown option or number of arguments for CONFIG SET - 'foo' -ERR syntax error "+
			"-ERR CONFIG SET failed (possibly related to argument 'logfile') - can't set immutable config "+
			"-ERR CONFIG SET failed (possibly related to argument 'maxmemory') - duplicate parameter]"),
		row("CONFIG SET maxmemory 0 timeout 5", "+OK"),
		row("CONFIG GET maxmemory timeout", `["maxmemory" "0" "timeout" "5"]`),
		row("CONFIG SET loglevel WARNING", "+OK"),
		row("CONFIG GET loglevel", `["loglevel" "warning"]`),
		row("CONFIG SET loglevel loud", "-ERR CONFIG SET failed (possibly related to argument 'loglevel') - argument(s) must be one of the following: debug, verbose, notice, warning"),
		row("CONFIG RESETSTAT", "+OK"),
	)
	// requirepass applies to new connections; this one stays logged in.
	h.run(row("CONFIG SET requirepass pw", "+OK"), row("ECHO x", `"x"`))
	other := h.client("127.0.0.1:50002")
	other.run(row("ECHO x", noAuth), row("AUTH pw", "+OK"), row("ECHO x", `"x"`))
	if n := h.s.Stats().Commands.Load(); n != 5 {
		t.Errorf("total_commands_processed = %d after CONFIG RESETSTAT and 5 commands", n)
	}
}

func TestCommandCommand(t *testing.T) {
	h := newHarness(t)
	n := len(Commands())
	h.run(
		row("COMMAND COUNT", ":"+strconv.Itoa(n)),
		// As redis-server 7.0.15 (hunt).
		row("COMMAND COUNT x", "-ERR wrong number of arguments for 'command|count' command"),
		row("COMMAND LIST x", "-ERR syntax error"),
		row("COMMAND LIST FILTERBY PATTERN x", `[]`),
		row("COMMAND LIST FILTERBY FOO x", "-ERR syntax error"),
		row("COMMAND LIST FILTERBY PATTERN AI.TENSOR*", `["ai.tensorget" "ai.tensorset"]`),
		row("COMMAND LIST FILTERBY PATTERN p?ng", `["ping"]`),
		row("COMMAND LIST FILTERBY ACLCAT Admin", `["bgrewriteaof" "bgsave" "clusterx" "config" "latency" "module" "monitor" "save" "shutdown" "slowlog"]`),
		row("COMMAND LIST FILTERBY ACLCAT nosuch", `[]`),
		row("COMMAND LIST FILTERBY MODULE nosuch", `[]`),
		row("COMMAND INFO ai.tensorset", `[["ai.tensorset" :-4 [+write +denyoom] :1 :1 :1 [+@write +@slow] [] [] []]]`),
		row("COMMAND INFO AI.TENSORGET nosuch echo", `[["ai.tensorget" :-2 [+readonly +fast] :1 :1 :1 [+@read +@fast] [] [] []] nil ["echo" :2 [+loading +fast] :0 :0 :0 [+@fast +@connection] [] [] []]]`),
		row("COMMAND DOCS ai.tensorget", `["ai.tensorget" ["summary" "Returns a tensor's metadata, blob or values." "since" "1.0.0" "group" "tensors" "arguments" [["name" "key" "type" "key"] ["name" "meta" "type" "pure-token" "token" "META" "flags" [+optional]] ["name" "choice" "type" "oneof" "flags" [+optional] "arguments" [["name" "blob" "type" "pure-token" "token" "BLOB"] ["name" "values" "type" "pure-token" "token" "VALUES"]]]]]]`),
		row("COMMAND DOCS nosuch", `[]`),
		row("COMMAND FOO", "-ERR unknown subcommand 'FOO'. Try COMMAND HELP."),
		row("HELLO 3", "~^%"),
		// As redis-server 7.0.15's categories for DEL.
		row("COMMAND INFO del", `[["del" :-2 ~[+write] :1 :-1 :1 ~[+@keyspace +@write +@slow] ~[] [] []]]`),
		row("COMMAND INFO nosuch", `[_]`),
		row("COMMAND DOCS ping", `%{"ping" %{"summary" "Returns the server's liveliness response." "since" "1.0.0" "group" "connection" "arguments" [%{"name" "message" "type" "string" "flags" ~[+optional]}]}}`),
		row("HELLO 2", "~^\\["),
	)
	list := decode(t, h.do("COMMAND LIST")).([]any)
	if len(list) != n {
		t.Fatalf("COMMAND LIST has %d names, want %d", len(list), n)
	}
	ai := 0
	for _, name := range decode(t, h.do("COMMAND LIST FILTERBY MODULE ai")).([]any) {
		if !strings.HasPrefix(name.(string), "ai.") {
			t.Errorf("COMMAND LIST FILTERBY MODULE ai names %q", name)
		}
		ai++
	}
	if ai < 15 {
		t.Errorf("COMMAND LIST FILTERBY MODULE ai has %d names", ai)
	}
	for i, name := range list {
		if i > 0 && name.(string) <= list[i-1].(string) {
			t.Errorf("COMMAND LIST is not sorted at %q", name)
		}
		if Commands().Lookup([]byte(name.(string))) == nil {
			t.Errorf("COMMAND LIST names %q, which is not in the table", name)
		}
	}
	if all := decode(t, h.do("COMMAND")).([]any); len(all) != n {
		t.Errorf("COMMAND has %d entries, want %d", len(all), n)
	} else {
		for _, e := range all {
			if info := e.([]any); len(info) != 10 {
				t.Errorf("COMMAND entry %v has %d fields, want 10", info[0], len(info))
			}
		}
	}
	if docs := decode(t, h.do("COMMAND DOCS")).([]any); len(docs) != 2*n {
		t.Errorf("COMMAND DOCS has %d items, want %d", len(docs), 2*n)
	}
}

func TestInfo(t *testing.T) {
	h := newHarness(t)
	info := func(args string) string {
		s, ok := decode(t, h.do("INFO"+args)).(string)
		if !ok {
			t.Fatalf("INFO%s is not a bulk string", args)
		}
		return s
	}
	s := info("")
	for _, want := range []string{"# Server\r\n", "redis_version:" + RedisVersion + "\r\n", "# Clients\r\n", "connected_clients:1\r\n", "# Memory\r\n", "used_memory:", "# Stats\r\n", "# Keyspace\r\n"} {
		if !strings.Contains(s, want) {
			t.Errorf("INFO lacks %q", want)
		}
	}
	if strings.Contains(s, "db0:") {
		t.Error("INFO shows db0 for an empty keyspace, as Redis does not")
	}
	h.run(row("AI.TENSORSET a INT8 1", "+OK"), row("AI.TENSORSET b INT8 1", "+OK"), row("EXPIRE b 100", ":1"))
	if s := info(""); !strings.Contains(s, "# Keyspace\r\ndb0:keys=2,expires=1,avg_ttl=") {
		t.Errorf("INFO keyspace section:\n%s", s[strings.Index(s, "# Keyspace"):])
	}
	if s := info(" keyspace"); !strings.HasPrefix(s, "# Keyspace\r\ndb0:keys=2,expires=1,") || strings.Contains(s, "# Server") {
		t.Errorf("INFO keyspace = %q", s)
	}
	if s := info(" SERVER clients"); !strings.HasPrefix(s, "# Server\r\n") || !strings.Contains(s, "# Clients") || strings.Contains(s, "# Keyspace") {
		t.Errorf("INFO server clients = %q", s)
	}
	if s := info(" nosuch"); s != "" {
		t.Errorf("INFO nosuch = %q, want empty", s)
	}
	for _, sec := range []string{" all", " everything", " default"} {
		if s := info(sec); !strings.Contains(s, "# Server") || !strings.Contains(s, "# Keyspace") {
			t.Errorf("INFO%s lacks sections", sec)
		}
	}
	h.run(row("HELLO 3", "~^%"), row("INFO keyspace", `~^="txt:# Keyspace\\r\\ndb0:keys=2`))
}

func TestTime(t *testing.T) {
	h := newHarness(t)
	h.run(row("TIME", `~^\["1\d{9}" "\d{1,6}"\]$`), row("TIME x", "-ERR wrong number of arguments for 'time' command"))
}

func TestShutdown(t *testing.T) {
	h := newHarness(t)
	h.run(row("SHUTDOWN", "-ERR shutdown is not available"), row("SHUTDOWN FOO", "-ERR syntax error"))
	var calls []bool
	h.s.Shutdown = func(save bool) error { calls = append(calls, save); return nil }
	h.run(row("SHUTDOWN NOSAVE", ""))
	if !h.c.CloseAfterReply() || len(calls) != 1 || calls[0] {
		t.Errorf("SHUTDOWN NOSAVE: calls %v, closing %v", calls, h.c.CloseAfterReply())
	}
	h.run(row("SHUTDOWN SAVE", ""))
	if len(calls) != 2 || !calls[1] {
		t.Errorf("SHUTDOWN SAVE: calls %v", calls)
	}
	h.s.Shutdown = func(bool) error { return errors.New("disk full") }
	h.run(row("SHUTDOWN", "-ERR Errors trying to SHUTDOWN. Check logs."))
}

// threads-per-queue and the op parallelism directives are AI.CONFIG's
// starting values; 0 (the default) gives one worker per CPU.
func TestThreadDirectives(t *testing.T) {
	opts, err := config.Load([]string{"--threads-per-queue", "3", "--intra-op-parallelism", "2", "--inter-op-parallelism", "4"})
	if err != nil {
		t.Fatal(err)
	}
	h := newHarnessOpts(t, opts)
	h.run(
		row("AI.CONFIG GET THREADS_PER_QUEUE", ":3"),
		row("AI.CONFIG GET INTRA_OP_PARALLELISM", ":2"),
		row("AI.CONFIG GET INTER_OP_PARALLELISM", ":4"),
		row("CONFIG GET threads-per-queue", `["threads-per-queue" "3"]`),
		row("AI.CONFIG SET THREADS_PER_QUEUE 1", "+OK"),
		row("AI.CONFIG GET THREADS_PER_QUEUE", ":1"),
	)
	if n := h.s.Queue.Workers(); n != 1 {
		t.Errorf("the queue has %d workers after AI.CONFIG SET THREADS_PER_QUEUE 1", n)
	}
	h = newHarness(t)
	h.run(row("AI.CONFIG GET THREADS_PER_QUEUE", ":"+strconv.Itoa(runtime.GOMAXPROCS(0))))
	if _, err := config.Load([]string{"--threads-per-queue", "-1"}); err == nil {
		t.Error("threads-per-queue -1 accepted")
	}
}
