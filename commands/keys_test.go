package commands

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestKeyCommands(t *testing.T) {
	h := newHarness(t)
	m := h.putModel("m")
	h.run(
		row("AI.TENSORSET a INT8 1", "+OK"),
		row("AI.TENSORSET b INT8 1", "+OK"),
		row("AI.TENSORSET c INT8 1", "+OK"),
		row("EXISTS a", ":1"),
		row("EXISTS a a nokey m", ":3"),
		row("EXISTS nokey", ":0"),
		row("TYPE a", "+AI_TENSOR"),
		row("TYPE m", "+AI__MODEL"),
		row("TYPE nokey", "+none"),
		row("DBSIZE", ":4"),
		row("DEL a nokey a", ":1"),
		row("EXISTS a", ":0"),
		row("UNLINK b", ":1"),
		row("DEL", "-ERR wrong number of arguments for 'del' command"),
		row("EXISTS", "-ERR wrong number of arguments for 'exists' command"),
		row("TYPE", "-ERR wrong number of arguments for 'type' command"),
		row("TYPE a b", "-ERR wrong number of arguments for 'type' command"),
		// RENAME moves the value (and replaces the destination).
		row("RENAME nokey x", "-ERR no such key"),
		row("RENAME c c", "+OK"),
		row("RENAME c d", "+OK"),
		row("EXISTS c d", ":1"),
		row("TYPE d", "+AI_TENSOR"),
		row("RENAME d m", "+OK"),
		row("TYPE m", "+AI_TENSOR"),
		row("DBSIZE", ":1"),
		row("RENAME a", "-ERR wrong number of arguments for 'rename' command"),
	)
	if m.released != 1 {
		t.Errorf("the model replaced by RENAME was released %d times, want 1", m.released)
	}
	m2 := h.putModel("m2")
	h.run(
		row("DEL m2", ":1"),
		row("FLUSHALL FOO", "-ERR syntax error"),
		row("FLUSHALL ASYNC SYNC", "-ERR syntax error"),
		row("FLUSHALL ASYNC", "+OK"),
		row("DBSIZE", ":0"),
		row("AI.TENSORSET a INT8 1", "+OK"),
		row("FLUSHDB sync", "+OK"),
		row("FLUSHDB", "+OK"),
		row("DBSIZE", ":0"),
	)
	if m2.released != 1 {
		t.Errorf("the model removed by DEL was released %d times, want 1", m2.released)
	}
	m3 := h.putModel("m3")
	h.run(row("FLUSHALL", "+OK"))
	if m3.released != 1 {
		t.Errorf("the model removed by FLUSHALL was released %d times, want 1", m3.released)
	}
}

// The expire family against the real clock: TTLs are asserted with the
// rounding Redis applies, never slept for.
func TestExpireCommands(t *testing.T) {
	h := newHarness(t)
	h.run(
		row("EXPIRE nokey 10", ":0"),
		row("TTL nokey", ":-2"),
		row("PTTL nokey", ":-2"),
		row("AI.TENSORSET k INT8 1", "+OK"),
		row("TTL k", ":-1"),
		row("PTTL k", ":-1"),
		row("EXPIRETIME nokey", ":-2"),
		row("PEXPIRETIME k", ":-1"),
		row("PEXPIREAT k 33177600000123", ":1"),
		row("EXPIRETIME k", ":33177600000"),
		row("PEXPIRETIME k", ":33177600000123"),
		row("PEXPIREAT k 33177600000600", ":1"),
		row("EXPIRETIME k", ":33177600001"), // rounded, as redis-server 7.0.15
		row("EXPIRE k 100", ":1"),
		row("TTL k", ":100"),
		row("PTTL k", `~^:(99\d\d\d|100000)$`),
		// NX / XX / GT / LT.
		row("EXPIRE k 50 NX", ":0"),
		row("EXPIRE k 200 XX", ":1"),
		row("TTL k", ":200"),
		row("EXPIRE k 100 GT", ":0"),
		row("EXPIRE k 300 GT", ":1"),
		row("EXPIRE k 400 LT", ":0"),
		row("EXPIRE k 50 LT", ":1"),
		row("TTL k", ":50"),
		row("expire k 60 gt", ":1"),
		row("PERSIST k", ":1"),
		row("PERSIST k", ":0"),
		row("PERSIST nokey", ":0"),
		row("TTL k", ":-1"),
		// Without a TTL, GT never applies and LT always does (infinite TTL).
		row("EXPIRE k 10 XX", ":0"),
		row("EXPIRE k 10 GT", ":0"),
		row("EXPIRE k 10 LT", ":1"),
		row("EXPIRE k 20 NX", ":0"),
		row("PERSIST k", ":1"),
		row("EXPIRE k 20 NX", ":1"),
		// Errors, in Redis's order: options, then the number, then its range.
		row("EXPIRE k 10 NX XX", "-ERR NX and XX, GT or LT options at the same time are not compatible"),
		row("EXPIRE k 10 NX GT", "-ERR NX and XX, GT or LT options at the same time are not compatible"),
		row("EXPIRE k 10 GT LT", "-ERR GT and LT options at the same time are not compatible"),
		row("EXPIRE k 10 FOO", "-ERR Unsupported option FOO"),
		row("EXPIRE k abc", "-ERR value is not an integer or out of range"),
		row("EXPIRE k abc FOO", "-ERR Unsupported option FOO"),
		row("EXPIRE k abc NX XX", "-ERR NX and XX, GT or LT options at the same time are not compatible"),
		row("EXPIRE k 010", "-ERR value is not an integer or out of range"),
		row("EXPIRE k 1.5", "-ERR value is not an integer or out of range"),
		row("EXPIRE k 9999999999999999", "-ERR invalid expire time in 'expire' command"),
		row("PEXPIRE k 9223372036854775807", "-ERR invalid expire time in 'pexpire' command"),
		row("EXPIREAT k -9999999999999999", "-ERR invalid expire time in 'expireat' command"),
		// As redis-server 7.0.15 (hunt): refused only on overflow.
		row("EXPIRE k 9223372036854775", "-ERR invalid expire time in 'expire' command"),
		row("EXPIRE k 5000000000000000", ":1"),
		row("PEXPIREAT k 9223372036854775807", ":1"),
		row("EXPIREAT k 9223372036854775", ":1"),
		row("EXPIRE nosuch 9223372036854775", "-ERR invalid expire time in 'expire' command"),
		// No TTL is infinite: LT always sets one, GT never (review).
		row("PERSIST k", ":1"),
		row("PEXPIREAT k 9223372036854775807 LT", ":1"),
		row("PERSIST k", ":1"),
		row("EXPIRE k 100 GT", ":0"),
		row("EXPIRE k 20", ":1"),
		row("EXPIRE k", "-ERR wrong number of arguments for 'expire' command"),
		row("TTL k", ":20"),
		// Milliseconds and absolute times.
		row("PEXPIRE k 5000", ":1"),
		row("TTL k", ":5"),
		row("PTTL k", `~^:(4\d\d\d|5000)$`),
		row(fmt.Sprintf("EXPIREAT k %d", time.Now().Unix()+100), ":1"),
		row("TTL k", `~^:(99|100)$`),
		row(fmt.Sprintf("PEXPIREAT k %d", time.Now().UnixMilli()+7000), ":1"),
		row("TTL k", `~^:(6|7)$`),
		// A time in the past deletes the key.
		row("EXPIRE k -1", ":1"),
		row("EXISTS k", ":0"),
		row("AI.TENSORSET k INT8 1", "+OK"),
		row("EXPIREAT k 1", ":1"),
		row("EXISTS k", ":0"),
		row("AI.TENSORSET k INT8 1", "+OK"),
		row("PEXPIRE k 0", ":1"),
		row("EXISTS k", ":0"),
	)
	// A model deleted by an expiry in the past is released.
	m := h.putModel("m")
	h.run(row("EXPIRE m 0", ":1"), row("TYPE m", "+none"))
	if m.released != 1 {
		t.Errorf("model released %d times, want 1", m.released)
	}
	// A key set to expire goes away on its own; poll, do not sleep blind.
	h.run(row("AI.TENSORSET e INT8 1", "+OK"), row("PEXPIRE e 20", ":1"))
	deadline := time.Now().Add(5 * time.Second)
	for render(h.do("EXISTS e")) != ":0" {
		if time.Now().After(deadline) {
			t.Fatal("a key with a 20 ms TTL still exists after 5 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	h.run(row("TTL e", ":-2"))
	// The ticker sweeps it and counts it.
	h.run(row("AI.TENSORSET e2 INT8 1", "+OK"), row("PEXPIRE e2 1", ":1"))
	for time.Now().Before(deadline) && h.s.Stats().ExpiredKeys.Load() == 0 {
		h.s.Tick()
		time.Sleep(2 * time.Millisecond)
	}
	if n := h.s.Stats().ExpiredKeys.Load(); n < 1 {
		t.Errorf("expired_keys = %d after a sweep", n)
	}
}

// decode parses one RESP reply into Go values: string (simple, bulk,
// error with its '-'), int64, nil, []any (arrays, sets, maps flattened).
func decode(t *testing.T, b []byte) any {
	t.Helper()
	v, rest, err := decode1(b)
	if err != nil || len(rest) != 0 {
		t.Fatalf("bad reply %q: %v", b, err)
	}
	return v
}

func decode1(b []byte) (any, []byte, error) {
	i := strings.Index(string(b), "\r\n")
	if i < 1 {
		return nil, nil, fmt.Errorf("no line")
	}
	kind, line, rest := b[0], string(b[1:i]), b[i+2:]
	switch kind {
	case '+':
		return line, rest, nil
	case '-':
		return "-" + line, rest, nil
	case ':':
		n, err := strconv.ParseInt(line, 10, 64)
		return n, rest, err
	case '_':
		return nil, rest, nil
	case '$':
		n, err := strconv.Atoi(line)
		if err != nil || n < 0 {
			return nil, rest, err
		}
		return string(rest[:n]), rest[n+2:], nil
	case '*', '~', '%':
		n, err := strconv.Atoi(line)
		if err != nil || n < 0 {
			return nil, rest, err
		}
		if kind == '%' {
			n *= 2
		}
		out := make([]any, n)
		for j := range out {
			if out[j], rest, err = decode1(rest); err != nil {
				return nil, nil, err
			}
		}
		return out, rest, nil
	}
	return nil, nil, fmt.Errorf("type %q", kind)
}

// SCAN's cursor visits every key exactly once, whatever COUNT.
func TestScanCommand(t *testing.T) {
	h := newHarness(t)
	const n = 500
	for i := 0; i < n; i++ {
		h.run(row(fmt.Sprintf("AI.TENSORSET key:%d INT8 1", i), "+OK"))
	}
	h.putModel("model")
	for _, count := range []string{"", " COUNT 1", " COUNT 7", " COUNT 1000"} {
		seen := map[string]int{}
		cursor, calls := "0", 0
		for {
			reply := decode(h.t, h.do("SCAN "+cursor+count)).([]any)
			calls++
			for _, k := range reply[1].([]any) {
				seen[k.(string)]++
			}
			cursor = reply[0].(string)
			if cursor == "0" {
				break
			}
			if calls > 2*n {
				t.Fatalf("SCAN%s does not end", count)
			}
		}
		if len(seen) != n+1 {
			t.Errorf("SCAN%s: %d keys, want %d", count, len(seen), n+1)
		}
		for k, times := range seen {
			if times != 1 {
				t.Errorf("SCAN%s returned %s %d times", count, k, times)
			}
		}
		if count == "" && calls < n/10 {
			t.Errorf("SCAN without COUNT took %d calls: COUNT defaults to 10", calls)
		}
	}
	// MATCH and TYPE filter; a large COUNT returns everything at once.
	h.run(
		row("SCAN 0 MATCH key:1?? COUNT 100000", "~^\\[\"0\" \\[(\"key:1\\d\\d\" ?){100}\\]\\]$"),
		row("SCAN 0 TYPE AI__MODEL COUNT 100000", `["0" ["model"]]`),
		row("SCAN 0 TYPE ai__model MATCH mod* COUNT 100000", `["0" ["model"]]`),
		row("SCAN 0 TYPE AI_TENSOR MATCH mod* COUNT 100000", `["0" []]`),
		row("SCAN 0 MATCH nomatch COUNT 100000", `["0" []]`),
		row("SCAN x", "-ERR invalid cursor"),
		row("SCAN 18446744073709551616", "-ERR invalid cursor"),
		row("SCAN 0 COUNT 0", "-ERR syntax error"),
		row("SCAN 0 COUNT -1", "-ERR syntax error"),
		row("SCAN 0 COUNT x", "-ERR value is not an integer or out of range"),
		row("SCAN 0 MATCH", "-ERR syntax error"),
		row("SCAN 0 FOO bar", "-ERR syntax error"),
		row("SCAN", "-ERR wrong number of arguments for 'scan' command"),
	)
}

// KEYS patterns as Redis's stringmatchlen reads them; every expected list
// was checked against redis-server 7.0 (KEYS returns it sorted here).
func TestKeysGlob(t *testing.T) {
	h := newHarness(t)
	for _, k := range []string{"hello", "hallo", "hxllo", "hllo", "heeeello", "a", "b", "c", "x", "a*", "a?", "[x]", `a\`, "]", "-", "^", "ab"} {
		h.run(row(`AI.TENSORSET "`+strings.ReplaceAll(k, `\`, `\\`)+`" INT8 1`, "+OK"))
	}
	h.run(
		row("KEYS h?llo", `["hallo" "hello" "hxllo"]`),
		row("KEYS h*llo", `["hallo" "heeeello" "hello" "hllo" "hxllo"]`),
		row("KEYS h[ae]llo", `["hallo" "hello"]`),
		row("KEYS h[^e]llo", `["hallo" "hxllo"]`),
		row("KEYS h[a-b]llo", `["hallo"]`),
		row("KEYS [a-c]", `["a" "b" "c"]`),
		row("KEYS [c-a]", `["a" "b" "c"]`),
		row("KEYS [^x]", `["-" "]" "^" "a" "b" "c"]`),
		row(`KEYS "a\\*"`, `["a*"]`),
		row(`KEYS "a\\?"`, `["a?"]`),
		row(`KEYS "\\[x]"`, `["[x]"]`),
		row("KEYS [", `[]`),
		row("KEYS [a", `["a"]`),
		row("KEYS a[", `[]`),
		row("KEYS *[", `[]`),
		row(`KEYS "a\\"`, `["a\\"]`),
		row(`KEYS "a\\\\"`, `["a\\"]`),
		row("KEYS []]", `[]`),
		row(`KEYS "[\\]]"`, `["]"]`),
		row("KEYS [a-]", `["]" "^" "a"]`),
		row("KEYS [-a]", `["-" "a"]`),
		row("KEYS [^]", `["-" "]" "^" "a" "b" "c" "x"]`),
		row("KEYS []", `[]`),
		row(`KEYS "[\\-]"`, `["-"]`),
		row("KEYS **a", `["a"]`),
		row("KEYS ?", `["-" "]" "^" "a" "b" "c" "x"]`),
		row("KEYS [!a]", `["a"]`),
		row("KEYS [x-]", `["]" "^" "a" "b" "c" "x"]`),
		row("KEYS a?", `["a*" "a?" "a\\" "ab"]`),
		row("KEYS nomatch", `[]`),
		row("KEYS *", `["-" "[x]" "]" "^" "a" "a*" "a?" "a\\" "ab" "b" "c" "hallo" "heeeello" "hello" "hllo" "hxllo" "x"]`),
		row("KEYS", "-ERR wrong number of arguments for 'keys' command"),
	)
}

// globMatchRecursive is globMatch as it was, the way stringmatchlen once
// matched a star (every split tried, exponential in the stars): the
// reference TestGlobMatchAgrees compares the iterative one with.
func globMatchRecursive(p, s []byte) bool {
	for len(p) > 0 {
		if p[0] == '*' {
			for len(p) > 1 && p[1] == '*' {
				p = p[1:]
			}
			if len(p) == 1 {
				return true
			}
			for i := 0; i <= len(s); i++ {
				if globMatchRecursive(p[1:], s[i:]) {
					return true
				}
			}
			return false
		}
		if len(s) == 0 {
			return false
		}
		n, ok := globOne(p, s[0])
		if !ok {
			return false
		}
		p, s = p[n:], s[1:]
	}
	return len(s) == 0
}

// The iterative glob agrees with the recursive one on every pattern and
// key of a small alphabet that has each element (stars, ?, classes,
// ranges, negation, escapes, unterminated classes).
func TestGlobMatchAgrees(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const pat, str = `ab*?[]^-\`, `ab-]\^`
	for n := 0; n < 200000; n++ {
		p := make([]byte, rng.IntN(9))
		for i := range p {
			p[i] = pat[rng.IntN(len(pat))]
		}
		s := make([]byte, rng.IntN(9))
		for i := range s {
			s[i] = str[rng.IntN(len(str))]
		}
		if got, want := globMatch(p, s), globMatchRecursive(p, s); got != want {
			t.Fatalf("globMatch(%q, %q) = %v, want %v", p, s, got, want)
		}
	}
}

// A pattern of many stars over a long key, which the recursive match took
// hours over (CVE-2022-36021 in Redis), is answered: KEYS and SCAN MATCH
// no longer give a client a way to hold a core for as long as it likes.
func TestGlobManyStars(t *testing.T) {
	key := []byte(strings.Repeat("a", 300))
	pattern := []byte(strings.Repeat("*a", 20) + "b")
	done := make(chan bool)
	go func() { done <- globMatch(pattern, key) }()
	select {
	case got := <-done:
		if got {
			t.Fatal("matched a key without a b")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no answer in 10 s: the match is exponential again")
	}
	if !globMatch(pattern[:len(pattern)-1], key) {
		t.Fatal("*a repeated does not match a run of a")
	}
}

// EXPIRE's NX, XX, GT and LT, and PERSIST, decide on the TTL and change it
// in one step, as Redis does: clients run side by side under the read side
// of the transaction lock, and the TTL was read apart from the change, so
// two EXPIRE k n NX both answered 1, and of EXPIRE k 300 GT and EXPIRE k
// 200 GT against a TTL of 100, the smaller could land last.
func TestExpireConditionsAreAtomic(t *testing.T) {
	h := newHarness(t)
	s := h.s
	const clients = 4
	cs := make([]*Client, clients)
	for i := range cs {
		cs[i] = s.NewClient(fmt.Sprintf("127.0.0.1:%d", 50100+i), "127.0.0.1:6379", nil)
	}
	do := func(c *Client, line string) string {
		args := strings.Fields(line)
		argv := make([][]byte, len(args))
		for i, a := range args {
			argv[i] = []byte(a)
		}
		s.Dispatch(c, argv, nil)
		s.CommitClient(c)
		out := render(c.W.Bytes())
		c.W.Reset()
		return out
	}
	race := func(setup string, lines func(i int) string) []string {
		do(cs[0], "DEL k")
		do(cs[0], "AI.TENSORSET k INT8 1")
		if setup != "" {
			do(cs[0], setup)
		}
		got := make([]string, clients)
		var start, wg sync.WaitGroup
		start.Add(1)
		for i, c := range cs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				start.Wait()
				got[i] = do(c, lines(i))
			}()
		}
		start.Done()
		wg.Wait()
		return got
	}
	ones := func(got []string) int {
		n := 0
		for _, g := range got {
			if g == ":1" {
				n++
			}
		}
		return n
	}
	for round := 0; round < 300; round++ {
		if got := race("", func(int) string { return "EXPIRE k 1000 NX" }); ones(got) != 1 {
			t.Fatalf("round %d: EXPIRE NX side by side answered %v, want one :1", round, got)
		}
		if got := race("EXPIRE k 1000", func(int) string { return "PERSIST k" }); ones(got) != 1 {
			t.Fatalf("round %d: PERSIST side by side answered %v, want one :1", round, got)
		}
		// Each sets a greater TTL than the last: the greatest one stays.
		race("EXPIRE k 100", func(i int) string { return fmt.Sprintf("EXPIRE k %d GT", 1000+100*i) })
		if ttl := do(cs[0], "TTL k"); ttl != fmt.Sprintf(":%d", 1000+100*(clients-1)) {
			t.Fatalf("round %d: after EXPIRE GT side by side TTL is %s, want the greatest", round, ttl)
		}
	}
}
