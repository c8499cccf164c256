package commands

import (
	"fmt"
	"strings"
	"testing"
)

// The slow log keeps a command's shape, never its tensor or model bytes
// nor passwords, and bounds its arguments as Redis does.
func TestSlowArgs(t *testing.T) {
	long := strings.Repeat("k", 130)
	many := []string{"DEL"}
	for i := range 40 {
		many = append(many, fmt.Sprint("k", i))
	}
	for _, tc := range []struct {
		argv []string
		want string
	}{
		{[]string{"AI.TENSORSET", "t", "FLOAT", "2", "BLOB", "12345678"}, "AI.TENSORSET|t|FLOAT|2|BLOB|(8 bytes redacted)"},
		{[]string{"AI.TENSORSET", "t", "INT8", "2", "VALUES", "1", "2"}, "AI.TENSORSET|t|INT8|2|VALUES|(redacted)|(redacted)"},
		{[]string{"AI.MODELSTORE", "m", "ONNX", "CPU", "TAG", "v", "BLOB", "abc", "de"}, "AI.MODELSTORE|m|ONNX|CPU|TAG|v|BLOB|(3 bytes redacted)|(2 bytes redacted)"},
		{[]string{"AI.DAGEXECUTE", "ROUTING", "m", "|>", "AI.TENSORSET", "a", "FLOAT", "1", "VALUES", "5", "|>", "AI.MODELEXECUTE", "m"},
			"AI.DAGEXECUTE|ROUTING|m||>|AI.TENSORSET|a|FLOAT|1|VALUES|(redacted)||>|AI.MODELEXECUTE|m"},
		{[]string{"AI.TENSORSET", "blob", "INT8", "1", "BLOB", "x"}, "AI.TENSORSET|blob|INT8|1|BLOB|(1 bytes redacted)"},
		// |> splits a DAG only: elsewhere a key named |> hid the keyword
		// after it, and values after a |> were shown (review).
		{[]string{"AI.TENSORSET", "|>", "STRING", "BLOB", "secret"}, "AI.TENSORSET||>|STRING|BLOB|(6 bytes redacted)"},
		{[]string{"AI.TENSORSET", "k", "INT8", "3", "VALUES", "1", "|>", "3"}, "AI.TENSORSET|k|INT8|3|VALUES|(redacted)|(redacted)|(redacted)"},
		{[]string{"ai.dagrun", "|>", "AI.TENSORSET", "BLOB", "INT8", "1", "BLOB", "x"}, "ai.dagrun||>|AI.TENSORSET|BLOB|INT8|1|BLOB|(1 bytes redacted)"},
		// Secrets as Redis 7 redacts them, without their length (hunt).
		{[]string{"AUTH", "user", "secret"}, "AUTH|(redacted)|(redacted)"},
		{[]string{"HELLO", "3", "AUTH", "u", "pw"}, "HELLO|3|AUTH|(redacted)|(redacted)"},
		{[]string{"HELLO", "3", "AUTH", "u", "pw", "SETNAME", "n"}, "HELLO|3|AUTH|(redacted)|(redacted)|SETNAME|n"},
		// A client named "auth" (security review: the password showed).
		{[]string{"HELLO", "3", "SETNAME", "auth", "AUTH", "alice", "pa"}, "HELLO|3|SETNAME|auth|AUTH|(redacted)|(redacted)"},
		{[]string{"HELLO", "2", "SETNAME", "AUTH", "AUTH", "alice", "pa"}, "HELLO|2|SETNAME|AUTH|AUTH|(redacted)|(redacted)"},
		{[]string{"HELLO", "SETNAME", "AUTH", "default", "pw"}, "HELLO|SETNAME|AUTH|(redacted)|(redacted)"},
		{[]string{"CONFIG", "SET", "maxmemory", "1mb", "RequirePass", "secret"}, "CONFIG|SET|maxmemory|1mb|RequirePass|(redacted)"},
		{[]string{"config", "set", "requirepass", "pw", "timeout", "requirepass"}, "config|set|requirepass|(redacted)|timeout|requirepass"},
		{[]string{"CONFIG", "GET", "requirepass"}, "CONFIG|GET|requirepass"},
		{[]string{"CONFIG", "SET", "MasterAuth", "node-secret", "masteruser", "node"}, "CONFIG|SET|MasterAuth|(redacted)|masteruser|node"},
		// HELLO without its version still hides AUTH's (review: MONITOR
		// showed the password), and CONFIG SET user a user's (refused, but
		// kept by the slow log).
		{[]string{"HELLO", "AUTH", "u", "pw"}, "HELLO|AUTH|(redacted)|(redacted)"},
		{[]string{"hello", "auth", "u", "pw", "SETNAME", "n"}, "hello|auth|(redacted)|(redacted)|SETNAME|n"},
		{[]string{"CONFIG", "SET", "User", "carol on >pw"}, "CONFIG|SET|User|(redacted)"},
		{[]string{"GET", long}, "GET|" + long[:128] + "... (2 more bytes)"},
		{many, strings.Join(many[:31], "|") + "|... (10 more arguments)"},
	} {
		argv := make([][]byte, len(tc.argv))
		for i, a := range tc.argv {
			argv[i] = []byte(a)
		}
		if got := strings.Join(slowArgs(argv), "|"); got != tc.want {
			t.Errorf("%q:\n got %s\nwant %s", tc.argv[0], got, tc.want)
		}
	}
}

func TestMonitorRepr(t *testing.T) {
	// As redis-server 7.0.15's MONITOR writes them.
	for in, want := range map[string]string{
		"plain":      `"plain"`,
		"é":          `"\xc3\xa9"`,
		"a\"b\\c":    `"a\"b\\c"`,
		"\n\r\t\a\b": `"\n\r\t\a\b"`,
		"\x00\x7f~ ": `"\x00\x7f~ "`,
	} {
		var b strings.Builder
		repr(&b, in)
		if b.String() != want {
			t.Errorf("repr(%q) = %s, want %s", in, b.String(), want)
		}
	}
}
