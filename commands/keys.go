package commands

import (
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
		keys(&Spec{Name: "persist", Arity: 2, Flags: Write | Fast, FirstKey: 1, LastKey: 1, Step: 1,
			Summary: "Removes a key's time to live.", Syntax: "key", Parse: parsePersist}),
		keys(&Spec{Name: "dbsize", Arity: 1, Flags: Readonly | Fast, Summary: "Returns the number of keys.", Parse: parseDBSize}),
		keys(&Spec{Name: "flushall", Arity: -1, Flags: Write, Summary: "Removes all keys.", Syntax: "[ASYNC | SYNC]", Parse: parseFlush}),
		keys(&Spec{Name: "flushdb", Arity: -1, Flags: Write, Summary: "Removes all keys of the database.", Syntax: "[ASYNC | SYNC]", Parse: parseFlush}),
	)
}

func keyStrings(v [][]byte) []string {
	out := make([]string, len(v))
	for i, b := range v {
		out[i] = string(b)
	}
	return out
}

func parseDel(a Args) (Runner, error) {
	keys := keyStrings(a.Rest())
	return RunFunc(func(x *Ctx) error {
		removed, err := x.Keys.Delete(x.allowChange(), keys...)
		if err != nil {
			return err
		}
		x.Release(removed)
		x.W.Int(int64(len(removed)))
		return nil
	}), nil
}

func parseExists(a Args) (Runner, error) {
	keys := keyStrings(a.Rest())
	return RunFunc(func(x *Ctx) error {
		n := 0
		for _, k := range keys {
			if _, ok := x.Keys.Get(k); ok {
				n++
			}
		}
		x.W.Int(int64(n))
		return nil
	}), nil
}

func parseType(a Args) (Runner, error) {
	key := a.NextString()
	return RunFunc(func(x *Ctx) error {
		if v, ok := x.Keys.Get(key); ok {
			x.W.Simple(v.TypeName())
		} else {
			x.W.Simple("none")
		}
		return nil
	}), nil
}

func parseKeys(a Args) (Runner, error) {
	pattern := a.Keep(1)
	return RunFunc(func(x *Ctx) error {
		x.W.StringList(x.Keys.SortedKeys(func(it modelstore.Item) bool { return globMatch(pattern, []byte(it.Key)) }))
		return nil
	}), nil
}

func parseScan(a Args) (Runner, error) {
	cursor, err := strconv.ParseUint(a.NextString(), 10, 64)
	if err != nil {
		return nil, Reply("ERR invalid cursor")
	}
	count := int64(10)
	var pattern []byte
	typ := ""
	for a.More() {
		switch {
		case a.Match("MATCH") && a.More():
			pattern = a.Keep(a.Pos())
			a.Next()
		case a.Match("COUNT") && a.More():
			n, ok := parseInt(a.Next())
			if !ok {
				return nil, errNotInteger
			}
			if n < 1 {
				return nil, errSyntax
			}
			count = n
		case a.Match("TYPE") && a.More():
			typ = a.NextString()
		default:
			return nil, errSyntax
		}
	}
	if count > 1<<20 {
		count = 1 << 20
	}
	return RunFunc(func(x *Ctx) error {
		keys, next := x.Keys.Scan(cursor, int(count), func(it modelstore.Item) bool {
			return (pattern == nil || globMatch(pattern, []byte(it.Key))) &&
				(typ == "" || strings.EqualFold(typ, it.Value.TypeName()))
		})
		x.W.Array(2)
		x.W.BulkString(strconv.FormatUint(next, 10))
		x.W.StringList(keys)
		return nil
	}), nil
}

func parseRename(a Args) (Runner, error) {
	src, dst := a.NextString(), a.NextString()
	return RunFunc(func(x *Ctx) error {
		replaced, err := x.Keys.Rename(x.allowChange(), src, dst)
		if err != nil {
			return err
		}
		if replaced != nil {
			x.Release([]modelstore.Value{replaced})
		}
		x.W.OK()
		return nil
	}), nil
}

// parseExpire builds EXPIRE, PEXPIRE, EXPIREAT and PEXPIREAT: unit is the
// number of milliseconds in one unit of the argument.
func parseExpire(unit int64, absolute bool) func(a Args) (Runner, error) {
	return func(a Args) (Runner, error) {
		name := strings.ToLower(a.Name())
		key, when := a.NextString(), a.Next()
		var nx, xx, gt, lt bool
		for a.More() {
			switch {
			case a.Match("NX"):
				nx = true
			case a.Match("XX"):
				xx = true
			case a.Match("GT"):
				gt = true
			case a.Match("LT"):
				lt = true
			default:
				return nil, errorf("ERR Unsupported option %s", a.Peek())
			}
		}
		if nx && (xx || gt || lt) {
			return nil, Reply("ERR NX and XX, GT or LT options at the same time are not compatible")
		}
		if gt && lt {
			return nil, Reply("ERR GT and LT options at the same time are not compatible")
		}
		// As Redis: the options are checked before the number.
		n, ok := parseInt(when)
		if !ok {
			return nil, errNotInteger
		}
		if n > (1<<62)/unit || n < -(1<<62)/unit {
			return nil, errorf("ERR invalid expire time in '%s' command", name)
		}
		return RunFunc(func(x *Ctx) error {
			at := n * unit
			if !absolute {
				at += x.Keys.Now()
			}
			if at <= 0 {
				at = 1 // in the past: deletes the key
			}
			cur, ok := x.Keys.Expiry(key)
			if !ok {
				x.W.Int(0)
				return nil
			}
			curTTL := cur
			if cur == 0 {
				curTTL = 1<<63 - 1 // no TTL counts as infinite for GT/LT
			}
			if (nx && cur != 0) || (xx && cur == 0) || (gt && at <= curTTL) || (lt && at >= curTTL) {
				x.W.Int(0)
				return nil
			}
			ok, removed, err := x.Keys.SetExpire(x.allowChange(), key, at)
			if err != nil {
				return err
			}
			if removed != nil {
				x.Release([]modelstore.Value{removed})
			}
			x.W.Int(b2i(ok))
			return nil
		}), nil
	}
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

func parseTTL(unit int64) func(a Args) (Runner, error) {
	return func(a Args) (Runner, error) {
		key := a.NextString()
		return RunFunc(func(x *Ctx) error {
			at, ok := x.Keys.Expiry(key)
			switch {
			case !ok:
				x.W.Int(-2)
			case at == 0:
				x.W.Int(-1)
			default:
				ms := at - x.Keys.Now()
				if ms < 0 {
					ms = 0
				}
				x.W.Int((ms + unit/2) / unit)
			}
			return nil
		}), nil
	}
}

func parsePersist(a Args) (Runner, error) {
	key := a.NextString()
	return RunFunc(func(x *Ctx) error {
		at, ok := x.Keys.Expiry(key)
		if !ok || at == 0 {
			x.W.Int(0)
			return nil
		}
		ok, _, err := x.Keys.SetExpire(x.allow(), key, 0)
		if err != nil {
			return err
		}
		x.W.Int(b2i(ok))
		return nil
	}), nil
}

func parseDBSize(a Args) (Runner, error) {
	return RunFunc(func(x *Ctx) error {
		n, _ := x.Keys.Len()
		x.W.Int(int64(n))
		return nil
	}), nil
}

func parseFlush(a Args) (Runner, error) {
	if a.More() && !a.Match("ASYNC") && !a.Match("SYNC") {
		return nil, errSyntax
	}
	if a.More() {
		return nil, errSyntax
	}
	return RunFunc(func(x *Ctx) error {
		removed, err := x.Keys.Flush(x.allowChange())
		if err != nil {
			return err
		}
		x.Release(removed)
		x.W.OK()
		return nil
	}), nil
}

// globMatch is Redis's stringmatchlen: * ? [abc] [^a-z] and \ escapes.
func globMatch(p, s []byte) bool {
	for len(p) > 0 {
		switch p[0] {
		case '*':
			for len(p) > 1 && p[1] == '*' {
				p = p[1:]
			}
			if len(p) == 1 {
				return true
			}
			for i := 0; i <= len(s); i++ {
				if globMatch(p[1:], s[i:]) {
					return true
				}
			}
			return false
		case '?':
			if len(s) == 0 {
				return false
			}
			s = s[1:]
		case '[':
			if len(s) == 0 {
				return false
			}
			p = p[1:]
			not := len(p) > 0 && p[0] == '^'
			if not {
				p = p[1:]
			}
			match := false
			for len(p) > 0 && p[0] != ']' {
				switch {
				case p[0] == '\\' && len(p) >= 2:
					p = p[1:]
					match = match || p[0] == s[0]
				case len(p) >= 3 && p[1] == '-':
					lo, hi := p[0], p[2]
					if lo > hi {
						lo, hi = hi, lo
					}
					match = match || (s[0] >= lo && s[0] <= hi)
					p = p[2:]
				default:
					match = match || p[0] == s[0]
				}
				p = p[1:]
			}
			if len(p) == 0 { // unterminated class: Redis treats the end as ']'
				p = []byte{']'}
			}
			if match == not {
				return false
			}
			s = s[1:]
		case '\\':
			if len(p) >= 2 {
				p = p[1:]
			}
			fallthrough
		default:
			if len(s) == 0 || p[0] != s[0] {
				return false
			}
			s = s[1:]
		}
		p = p[1:]
	}
	return len(s) == 0
}
