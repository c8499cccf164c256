package commands

import (
	"strings"
	"testing"
)

const (
	loading = "-LOADING EnclaveAI is loading the dataset in memory"
	oom     = "-OOM command not allowed when used memory > 'maxmemory'."
)

// The dispatcher's checks, in Redis's order: unknown command, arity,
// authentication, loading, memory.
func TestDispatchErrors(t *testing.T) {
	h := newHarness(t)
	long := strings.Repeat("a", 200)
	var abc []string
	for c := 'a'; c <= 'z'; c++ {
		abc = append(abc, string(c))
	}
	for c := 'a'; c <= 'z'; c++ {
		abc = append(abc, string(c)+string(c))
	}
	h.run(
		row("FOO", "-ERR unknown command 'FOO', with args beginning with: "),
		row("foo a b", "-ERR unknown command 'foo', with args beginning with: 'a' 'b' "),
		row(`FOO "a b" ""`, "-ERR unknown command 'FOO', with args beginning with: 'a b' '' "),
		row(`FOO "a\r\nb"`, "-ERR unknown command 'FOO', with args beginning with: 'a  b' "),
		// redis-server 7.0: arguments shown until 128 bytes of them.
		row("FOO "+long+" b", "-ERR unknown command 'FOO', with args beginning with: '"+long[:128]+"' "),
		row("FOO "+strings.Join(abc, " "), "-ERR unknown command 'FOO', with args beginning with: "+
			"'a' 'b' 'c' 'd' 'e' 'f' 'g' 'h' 'i' 'j' 'k' 'l' 'm' 'n' 'o' 'p' 'q' 'r' 's' 't' 'u' 'v' 'w' 'x' 'y' 'z' 'aa' 'bb' 'cc' 'dd' 'ee' "),
		row(long, "-ERR unknown command '"+long[:128]+"', with args beginning with: "),
		row("AI.TENSORGETTINGLONGERTHANTHIRTYTWOBYTES x", "-ERR unknown command 'AI.TENSORGETTINGLONGERTHANTHIRTYTWOBYTES', with args beginning with: 'x' "),
		// Arity errors name the command in lower case (Redis 7).
		row("AI.TENSORGET", "-ERR wrong number of arguments for 'ai.tensorget' command"),
		row("Echo", "-ERR wrong number of arguments for 'echo' command"),
		row("eXiStS", "-ERR wrong number of arguments for 'exists' command"),
		row("DBSIZE x", "-ERR wrong number of arguments for 'dbsize' command"),
		// Names are case-insensitive.
		row("echo x", `"x"`),
		row("eChO x", `"x"`),
	)
	if n := h.s.Stats().Errors.Load(); n != 12 {
		t.Errorf("total_error_replies = %d, want 12", n)
	}
}

func TestDispatchLoading(t *testing.T) {
	h := newHarness(t)
	h.s.SetLoading(true)
	h.run(
		row("FOO", "-ERR unknown command 'FOO', with args beginning with: "),
		row("ECHO", "-ERR wrong number of arguments for 'echo' command"),
		row("AI.TENSORGET t", loading),
		row("AI.TENSORSET t INT8 1", loading),
		row("DBSIZE", loading),
		row("KEYS *", loading),
		row("DEL t", loading),
		row("PING", loading), // as redis-server: PING is not flagged loading
		// Commands flagged loading still run.
		row("ECHO x", `"x"`),
		row("INFO nosuch", `""`),
		row("CONFIG GET port", `["port" "6379"]`),
		row("CLIENT ID", ":1"),
		row("SELECT 0", "+OK"),
		row("TIME", `~^\["\d+" "\d+"\]$`),
		// A refused command aborts a transaction.
		row("MULTI", "+OK"),
		row("AI.TENSORGET t", loading),
		row("EXEC", execAbort),
	)
	h.s.SetLoading(false)
	h.run(row("DBSIZE", ":0"))
	// NOAUTH comes before LOADING.
	p := withPassword(t, "pw")
	p.s.SetLoading(true)
	p.run(row("DBSIZE", noAuth), row("AUTH pw", "+OK"), row("DBSIZE", loading))
}

func TestDispatchOOM(t *testing.T) {
	h := newHarness(t)
	h.run(
		row("AI.TENSORSET big UINT8 1000", "+OK"),
		row("CONFIG SET maxmemory 1000", "+OK"),
		// Over maxmemory: commands flagged denyoom are refused...
		row("AI.TENSORSET x INT8 1", oom),
		row("AI.TENSORSET big INT8 1", oom),
		// ...the others run, and can free memory.
		row("AI.TENSORGET big META", `["dtype" "UINT8" "shape" [:1000]]`),
		// Inside MULTI the refusal aborts the transaction, as in Redis.
		row("MULTI", "+OK"),
		row("AI.TENSORSET x INT8 1", oom),
		row("EXEC", "-EXECABORT Transaction discarded because of previous errors."),
		row("EXISTS x", ":0"),
		row("EXPIRE big 100", ":1"),
		row("DEL big", ":1"),
		row("AI.TENSORSET x INT8 1", "+OK"),
		// Under it, a write that would pass it is refused and changes nothing.
		row("AI.TENSORSET y UINT8 2000", oom),
		row("EXISTS y", ":0"),
		row("DBSIZE", ":1"),
		row("CONFIG SET maxmemory 0", "+OK"),
		row("AI.TENSORSET y UINT8 2000", "+OK"),
	)
}
