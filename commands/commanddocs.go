package commands

import (
	"slices"
	"strings"
	"unicode"
)

// docArg is one argument of a command as COMMAND DOCS describes it,
// parsed from the Spec's Syntax (or a Sub's Usage), the one place a
// command's syntax is written. redis-cli builds its `help` lines and the
// hints it shows while a command is typed from these (client review: with
// none sent, `help expire` printed "EXPIRE " and nothing after it).
type docArg struct {
	name, typ string // typ: Redis's argument types (string, key, pure-token, oneof, block)
	token     string // the keyword before the value, or the pure token itself
	optional  bool
	multiple  bool
	// multipleToken: the keyword repeats with the value (SORT's GET).
	multipleToken bool
	args          []docArg // of a oneof or a block
}

// syntaxArgs parses a syntax line in Redis's notation: words, [optional]
// groups, a | b alternatives, "..." after a repeatable item; <name> is a
// name (the subcommands' usages write them so), an upper-case word a
// keyword. What it cannot read ends the list: the syntax stays the
// README's, and a doc that says less is no error.
func syntaxArgs(s string) []docArg {
	p := &syntaxParser{toks: syntaxTokens(s)}
	return p.seq()
}

// syntaxTokens splits a syntax line into words and the marks [ ] |. A |
// inside a word ("ON|OFF", "LIB-NAME|LIB-VER") binds tighter than one
// between spaces, and stays in the word (wordArg).
func syntaxTokens(s string) []string {
	var toks []string
	for _, f := range strings.Fields(s) {
		for len(f) > 0 && (f[0] == '[' || f[0] == '(') {
			toks = append(toks, f[:1])
			f = f[1:]
		}
		var closing []string
		for len(f) > 0 && (f[len(f)-1] == ']' || f[len(f)-1] == ')') {
			closing = append([]string{f[len(f)-1:]}, closing...)
			f = f[:len(f)-1]
		}
		if f != "" {
			toks = append(toks, f)
		}
		toks = append(toks, closing...)
	}
	return toks
}

type syntaxParser struct {
	toks []string
	i    int
}

func (p *syntaxParser) peek() string {
	if p.i < len(p.toks) {
		return p.toks[p.i]
	}
	return ""
}

// seq reads items until a ] or the end: a | between them makes the
// sequence a oneof of what is on either side.
func (p *syntaxParser) seq() []docArg {
	var alts [][]docArg
	var cur []docArg
	for {
		switch t := p.peek(); t {
		case "", "]", ")":
			if alts == nil {
				return cur
			}
			alts = append(alts, cur)
			one := docArg{name: "choice", typ: "oneof"}
			for _, a := range alts {
				one.args = append(one.args, group(a))
			}
			return []docArg{one}
		case "|":
			p.i++
			alts = append(alts, cur)
			cur = nil
		case "(":
			// A group that is not optional: "(MODULE name | PATTERN p)".
			p.i++
			inner := p.seq()
			if p.peek() == ")" {
				p.i++
			}
			cur = append(cur, group(inner))
		case "[":
			p.i++
			inner := p.seq()
			if p.peek() == "]" {
				p.i++
			}
			// "key [key ...]" is key, repeated; "option value [option
			// value ...]" the pair, repeated.
			if k := len(inner); k > 0 && inner[k-1].multiple && len(cur) >= k && sameNames(cur[len(cur)-k:], inner) {
				if k == 1 {
					cur[len(cur)-1].multiple = true
				} else {
					g := group(slices.Clone(cur[len(cur)-k:]))
					g.multiple, g.multipleToken = true, g.token != ""
					cur = append(cur[:len(cur)-k], g)
				}
				continue
			}
			g := group(inner)
			g.optional = true
			cur = append(cur, g)
		case "...":
			p.i++
			if len(cur) > 0 {
				cur[len(cur)-1].multiple = true
			}
		default:
			p.i++
			cur = append(cur, wordArg(t))
		}
	}
}

// sameNames reports whether a and b name the same arguments in order.
func sameNames(a, b []docArg) bool {
	return slices.EqualFunc(a, b, func(x, y docArg) bool { return x.name == y.name && x.typ == y.typ })
}

// group is the one argument a sequence of them makes: itself, a value
// behind its keyword ("MATCH pattern"), or a block.
func group(args []docArg) docArg {
	switch {
	case len(args) == 1:
		return args[0]
	case len(args) == 2 && args[0].typ == "pure-token" && args[1].typ != "pure-token" && args[1].args == nil && args[1].token == "":
		a := args[1]
		a.token = args[0].token
		return a
	}
	names := make([]string, len(args))
	for i, a := range args {
		names[i] = a.name
	}
	return docArg{name: strings.Join(names, "-"), typ: "block", args: args}
}

// wordArg is one word of a syntax line: a keyword (upper case) or a named
// value.
func wordArg(w string) docArg {
	if strings.HasPrefix(w, "|") { // AI.DAGEXECUTE's |>
		return docArg{name: w, typ: "pure-token", token: w}
	}
	if parts := strings.Split(w, "|"); len(parts) > 1 && parts[0] != "" {
		one := docArg{name: "choice", typ: "oneof"}
		for _, p := range parts {
			one.args = append(one.args, wordArg(p))
		}
		return one
	}
	w = strings.TrimSuffix(strings.TrimPrefix(w, "<"), ">")
	if w == strings.ToUpper(w) && strings.ContainsFunc(w, unicode.IsLetter) {
		return docArg{name: strings.ToLower(w), typ: "pure-token", token: w}
	}
	if w == "key" || w == "newkey" {
		return docArg{name: w, typ: "key"}
	}
	return docArg{name: w, typ: "string"}
}

// writeDocArgs writes args as COMMAND DOCS's "arguments" array of maps.
func writeDocArgs(w *Writer, args []docArg) {
	w.Array(len(args))
	for _, a := range args {
		n := 2
		if a.token != "" {
			n++
		}
		if a.optional || a.multiple {
			n++
		}
		if a.args != nil {
			n++
		}
		w.Map(n)
		w.BulkString("name")
		w.BulkString(a.name)
		w.BulkString("type")
		w.BulkString(a.typ)
		if a.token != "" {
			w.BulkString("token")
			w.BulkString(a.token)
		}
		if a.optional || a.multiple {
			var flags []string
			if a.optional {
				flags = append(flags, "optional")
			}
			if a.multiple {
				flags = append(flags, "multiple")
			}
			if a.multipleToken {
				flags = append(flags, "multiple_token")
			}
			w.BulkString("flags")
			w.Set(len(flags))
			for _, f := range flags {
				w.Simple(f)
			}
		}
		if a.args != nil {
			w.BulkString("arguments")
			writeDocArgs(w, a.args)
		}
	}
}

// docGroup is the group COMMAND DOCS gives s: Redis's "generic" for the
// keyspace commands Redis files there (DEL, EXPIRE, SCAN), so that
// redis-cli's `help @generic` finds them; the table's own name otherwise.
func docGroup(s *Spec) string {
	if s.Group == "keyspace" {
		return "generic"
	}
	return s.Group
}

// writeCommandDoc writes one command's COMMAND DOCS map: its summary, group,
// arguments from its Syntax, and its subcommands from its Subs, each with
// the arguments of its usage after the subcommand's name. Usages that
// share a name (CLIENT KILL's two forms) are one subcommand whose
// arguments are one of them.
func writeCommandDoc(w *Writer, s *Spec) {
	args := syntaxArgs(s.Syntax)
	type sub struct {
		name, doc string
		forms     [][]docArg
	}
	var subs []*sub
	for _, u := range s.Subs {
		if strings.HasPrefix(u.Usage, "(") {
			continue // "(no subcommand)": the command itself, not one of them
		}
		word, rest, _ := strings.Cut(u.Usage, " ")
		name := s.Name + "|" + strings.ToLower(word)
		if n := len(subs); n > 0 && subs[n-1].name == name {
			subs[n-1].forms = append(subs[n-1].forms, syntaxArgs(rest))
			continue
		}
		subs = append(subs, &sub{name: name, doc: u.Doc, forms: [][]docArg{syntaxArgs(rest)}})
	}
	writeDoc(w, s.Summary, docGroup(s), args, len(subs) > 0)
	if len(subs) == 0 {
		return
	}
	w.BulkString("subcommands")
	w.Map(len(subs))
	for _, sb := range subs {
		w.BulkString(sb.name)
		args := sb.forms[0]
		if len(sb.forms) > 1 {
			one := docArg{name: "form", typ: "oneof"}
			for _, f := range sb.forms {
				one.args = append(one.args, group(f))
			}
			args = []docArg{one}
		}
		writeDoc(w, sb.doc, docGroup(s), args, false)
	}
}

// writeDoc writes a doc map's fields: summary, since, group, the
// arguments if any, and room for a subcommands field to follow when
// subs is set.
func writeDoc(w *Writer, summary, group string, args []docArg, subs bool) {
	n := 3
	if len(args) > 0 {
		n++
	}
	if subs {
		n++
	}
	w.Map(n)
	w.BulkString("summary")
	w.BulkString(summary)
	w.BulkString("since")
	w.BulkString("1.0.0")
	w.BulkString("group")
	w.BulkString(group)
	if len(args) > 0 {
		w.BulkString("arguments")
		writeDocArgs(w, args)
	}
}
