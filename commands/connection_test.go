package commands

import (
	"testing"

	"github.com/enclaveai/enclaveai/config"
)

// HELLO's replies; its modules list RedisAI (module.go).
var (
	hello2 = `["server" "redis" "version" "` + RedisVersion + `" "proto" :2 "id" :1 "mode" "standalone" "role" "master" "modules" [["name" "ai" "ver" :10207 "path" "` + executable() + `" "args" []]]]`
	hello3 = `%{"server" "redis" "version" "` + RedisVersion + `" "proto" :3 "id" :1 "mode" "standalone" "role" "master" "modules" [%{"name" "ai" "ver" :10207 "path" "` + executable() + `" "args" []}]}`
)

const (
	noAuth        = "-NOAUTH Authentication required."
	wrongPass     = "-WRONGPASS invalid username-password pair or user is disabled."
	noPassword    = "-ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?"
	badClientName = "-ERR Client names cannot contain spaces, newlines or special characters."
)

func TestConnectionCommands(t *testing.T) {
	h := newHarness(t)
	h.run(
		row("PING", "+PONG"),
		row("PING hi", `"hi"`),
		row(`PING "a b"`, `"a b"`),
		row("PING a b", "-ERR wrong number of arguments for 'ping' command"),
		row("ECHO hi", `"hi"`),
		row(`ECHO ""`, `""`),
		row("ECHO", "-ERR wrong number of arguments for 'echo' command"),
		row("ECHO a b", "-ERR wrong number of arguments for 'echo' command"),
		row("SELECT 0", "+OK"),
		row("SELECT 1", "-ERR DB index is out of range"),
		row("SELECT 00", "-ERR value is not an integer or out of range"),
		row("SELECT x", "-ERR value is not an integer or out of range"),
	)
}

// HELLO: the reply is a map (an array of pairs in RESP2), and the
// protocol it selects stays for the following replies.
func TestHello(t *testing.T) {
	h := newHarness(t)
	h.run(
		row("HELLO", hello2),
		row("HELLO 4", "-NOPROTO unsupported protocol version"),
		row("HELLO 1", "-NOPROTO unsupported protocol version"),
		row("HELLO abc", "-ERR Protocol version is not an integer or out of range"),
		row("HELLO 3 FOO", "-ERR Syntax error in HELLO option 'FOO'"),
		row("HELLO 3 AUTH default", "-ERR Syntax error in HELLO option 'AUTH'"),
		row("HELLO 3 SETNAME", "-ERR Syntax error in HELLO option 'SETNAME'"),
		row("HELLO 3 SETNAME a b", "-ERR Syntax error in HELLO option 'b'"),
		row(`HELLO 3 SETNAME "a b"`, badClientName),
		row("CLIENT GETNAME", "nil"), // a refused HELLO changes nothing
		row("HELLO 3", hello3),
		row("CLIENT GETNAME", "_"),
		row("HELLO", hello3), // without a version: the current one
		row("HELLO 2 SETNAME conn1", hello2),
		row("CLIENT GETNAME", `"conn1"`),
		row("hello 3 setname conn2", hello3),
		row("CLIENT GETNAME", `"conn2"`),
		row("RESET", "+RESET"),
		row("CLIENT GETNAME", "nil"),
		row("HELLO", hello2),
	)
}

// Without requirepass, the default user takes any password, but the
// one-argument AUTH is an error (redis-server 7).
func TestAuthWithoutPassword(t *testing.T) {
	h := newHarness(t)
	h.run(
		row("AUTH x", noPassword),
		row("AUTH default x", "+OK"),
		row("AUTH foo x", wrongPass),
		row("AUTH a b c", "-ERR syntax error"),
		row("AUTH", "-ERR wrong number of arguments for 'auth' command"),
		row("HELLO 2 AUTH default x", hello2),
		row("HELLO 3 AUTH foo x", wrongPass),
		row("HELLO", hello2),
	)
}

func withPassword(t *testing.T, pass string) *harness {
	opts := config.Default()
	opts.Requirepass.Store(&pass)
	return newHarnessOpts(t, opts)
}

func TestAuthRequired(t *testing.T) {
	h := withPassword(t, "s3cret")
	h.run(
		// Unknown commands and arity come first, then NOAUTH.
		row("FOO", "-ERR unknown command 'FOO', with args beginning with: "),
		row("ECHO", "-ERR wrong number of arguments for 'echo' command"),
		row("PING", noAuth),
		row("ECHO x", noAuth),
		row("AI.TENSORGET t", noAuth),
		row("AI.TENSORSET t FLOAT 1", noAuth),
		row("DBSIZE", noAuth),
		row("MULTI", noAuth),
		row("CLIENT ID", noAuth),
		row("CONFIG GET requirepass", noAuth),
		row("HELLO 3", "-NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time"),
		row("HELLO", "~^-NOAUTH HELLO must be called"),
		row("AUTH x", wrongPass),
		row("AUTH default x", wrongPass),
		row("AUTH foo s3cret", wrongPass),
		row("AUTH S3CRET", wrongPass),
		row("HELLO 3 AUTH default x", wrongPass),
		row("HELLO 3 AUTH foo s3cret", wrongPass),
		row("ECHO x", noAuth),
		row("HELLO 3 AUTH default s3cret", hello3),
		row("ECHO x", `"x"`),
		row("DBSIZE", ":0"),
		// RESET goes back to unauthenticated (and RESP2).
		row("RESET", "+RESET"),
		row("ECHO x", noAuth),
		row("AUTH s3cret", "+OK"),
		row("ECHO x", `"x"`),
		row("AUTH default s3cret", "+OK"),
		row("AUTH x", wrongPass),
		row("ECHO x", `"x"`), // a failed AUTH does not log out
	)
	if !h.c.Authed() {
		t.Error("Authed() is false after AUTH")
	}
	// Until it authenticates, a client reads under Redis's small limits.
	other := h.client("127.0.0.1:50002")
	if l := h.s.PreLimits(other.c); !l.Unauth || l.MaxArgs != 10 || l.MaxBulk != 16<<10 {
		t.Errorf("limits before AUTH: %+v", l)
	}
	other.run(row("AUTH s3cret", "+OK"))
	if l := h.s.PreLimits(other.c); l.Unauth || l.MaxBulk != h.s.Opts.ProtoMaxBulkLen.Load() {
		t.Errorf("limits after AUTH: %+v", l)
	}
}

// Named users from `user` directives: AUTH name password, ACL WHOAMI and
// ACL USERS; a wrong password, a user that is off, an unknown user all get
// the same WRONGPASS, and a failed AUTH keeps the user logged in before.
func TestUsersAuth(t *testing.T) {
	opts, err := config.Load([]string{"--user", "alice", "on", ">pa", "--user", "bob", ">pb"})
	if err != nil {
		t.Fatal(err)
	}
	h := newHarnessOpts(t, opts)
	h.run(
		row("ACL WHOAMI", `"default"`),
		row("ACL USERS", `["alice" "bob" "default"]`),
		row("AUTH alice pb", wrongPass),
		row("AUTH bob pb", wrongPass),
		row("AUTH carol pa", wrongPass),
		row("AUTH alice pa", "+OK"),
		row("ACL WHOAMI", `"alice"`),
		row("AUTH bob pb", wrongPass),
		row("ACL WHOAMI", `"alice"`),
		row("CLIENT INFO", `~ user=alice `),
		row("RESET", "+RESET"),
		row("ACL WHOAMI", `"default"`),
		row("ACL WHOAMI x", "-ERR wrong number of arguments for 'acl|whoami' command"),
		row("ACL SETUSER x", "-ERR unknown subcommand 'SETUSER'. Try ACL HELP."),
	)
}

func TestQuit(t *testing.T) {
	h := newHarness(t)
	h.run(row("QUIT", "+OK"))
	if !h.c.CloseAfterReply() {
		t.Error("QUIT does not close the connection after its reply")
	}
}

type closeCounter struct{ n int }

func (c *closeCounter) Close() error { c.n++; return nil }

func TestClientCommands(t *testing.T) {
	h := newHarness(t)
	h.run(
		row("CLIENT ID", ":1"),
		row("CLIENT ID x", "-ERR wrong number of arguments for 'client|id' command"),
		row("CLIENT", "-ERR wrong number of arguments for 'client' command"),
		row("CLIENT FOO", "-ERR unknown subcommand 'FOO'. Try CLIENT HELP."),
		row("CLIENT GETNAME", "nil"),
		row("CLIENT GETNAME x", "-ERR wrong number of arguments for 'client|getname' command"),
		row("CLIENT SETNAME", "-ERR wrong number of arguments for 'client|setname' command"),
		row("CLIENT SETNAME a b", "-ERR wrong number of arguments for 'client|setname' command"),
		row(`CLIENT SETNAME "a b"`, badClientName),
		row(`CLIENT SETNAME "a\nb"`, badClientName),
		row(`CLIENT SETNAME "\xff"`, badClientName),
		row("CLIENT SETNAME worker-1", "+OK"),
		row("CLIENT GETNAME", `"worker-1"`),
		row("client setname ~!{}", "+OK"),
		row("CLIENT GETNAME", `"~!{}"`),
		row(`CLIENT SETNAME ""`, "+OK"),
		row("CLIENT GETNAME", "nil"),
		row("CLIENT SETNAME me", "+OK"),
		row("CLIENT SETINFO lib-name redis-py", "+OK"),
		row("CLIENT SETINFO LIB-VER 5.0.1", "+OK"),
		row("CLIENT SETINFO lib-foo x", "-ERR Unrecognized option 'lib-foo'"),
		row(`CLIENT SETINFO lib-name "a b"`, "-ERR lib-name cannot contain spaces, newlines or special characters."),
		row(`CLIENT SETINFO LIB-VER "a b"`, "-ERR LIB-VER cannot contain spaces, newlines or special characters."),
		row("CLIENT SETINFO lib-name", "-ERR wrong number of arguments for 'client|setinfo' command"),
		row("CLIENT INFO", `~^"id=1 addr=127\.0\.0\.1:50001 laddr=127\.0\.0\.1:6379 fd=\d+ name=me .* cmd=client\|info .*resp=2 lib-name=redis-py lib-ver=5\.0\.1\\n"$`),
		row("CLIENT NO-EVICT on", "+OK"),
		row("CLIENT NO-TOUCH off", "+OK"),
		row("CLIENT NO-EVICT", "-ERR wrong number of arguments for 'client|no-evict' command"),
	)
	// CLIENT LIST and KILL see the other connections.
	closer := &closeCounter{}
	other := &harness{t: t, s: h.s, c: h.s.NewClient("10.0.0.2:4000", "127.0.0.1:6379", closer)}
	other.run(row("CLIENT SETNAME other", "+OK"))
	h.run(
		row("CLIENT LIST", `~^"id=1 addr=127\.0\.0\.1:50001 .*name=me .*\\nid=2 addr=10\.0\.0\.2:4000 .*name=other .*\\n"$`),
		row("CLIENT LIST ID 2", `~^"id=2 addr=10\.0\.0\.2:4000 [^\\]*\\n"$`),
		row("CLIENT LIST ID 1 2", `~^"id=1 .*\\nid=2 .*\\n"$`),
		row("CLIENT LIST ID 99", `""`),
		row("CLIENT LIST TYPE normal", `~^"id=1 .*\\nid=2 .*\\n"$`),
		row("CLIENT LIST TYPE foo", "-ERR Unknown client type 'foo'"),
		row("CLIENT LIST ID abc", "-ERR Invalid client ID"),
		row("CLIENT LIST ID 0", `""`), // redis-server 7.0.15 (hunt)
		row("CLIENT LIST TYPE pubsub", `""`),
		row("CLIENT LIST FOO", "-ERR syntax error"),
		row("CLIENT KILL ID 0", "-ERR client-id should be greater than 0"),
		row("CLIENT KILL ID x", "-ERR client-id should be greater than 0"),
		row("CLIENT KILL ID 99", ":0"),
		row("CLIENT KILL 1.2.3.4:5", "-ERR No such client"),
		row("CLIENT KILL ID", "-ERR No such client"), // the legacy form: an address
		row("CLIENT KILL FOO bar", "-ERR syntax error"),
		row("CLIENT KILL SKIPME maybe", "-ERR syntax error"),
		row("CLIENT KILL ADDR 127.0.0.1:50001", ":0"), // SKIPME yes by default
		row("CLIENT KILL ID 2", ":1"),
	)
	if closer.n != 1 {
		t.Errorf("CLIENT KILL closed the victim %d times, want 1", closer.n)
	}
	if h.c.CloseAfterReply() {
		t.Fatal("the caller was killed")
	}
	h.run(row("CLIENT KILL 10.0.0.2:4000", "+OK")) // legacy form
	if closer.n != 1 {
		t.Errorf("a client is closed once however often it is killed (%d)", closer.n)
	}
	h.run(row("CLIENT KILL ADDR 127.0.0.1:50001 SKIPME no", ":1"))
	if !h.c.CloseAfterReply() {
		t.Error("killing oneself closes after the reply")
	}
	h.s.RemoveClient(other.c)
	if n := h.s.NumClients(); n != 1 {
		t.Errorf("NumClients = %d after RemoveClient", n)
	}
}
