package commands

import (
	"strings"
	"testing"
)

// render writes args as redis-cli prints them (a sketch of its
// cliAddArgument), to check the parse against the syntax it came from.
func renderDocArgs(args []docArg, sep string) string {
	var parts []string
	for _, a := range args {
		var s string
		switch a.typ {
		case "pure-token":
			s = a.token
		case "oneof":
			s = renderDocArgs(a.args, "|")
		case "block":
			s = renderDocArgs(a.args, " ")
		default:
			s = a.name
			if a.token != "" {
				s = a.token + " " + s
			}
		}
		if a.multiple {
			rep := a.name
			if a.multipleToken || a.typ == "block" || a.typ == "pure-token" {
				rep = s
			}
			s += " [" + rep + " ...]"
		}
		if a.optional {
			s = "[" + s + "]"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, sep)
}

func TestSyntaxArgs(t *testing.T) {
	for _, c := range []struct{ syntax, want string }{
		{"key seconds [NX | XX | GT | LT]", "key seconds [NX|XX|GT|LT]"},
		{"key [key ...]", "key [key ...]"},
		{"cursor [MATCH pattern] [COUNT count] [TYPE type]", "cursor [MATCH pattern] [COUNT count] [TYPE type]"},
		{"<option> <value> [<option> <value> ...]", "option value [option value ...]"},
		{"[LOAD n key ...] |> op [|> op ...]", "[LOAD n key [key ...]] |> op [|> op ...]"},
		{"ON|OFF|SKIP", "ON|OFF|SKIP"},
		{"LIB-NAME|LIB-VER <value>", "LIB-NAME|LIB-VER value"},
		{"[protover [AUTH username password] [SETNAME clientname]]", "[protover [AUTH username password] [SETNAME clientname]]"},
		{"[FILTERBY (MODULE <module-name>|ACLCAT <category>|PATTERN <pattern>)]", "[FILTERBY MODULE module-name|ACLCAT category|PATTERN pattern]"},
	} {
		if got := renderDocArgs(syntaxArgs(c.syntax), " "); got != c.want {
			t.Errorf("%q: %q, want %q", c.syntax, got, c.want)
		}
	}
	// Every command's syntax, and every subcommand's usage, parses whole,
	// and no argument's name holds a mark of the notation.
	for name, s := range table {
		lines := []string{s.Syntax}
		for _, sub := range s.Subs {
			if strings.HasPrefix(sub.Usage, "(") {
				continue
			}
			_, rest, _ := strings.Cut(sub.Usage, " ")
			lines = append(lines, rest)
		}
		for _, l := range lines {
			p := &syntaxParser{toks: syntaxTokens(l)}
			p.seq()
			if p.i != len(p.toks) {
				t.Errorf("%s: the syntax %q parses only to %q", name, l, strings.Join(p.toks[:p.i], " "))
			}
			if r := renderDocArgs(syntaxArgs(l), " "); strings.ContainsAny(strings.ReplaceAll(r, "|>", ""), "()<>") {
				t.Errorf("%s: the syntax %q gives arguments %q", name, l, r)
			}
		}
	}
}
