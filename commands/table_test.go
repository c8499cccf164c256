package commands

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// Every table entry is complete and consistent; the README's generated
// list (see readme.go) then names every command.
func TestCommandTable(t *testing.T) {
	readmeGroups := []string{"tensors", "models", "keyspace", "connection", "transactions", "cluster", "server"}
	md := CommandsMarkdown()
	for name, s := range Commands() {
		switch {
		case name != s.Name:
			t.Errorf("%s is registered as %q", s.Name, name)
		case s.Name != strings.ToLower(s.Name) || s.Name == "":
			t.Errorf("%q: names are lower case", s.Name)
		case s.Parse == nil:
			t.Errorf("%s has no Parse", s.Name)
		case s.Group == "":
			t.Errorf("%s has no Group", s.Name)
		case s.Summary == "" || !strings.HasSuffix(s.Summary, "."):
			t.Errorf("%s: Summary %q should be a sentence", s.Name, s.Summary)
		case s.Arity == 0:
			t.Errorf("%s has no Arity", s.Name)
		case !slices.Contains(readmeGroups, s.Group):
			t.Errorf("%s: group %q is not one of the README's %v, so the README would leave it out", s.Name, s.Group, readmeGroups)
		case !strings.Contains(md, "| `"+strings.ToUpper(s.Name)+"` |"):
			t.Errorf("%s is missing from the README's command list", s.Name)
		}
		if s.Has(Write) && s.Has(Readonly) {
			t.Errorf("%s is both write and readonly", s.Name)
		}
		if s.FirstKey < 0 || (s.FirstKey > 0 && (s.Step < 1 || (s.LastKey > 0 && s.LastKey < s.FirstKey))) || (s.FirstKey == 0 && (s.LastKey != 0 || s.Step != 0)) {
			t.Errorf("%s: key positions %d %d %d", s.Name, s.FirstKey, s.LastKey, s.Step)
		}
		if s.Arity > 0 && s.LastKey >= s.Arity {
			t.Errorf("%s: last key %d beyond arity %d", s.Name, s.LastKey, s.Arity)
		}
		if got := Commands().Lookup([]byte(strings.ToUpper(s.Name))); got != s {
			t.Errorf("Lookup(%s) = %v", strings.ToUpper(s.Name), got)
		}
		if s.Has(NoAuth) && !slices.Contains([]string{"auth", "hello", "quit", "reset", "ai.attest"}, s.Name) {
			t.Errorf("%s runs before AUTH, which Redis allows only for AUTH, HELLO, QUIT and RESET (and EnclaveAI for AI.ATTEST)", s.Name)
		}
	}
	for _, name := range []string{"", "nosuch", strings.Repeat("x", 40), "AI.TENSORGET\x00"} {
		if s := Commands().Lookup([]byte(name)); s != nil {
			t.Errorf("Lookup(%q) = %s", name, s.Name)
		}
	}
	sorted := Commands().Sorted()
	if len(sorted) != len(Commands()) || !slices.IsSortedFunc(sorted, func(a, b *Spec) int { return strings.Compare(a.Name, b.Name) }) {
		t.Error("Sorted() is not the table in name order")
	}
}

// Every command answers a parse of its minimal arity without panicking,
// and every command's parse is free of side effects on the keyspace.
func TestEveryCommandParses(t *testing.T) {
	for _, s := range Commands().Sorted() {
		n := s.Arity
		if n < 0 {
			n = -n
		}
		for _, extra := range []int{0, 1, 3} {
			argv := [][]byte{[]byte(s.Name)}
			for i := 1; i < n+extra; i++ {
				argv = append(argv, []byte("x"))
			}
			func() {
				defer func() {
					if p := recover(); p != nil {
						t.Errorf("%s with %d arguments: Parse panicked: %v", s.Name, len(argv), p)
					}
				}()
				s.Parse(NewArgs(argv, nil))
			}()
		}
	}
}

// Spec.Is matches its name in any case, and nothing else.
func TestSpecIs(t *testing.T) {
	s := Commands().Lookup([]byte("ai.tensorget"))
	for name, want := range map[string]bool{"ai.tensorget": true, "AI.TENSORGET": true, "Ai.TensorGet": true,
		"ai.tensorset": false, "ai.tensorge": false, "ai.tensorgett": false, "": false, "ai.tensorget\x00": false} {
		if got := s.Is([]byte(name)); got != want {
			t.Errorf("Is(%q) = %v, want %v", name, got, want)
		}
	}
}

// Every command whose refusal of an unknown subcommand says "Try X HELP"
// has subcommands listed, so that X HELP answers them, in Redis's form.
func TestSubcommandHelp(t *testing.T) {
	helped := 0
	for name, s := range Commands() {
		_, err := s.Parse(NewArgs([][]byte{[]byte(name), []byte("NOSUCHSUB")}, nil))
		if err == nil || !strings.Contains(errorText(err), " HELP.") {
			if len(s.Subs) > 0 {
				t.Errorf("%s has subcommands, but an unknown one gets %v", name, err)
			}
			continue
		}
		if want := "Try " + strings.ToUpper(name) + " HELP."; !strings.HasSuffix(errorText(err), want) {
			t.Errorf("%s NOSUCHSUB: %q does not end in %q", name, errorText(err), want)
		}
		r, err := s.Parse(NewArgs([][]byte{[]byte(name), []byte("help")}, nil))
		h, ok := r.(helpCmd)
		if err != nil || !ok {
			t.Errorf("%s HELP: %v, %v", name, r, err)
			continue
		}
		helped++
		if len(h.lines) != 3+2*len(s.Subs) || h.lines[0] != strings.ToUpper(name)+" <subcommand> [<arg> [value] [opt] ...]. Subcommands are:" ||
			h.lines[len(h.lines)-1] != "    Print this help." {
			t.Errorf("%s HELP: %q", name, h.lines)
		}
		if _, err := s.Parse(NewArgs([][]byte{[]byte(name), []byte("HELP"), []byte("x")}, nil)); err == nil ||
			errorText(err) != "ERR wrong number of arguments for '"+name+"|help' command" {
			t.Errorf("%s HELP x: %v", name, err)
		}
	}
	if helped < 9 {
		t.Errorf("%d commands answer HELP, want the 9 that point to it", helped)
	}
}

// A run whose MODEL_EXECUTION_TIMEOUT ran out while it waited for an
// engine worker's lane is answered as the kill switch answers one it
// stopped, not "internal error" (models review).
func TestDeadlineErrorText(t *testing.T) {
	err := fmt.Errorf("lane: %w", context.DeadlineExceeded)
	if got, want := errorText(err), "ERR Exiting due to terminate flag being set to true."; got != want {
		t.Errorf("errorText = %q, want %q", got, want)
	}
}
