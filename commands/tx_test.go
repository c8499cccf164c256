package commands

import (
	"strconv"
	"strings"
	"testing"
)

const execAbort = "-EXECABORT Transaction discarded because of previous errors."

func TestMultiExec(t *testing.T) {
	h := newHarness(t)
	h.putModel("m")
	h.run(
		row("EXEC", "-ERR EXEC without MULTI"),
		row("DISCARD", "-ERR DISCARD without MULTI"),
		// Queued, then run in order; each reply is an element of EXEC's.
		row("MULTI", "+OK"),
		row("AI.TENSORSET t INT8 2 VALUES 1 2", "+QUEUED"),
		row("AI.TENSORGET t VALUES", "+QUEUED"),
		row("EXISTS t", "+QUEUED"),
		row("EXEC", "[+OK [:1 :2] :1]"),
		row("EXEC", "-ERR EXEC without MULTI"),
		// Each queued command keeps a parsed form of its own (a command
		// run at once is parsed into the connection's scratch).
		row("MULTI", "+OK"),
		row("AI.TENSORSET a INT8 1 VALUES 5", "+QUEUED"),
		row("AI.TENSORSET b INT8 1 VALUES 6", "+QUEUED"),
		row("AI.TENSORGET a VALUES", "+QUEUED"),
		row("AI.TENSORGET b VALUES", "+QUEUED"),
		row("EXEC", "[+OK +OK [:5] [:6]]"),
		// An empty transaction.
		row("MULTI", "+OK"),
		row("EXEC", "[]"),
		// Nested MULTI is an error that does not abort the transaction.
		row("MULTI", "+OK"),
		row("MULTI", "-ERR MULTI calls can not be nested"),
		row("ECHO a", "+QUEUED"),
		row("EXEC", `["a"]`),
		// Errors at run time are the commands' replies; the others still run.
		row("MULTI", "+OK"),
		row("AI.TENSORGET m", "+QUEUED"),
		row("AI.TENSORGET nokey", "+QUEUED"),
		row("ECHO b", "+QUEUED"),
		row("EXEC", `[`+wrongType+` `+tensorEmpty+` "b"]`),
		// As Redis: a command that does not parse is queued; its error is
		// its reply in EXEC (only unknown commands and arity abort).
		row("MULTI", "+OK"),
		row("AI.TENSORSET u FOO 1", "+QUEUED"),
		row("EXPIRE t 10 FOO", "+QUEUED"),
		row("AI.TENSORSET u INT8 1", "+QUEUED"),
		row("EXEC", `[`+badDType+` -ERR Unsupported option FOO +OK]`),
		row("EXISTS u", ":1"),
		// An unknown command or a wrong arity aborts it.
		row("MULTI", "+OK"),
		row("AI.TENSORSET v INT8 1", "+QUEUED"),
		row("NOSUCH x", "-ERR unknown command 'NOSUCH', with args beginning with: 'x' "),
		row("ECHO c", "+QUEUED"),
		row("EXEC", execAbort),
		row("EXISTS v", ":0"),
		row("MULTI", "+OK"),
		row("ECHO", "-ERR wrong number of arguments for 'echo' command"),
		row("EXEC", execAbort),
		row("EXEC", "-ERR EXEC without MULTI"),
		// DISCARD drops the queue.
		row("MULTI", "+OK"),
		row("AI.TENSORSET w INT8 1", "+QUEUED"),
		row("DISCARD", "+OK"),
		row("EXISTS w", ":0"),
		row("EXEC", "-ERR EXEC without MULTI"),
		// RESET leaves the transaction too.
		row("MULTI", "+OK"),
		row("AI.TENSORSET w INT8 1", "+QUEUED"),
		row("RESET", "+RESET"),
		row("EXEC", "-ERR EXEC without MULTI"),
		row("EXISTS w", ":0"),
		// RedisAI's blocking commands cannot run inside a transaction.
		row("MULTI", "+OK"),
		row("AI.MODELEXECUTE m INPUTS 1 t OUTPUTS 1 o", "+QUEUED"),
		row("AI.DAGEXECUTE LOAD 1 t |> AI.TENSORGET t VALUES", "+QUEUED"),
		row("ECHO d", "+QUEUED"),
		row("EXEC", `[-ERR Cannot run RedisAI command within a transaction or a LUA script -ERR Cannot run RedisAI command within a transaction or a LUA script "d"]`),
	)
}

// Commands queued by MULTI keep their arguments: the connection's buffer
// is reused by the next command.
// RedisAI refuses its blocking commands (model runs, DAGs) inside a
// transaction before it reads their arguments: EXEC answered the arity or
// syntax error of one queued with too few, not the refusal
// (REDISAI.md 3.7: "1. MULTI/Lua").
func TestMultiRefusesBlockingAICommandsFirst(t *testing.T) {
	h := newHarness(t)
	const inMulti = "-ERR Cannot run RedisAI command within a transaction or a LUA script"
	h.run(
		row("MULTI", "+OK"),
		row("AI.MODELEXECUTE", "+QUEUED"),
		row("AI.MODELEXECUTE m INPUTS 1 t", "+QUEUED"),
		row("AI.MODELRUN m", "+QUEUED"),
		row("AI.DAGEXECUTE", "+QUEUED"),
		row("AI.DAGEXECUTE ROUTING r |> AI.TENSORGET", "+QUEUED"),
		row("AI.DAGRUN_RO PERSIST 1 t |> AI.TENSORGET t", "+QUEUED"),
		row("EXEC", "["+strings.Repeat(inMulti+" ", 5)+inMulti+"]"),
	)
}

func TestMultiKeepsArguments(t *testing.T) {
	h := newHarness(t)
	h.run(row("MULTI", "+OK"))
	argv := [][]byte{[]byte("ECHO"), []byte("abc")}
	h.s.Dispatch(h.c, argv, OwnedFunc(func(int) bool { return false }))
	argv[1][0] = 'X'
	h.c.W.Reset()
	h.run(row("EXEC", `["abc"]`))
}

// EXEC runs under the transaction lock's write side: no other command
// interleaves with the queued ones.
func TestExecIsAtomic(t *testing.T) {
	h := newHarness(t)
	other := h.client("127.0.0.1:50002")
	h.run(row("MULTI", "+OK"))
	for i := 0; i < 200; i++ {
		h.run(row("AI.TENSORSET t INT8 1 VALUES 1", "+QUEUED"), row("DEL t", "+QUEUED"))
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 200; i++ {
			// Between a queued SET and its DEL the key exists; from outside
			// it never does.
			if got := render(other.do("EXISTS t")); got != ":0" {
				t.Errorf("another client saw a transaction half done: EXISTS t = %s", got)
				return
			}
		}
	}()
	h.do("EXEC")
	<-done
}

// A command queued by MULTI keeps the arguments that have an allocation of
// their own (a large bulk, an upload's chunk) and copies those borrowed
// from the connection's buffer, which the next command overwrites.
func TestDetachKeepsOwnedArguments(t *testing.T) {
	own, borrowed := []byte("owned"), []byte("arena")
	d := NewArgs([][]byte{[]byte("x"), own, borrowed}, OwnedFunc(func(i int) bool { return i == 1 })).Detach()
	if &d.V[1][0] != &own[0] {
		t.Error("an owned argument was copied")
	}
	borrowed[0] = 'X'
	if string(d.V[2]) != "arena" {
		t.Errorf("a borrowed argument was kept: %q", d.V[2])
	}
}

// What MULTI holds queued counts in UsedMemory, in CLIENT LIST and against
// maxmemory, until EXEC, DISCARD, RESET or the connection's end.
func TestMultiQueueCountsAgainstMaxmemory(t *testing.T) {
	h := newHarness(t)
	other := h.client("127.0.0.1:50002")
	h.s.Opts.MaxMemory.Store(150)
	set := "AI.TENSORSET t UINT8 40 BLOB " + strings.Repeat("x", 40)
	argBytes := int64(len(strings.ReplaceAll(set, " ", "")))
	list := func() string { return render(other.do("CLIENT LIST")) }
	h.run(row("MULTI", "+OK"), row(set, "+QUEUED"), row(set, "+QUEUED"))
	if got := h.s.UsedMemory(); got != 2*argBytes {
		t.Fatalf("UsedMemory with two commands queued: %d, want %d", got, 2*argBytes)
	}
	for _, want := range []string{" flags=x ", " multi=2 ", " multi-mem=" + strconv.FormatInt(2*argBytes, 10) + " "} {
		if l := list(); !strings.Contains(l, want) {
			t.Errorf("CLIENT LIST in MULTI lacks %q: %s", want, l)
		}
	}
	// Past maxmemory (150 bytes, 192 queued): the fourth is refused, and
	// EXEC aborts.
	h.run(row(set, "+QUEUED"), row(set, "-OOM command not allowed when used memory > 'maxmemory'."), row("EXEC", execAbort))
	for _, end := range []string{"DISCARD", "RESET", ""} {
		if got := h.s.UsedMemory(); got != 0 {
			t.Fatalf("UsedMemory after the transaction ended: %d", got)
		}
		h.run(row("MULTI", "+OK"), row(set, "+QUEUED"))
		if end != "" {
			h.do(end)
		}
	}
	if l := list(); !strings.Contains(l, " flags=x db=0 sub=0 psub=0 ssub=0 multi=1 ") {
		t.Fatalf("CLIENT LIST: %s", l)
	}
	h.s.RemoveClient(h.c)
	if got := h.s.UsedMemory(); got != 0 {
		t.Fatalf("UsedMemory after the client left in MULTI: %d", got)
	}
}
