package commands

import (
	"math"
	"strconv"
	"strings"

	"github.com/enclaveai/enclaveai/modelstore"
)

func init() {
	keys := func(s *Spec) *Spec { s.Group = "keyspace"; return s }
	register(
		keys(&Spec{Name: "del", Arity: -2, Flags: Write, FirstKey: 1, LastKey: -1, Step: 1,
			Summary: "Deletes one or more keys (tensors or models).", Syntax: "key [key ...]", Parse: parseDel}),
		keys(&Spec{Name: "unlink", Arity: -2, Flags: Write | Fast, FirstKey: 1, LastKey: -1, Step: 1,
			Summary: "Deletes one or more keys.", Syntax: "key [key ...]", Parse: parseDel}),
		keys(&Spec{Name: "exists", Arity: -2, Flags: Readonly | Fast, FirstKey: 1, LastKey: -1, Step: 1,
			Summary: "Counts how many of the given keys exist.", Syntax: "key [key ...]", Parse: parseExists}),
		keys(&Spec{Name: "touch", Arity: -2, Flags: Readonly | Fast, FirstKey: 1, LastKey: -1, Step: 1,
			Summary: "Counts how many of the given keys exist, as EXISTS (no access clock is kept to update).", Syntax: "key [key ...]", Parse: parseExists}),
		keys(&Spec{Name: "object", Arity: -2, Flags: Readonly, Keys: subcommandKey,
			Summary: "OBJECT ENCODING | FREQ | REFCOUNT key: a key's internals, as Redis gives a module's value.",
			Parse:   parseObject, Subs: []Sub{
				{"ENCODING <key>", "raw: tensors and models are a module's values."},
				{"FREQ <key>", "Refused, as under Redis's noeviction: no access frequency is kept."},
				{"REFCOUNT <key>", "1."},
			}}),
		keys(&Spec{Name: "type", Arity: 2, Flags: Readonly | Fast, FirstKey: 1, LastKey: 1, Step: 1,
			Summary: "Returns the type of a key: AI_TENSOR, AI__MODEL or none.", Syntax: "key", Parse: parseType}),
		keys(&Spec{Name: "keys", Arity: 2, Flags: Readonly, Summary: "Returns all key names that match a pattern.",
			Syntax: "pattern", Parse: parseKeys}),
		keys(&Spec{Name: "scan", Arity: -2, Flags: Readonly,
			Summary: "Iterates over the key names.", Syntax: "cursor [MATCH pattern] [COUNT count] [TYPE type]", Parse: parseScan}),
		keys(&Spec{Name: "rename", Arity: 3, Flags: Write, FirstKey: 1, LastKey: 2, Step: 1,
			Summary: "Renames a key, replacing the destination.", Syntax: "key newkey", Parse: parseRename}),
		keys(&Spec{Name: "expire", Arity: -3, Flags: Write | Fast, FirstKey: 1, LastKey: 1, Step: 1,
			Summary: "Sets a key's time to live in seconds.", Syntax: "key seconds [NX | XX | GT | LT]", Parse: parseExpire(1000, false)}),
		keys(&Spec{Name: "pexpire", Arity: -3, Flags: Write | Fast, FirstKey: 1, LastKey: 1, Step: 1,
			Summary: "Sets a key's time to live in milliseconds.", Syntax: "key milliseconds [NX | XX | GT | LT]", Parse: parseExpire(1, false)}),
		keys(&Spec{Name: "expireat", Arity: -3, Flags: Write | Fast, FirstKey: 1, LastKey: 1, Step: 1,
			Summary: "Sets a key's expiry as a unix time in seconds.", Syntax: "key unix-time-seconds [NX | XX | GT | LT]", Parse: parseExpire(1000, true)}),
		keys(&Spec{Name: "pexpireat", Arity: -3, Flags: Write | Fast, FirstKey: 1, LastKey: 1, Step: 1,
			Summary: "Sets a key's expiry as a unix time in milliseconds.", Syntax: "key unix-time-milliseconds [NX | XX | GT | LT]", Parse: parseExpire(1, true)}),
		keys(&Spec{Name: "ttl", Arity: 2, Flags: Readonly | Fast, FirstKey: 1, LastKey: 1, Step: 1,
			Summary: "Returns a key's time to live in seconds.", Syntax: "key", Parse: parseTTL(1000)}),
		keys(&Spec{Name: "pttl", Arity: 2, Flags: Readonly | Fast, FirstKey: 1, LastKey: 1, Step: 1,
			Summary: "Returns a key's time to live in milliseconds.", Syntax: "key", Parse: parseTTL(1)}),
		keys(&Spec{Name: "expiretime", Arity: 2, Flags: Readonly | Fast, FirstKey: 1, LastKey: 1, Step: 1,
			Summary: "Returns a key's expiry as a unix time in seconds.", Syntax: "key", Parse: parseExpireTime(1000)}),
		keys(&Spec{Name: "pexpiretime", Arity: 2, Flags: Readonly | Fast, FirstKey: 1, LastKey: 1, Step: 1,
			Summary: "Returns a key's expiry as a unix time in milliseconds.", Syntax: "key", Parse: parseExpireTime(1)}),
		keys(&Spec{Name: "persist", Arity: 2, Flags: Write | Fast, FirstKey: 1, LastKey: 1, Step: 1,
			Summary: "Removes a key's time to live.", Syntax: "key", Parse: parsePersist}),
		keys(&Spec{Name: "dbsize", Arity: 1, Flags: Readonly | Fast, Summary: "Returns the number of keys.", Parse: parseDBSize}),
		keys(&Spec{Name: "flushall", Arity: -1, Flags: Write | NoTxLock, Summary: "Removes all keys.", Syntax: "[ASYNC | SYNC]", Parse: parseFlush}),
		keys(&Spec{Name: "flushdb", Arity: -1, Flags: Write | NoTxLock, Summary: "Removes all keys of the database.", Syntax: "[ASYNC | SYNC]", Parse: parseFlush}),
	)
}

func keyStrings(v [][]byte) []string {
	out := make([]string, len(v))
	for i, b := range v {
		out[i] = string(b)
	}
	return out
}

// delCmd is DEL / UNLINK key [key ...].
type delCmd struct{ keys []string }

func parseDel(a Args) (Runner, error) { return delCmd{keys: keyStrings(a.Rest())}, nil }

// Run implements Runner.
func (c delCmd) Run(x *Ctx) error {
	removed, err := x.Keys.Delete(x.allowChange(), c.keys...)
	if err != nil {
		return err
	}
	x.Release(removed)
	x.W.Int(int64(len(removed)))
	return nil
}

// existsCmd is EXISTS key [key ...].
type existsCmd struct{ keys []string }

func parseExists(a Args) (Runner, error) { return existsCmd{keys: keyStrings(a.Rest())}, nil }

// Run implements Runner. Expiry, not Get, tells whether a key exists: Get
// pins a tensor, whose buffer is then never recycled (tensorbuf.go).
func (c existsCmd) Run(x *Ctx) error {
	n := 0
	for _, k := range c.keys {
		if _, ok := x.Keys.Expiry(k); ok {
			n++
		}
	}
	x.W.Int(int64(n))
	return nil
}

// subcommandKey is the key of OBJECT sub key and MEMORY USAGE key.
func subcommandKey(argv [][]byte) []int {
	if len(argv) > 2 {
		return []int{2}
	}
	return nil
}

// objectCmd is OBJECT ENCODING | FREQ | REFCOUNT key.
type objectCmd struct{ sub, key string }

// parseObject reads OBJECT sub key: its own subcommands only (HELP is
// withHelp's).
func parseObject(a Args) (Runner, error) {
	sub := strings.ToUpper(a.NextString())
	switch sub {
	case "ENCODING", "FREQ", "REFCOUNT":
	default:
		return nil, unknownSub("object", a.V[1])
	}
	if a.Remaining() != 1 {
		return nil, subArityOf("object", sub)
	}
	return objectCmd{sub: sub, key: a.NextString()}, nil
}

// Run implements Runner.
func (c objectCmd) Run(x *Ctx) error {
	v, err := x.lookupOrNull(c.key)
	if v == nil {
		return err
	}
	switch c.sub {
	case "ENCODING":
		x.W.BulkString("raw")
	case "REFCOUNT":
		x.W.Int(1)
	default:
		return errNoLFU
	}
	return nil
}

// errNoLFU is Redis's OBJECT FREQ under a policy other than LFU.
const errNoLFU Reply = "ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust."

// typeCmd is TYPE key.
type typeCmd struct{ key string }

func parseType(a Args) (Runner, error) { return typeCmd{key: a.NextString()}, nil }

// Run implements Runner.
func (c typeCmd) Run(x *Ctx) error {
	if name, ok := x.Keys.TypeName(c.key); ok {
		x.W.Simple(name)
	} else {
		x.W.Simple("none")
	}
	return nil
}

// keysCmd is KEYS pattern.
type keysCmd struct{ pattern []byte }

func parseKeys(a Args) (Runner, error) { return keysCmd{pattern: a.Keep(1)}, nil }

// Run implements Runner.
func (c keysCmd) Run(x *Ctx) error {
	x.W.StringList(x.Keys.SortedKeys(func(it modelstore.Item) bool { return globMatch(c.pattern, []byte(it.Key)) }))
	return nil
}

// parseCursor reads a SCAN cursor as Redis 7.0 does (strtoul, no leading
// space): an optional sign, decimal digits up to 2^64-1, a negative one
// wrapping around (-1 is the largest, past every key); "" is 0.
func parseCursor(s string) (uint64, error) {
	if s == "" {
		return 0, nil
	}
	digits := strings.TrimLeft(s[:1], "+-") + s[1:]
	n, err := strconv.ParseUint(digits, 10, 64)
	if err != nil || digits == "" || digits[0] < '0' || digits[0] > '9' {
		return 0, Reply("ERR invalid cursor")
	}
	if s[0] == '-' {
		n = -n
	}
	return n, nil
}

// scanCmd is SCAN cursor [MATCH pattern] [COUNT count] [TYPE type].
type scanCmd struct {
	cursor  uint64
	count   int64
	pattern []byte // nil: every key
	typ     string // "": every type
}

func parseScan(a Args) (Runner, error) {
	cursor, err := parseCursor(a.NextString())
	if err != nil {
		return nil, err
	}
	c := scanCmd{cursor: cursor, count: 10}
	for a.More() {
		switch {
		case a.Match("MATCH") && a.More():
			c.pattern = a.Keep(a.Pos())
			a.Next()
		case a.Match("COUNT") && a.More():
			n, ok := parseInt(a.Next())
			if !ok {
				return nil, errNotInteger
			}
			if n < 1 {
				return nil, errSyntax
			}
			c.count = n
		case a.Match("TYPE") && a.More():
			c.typ = a.NextString()
		default:
			return nil, errSyntax
		}
	}
	c.count = min(c.count, 1<<20)
	return c, nil
}

// Run implements Runner.
func (c scanCmd) Run(x *Ctx) error {
	keys, next := x.Keys.Scan(c.cursor, int(c.count), func(it modelstore.Item) bool {
		return (c.pattern == nil || globMatch(c.pattern, []byte(it.Key))) &&
			(c.typ == "" || strings.EqualFold(c.typ, it.Value.TypeName()))
	})
	x.W.Array(2)
	x.W.BulkString(strconv.FormatUint(next, 10))
	x.W.StringList(keys)
	return nil
}

// renameCmd is RENAME key newkey.
type renameCmd struct{ src, dst string }

func parseRename(a Args) (Runner, error) {
	return renameCmd{src: a.NextString(), dst: a.NextString()}, nil
}

// Run implements Runner.
func (c renameCmd) Run(x *Ctx) error {
	replaced, err := x.Keys.Rename(x.allowChange(), c.src, c.dst)
	if err != nil {
		return err
	}
	if replaced != nil {
		x.Release([]modelstore.Value{replaced})
	}
	x.W.OK()
	return nil
}

// expireCmd is EXPIRE, PEXPIRE, EXPIREAT or PEXPIREAT key when [NX | XX |
// GT | LT]: when counts units of unit milliseconds, from now unless
// absolute.
type expireCmd struct {
	key            string
	when, unit     int64
	absolute       bool
	nx, xx, gt, lt bool
}

// parseExpire builds EXPIRE, PEXPIRE, EXPIREAT and PEXPIREAT: unit is the
// number of milliseconds in one unit of the argument.
func parseExpire(unit int64, absolute bool) func(a Args) (Runner, error) {
	return func(a Args) (Runner, error) {
		name := strings.ToLower(a.Name())
		c := expireCmd{key: a.NextString(), unit: unit, absolute: absolute}
		when := a.Next()
		for a.More() {
			switch {
			case a.Match("NX"):
				c.nx = true
			case a.Match("XX"):
				c.xx = true
			case a.Match("GT"):
				c.gt = true
			case a.Match("LT"):
				c.lt = true
			default:
				return nil, errorf("ERR Unsupported option %s", a.Peek())
			}
		}
		if c.nx && (c.xx || c.gt || c.lt) {
			return nil, Reply("ERR NX and XX, GT or LT options at the same time are not compatible")
		}
		if c.gt && c.lt {
			return nil, Reply("ERR GT and LT options at the same time are not compatible")
		}
		// As Redis: the options are checked before the number.
		n, ok := parseInt(when)
		if !ok {
			return nil, errNotInteger
		}
		// As Redis 7.0: refused only where the time in ms overflows,
		// from the unit here, from adding the clock in Run.
		if n > math.MaxInt64/unit || n < math.MinInt64/unit {
			return nil, errorf("ERR invalid expire time in '%s' command", name)
		}
		c.when = n
		return c, nil
	}
}

// invalid is Redis's refusal of a time that overflows, named after the
// command c is.
func (c expireCmd) invalid() error {
	name := "expire"
	if c.unit == 1 {
		name = "pexpire"
	}
	if c.absolute {
		name += "at"
	}
	return errorf("ERR invalid expire time in '%s' command", name)
}

// Run implements Runner.
func (c expireCmd) Run(x *Ctx) error {
	at := c.when * c.unit
	if !c.absolute {
		now := x.Keys.Now()
		if at > math.MaxInt64-now {
			return c.invalid()
		}
		at += now
	}
	if at <= 0 {
		at = 1 // in the past: deletes the key
	}
	// The condition is decided with the change, under the keyspace's lock
	// (SetExpireIf), after the owner's check: another user's key is
	// refused whatever the condition would answer (security review: NX,
	// GT and LT answered 0 where XX got NOPERM).
	var cond func(cur int64) bool
	if c.nx || c.xx || c.gt || c.lt {
		// As Redis, no TTL counts as infinite for GT and LT: GT never
		// sets one, LT always does (even the latest time there is).
		cond = func(cur int64) bool {
			return !((c.nx && cur != 0) || (c.xx && cur == 0) || (c.gt && (cur == 0 || at <= cur)) || (c.lt && cur != 0 && at >= cur))
		}
	}
	ok, removed, err := x.Keys.SetExpireIf(x.allowChange(), c.key, at, cond)
	if err != nil {
		return err
	}
	if removed != nil {
		x.Release([]modelstore.Value{removed})
	}
	x.W.Int(b2i(ok))
	return nil
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// ttlCmd is TTL or PTTL key, in units of unit milliseconds, or with abs
// EXPIRETIME or PEXPIRETIME key (Redis 7.0): the expiry itself, as a unix
// time.
type ttlCmd struct {
	key  string
	unit int64
	abs  bool
}

func parseTTL(unit int64) func(a Args) (Runner, error) {
	return func(a Args) (Runner, error) { return ttlCmd{key: a.NextString(), unit: unit}, nil }
}

func parseExpireTime(unit int64) func(a Args) (Runner, error) {
	return func(a Args) (Runner, error) { return ttlCmd{key: a.NextString(), unit: unit, abs: true}, nil }
}

// Run implements Runner.
func (c ttlCmd) Run(x *Ctx) error {
	at, ok := x.Keys.Expiry(c.key)
	switch {
	case !ok:
		x.W.Int(-2)
	case at == 0:
		x.W.Int(-1)
	case c.abs:
		x.W.Int((at + c.unit/2) / c.unit) // rounded, as Redis 7.0
	default:
		ms := max(at-x.Keys.Now(), 0)
		x.W.Int((ms + c.unit/2) / c.unit)
	}
	return nil
}

// persistCmd is PERSIST key.
type persistCmd struct{ key string }

func parsePersist(a Args) (Runner, error) { return persistCmd{key: a.NextString()}, nil }

// Run implements Runner.
func (c persistCmd) Run(x *Ctx) error {
	// Another user's key is refused whether or not it has a TTL (red-team
	// review: 0 without one, NOPERM with one, told its state), as EXPIRE's
	// conditions are; whether it has one is decided with the change
	// (SetExpireIf).
	ok, _, err := x.Keys.SetExpireIf(x.allowChange(), c.key, 0, hasTTL)
	if err != nil {
		return err
	}
	x.W.Int(b2i(ok))
	return nil
}

// hasTTL is PERSIST's condition: the key has a TTL to remove.
func hasTTL(cur int64) bool { return cur != 0 }

// dbsizeCmd is DBSIZE.
type dbsizeCmd struct{}

func parseDBSize(a Args) (Runner, error) { return dbsizeCmd{}, nil }

// Run implements Runner.
func (dbsizeCmd) Run(x *Ctx) error {
	n, _ := x.Keys.Len()
	x.W.Int(int64(n))
	return nil
}

// flushCmd is FLUSHALL / FLUSHDB [ASYNC | SYNC] (both flush at once).
type flushCmd struct{}

func parseFlush(a Args) (Runner, error) {
	if a.More() && !a.Match("ASYNC") && !a.Match("SYNC") {
		return nil, errSyntax
	}
	if a.More() {
		return nil, errSyntax
	}
	return flushCmd{}, nil
}

// Run implements Runner. Without the log, and with save rules, the empty
// keyspace is saved before the reply, as Redis's FLUSHALL saves when save
// points are set: a crash before the next save brought every key back
// from the last snapshot (durability review). A save under way, whose
// instant came before the flush, is abandoned for this one (saveOver), as
// Redis kills its saving child, inside EXEC too. A failed save is logged
// and shown by INFO, and the reply is still OK, as in Redis.
//
// It runs outside the transaction lock (NoTxLock), taking it only for the
// flush itself, so that its save holds up no EXEC; inside EXEC, under the
// lock's write side, it saves what the transaction has left at that point.
func (flushCmd) Run(x *Ctx) error {
	var removed []modelstore.Value
	err := x.Update(func() error {
		var err error
		removed, err = x.Keys.Flush(x.allowChange())
		return err
	})
	if err != nil {
		return err
	}
	x.Release(removed)
	if x.aof() == nil && x.saveRulesSet() {
		x.saveOver("FLUSHALL")
	}
	x.W.OK()
	return nil
}

// globMatch is Redis's stringmatchlen: * ? [abc] [^a-z] and \ escapes.
//
// It does not recurse on '*' as stringmatchlen first did: that tried
// every split for every star, so a pattern of a few stars over a long key
// (KEYS *a*a*a*a*a*a*a*ab on 300 bytes, CVE-2022-36021 in Redis) ran for
// hours, on as many cores as clients sent it. Every other element matches
// one byte, so on a mismatch it is enough to let the last star take one
// byte more and go on from there: what an earlier star could take, the
// last one can take as well. Time is at most len(p) * len(s) steps.
func globMatch(p, s []byte) bool {
	pi, si := 0, 0
	star, from := -1, 0 // the pattern after the last star, and where in s its match starts
	for {
		if pi < len(p) && p[pi] == '*' {
			for pi < len(p) && p[pi] == '*' {
				pi++
			}
			if pi == len(p) {
				return true
			}
			star, from = pi, si
			continue
		}
		if pi < len(p) && si < len(s) {
			if n, ok := globOne(p[pi:], s[si]); ok {
				pi += n
				si++
				continue
			}
		} else if pi == len(p) && si == len(s) {
			return true
		}
		if star < 0 || from == len(s) {
			return false
		}
		from++
		pi, si = star, from
	}
}

// globOne matches c against the pattern element p starts with (not a
// star): ok is whether it matches, n the element's length in p.
func globOne(p []byte, c byte) (n int, ok bool) {
	switch p[0] {
	case '?':
		return 1, true
	case '[':
		i := 1
		not := i < len(p) && p[i] == '^'
		if not {
			i++
		}
		match := false
		for i < len(p) && p[i] != ']' {
			switch {
			case p[i] == '\\' && i+1 < len(p):
				i++
				match = match || p[i] == c
			case i+2 < len(p) && p[i+1] == '-':
				lo, hi := p[i], p[i+2]
				if lo > hi {
					lo, hi = hi, lo
				}
				match = match || (c >= lo && c <= hi)
				i += 2
			default:
				match = match || p[i] == c
			}
			i++
		}
		if i < len(p) {
			i++ // the ']'; an unterminated class ends with the pattern, as in Redis
		}
		return i, match != not
	case '\\':
		if len(p) >= 2 {
			return 2, p[1] == c
		}
	}
	return 1, p[0] == c
}
