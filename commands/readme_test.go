package commands

import (
	"flag"
	"os"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the README's command list from the command table")

// TestREADMECommands checks that README.md lists exactly the command table.
func TestREADMECommands(t *testing.T) {
	const path = "../README.md"
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	i, j := strings.Index(text, ReadmeBegin), strings.Index(text, ReadmeEnd)
	if i < 0 || j < i {
		t.Fatalf("README.md lacks the command list markers")
	}
	want := ReadmeBegin + "\n" + CommandsMarkdown() + "\n"
	got := text[i:j]
	if got == want {
		return
	}
	if *update {
		if err := os.WriteFile(path, []byte(text[:i]+want+text[j:]), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("README.md's command list is out of date: run go test ./commands -run TestREADMECommands -update")
}

// TestREADMEAdminCommands checks that the README's users section names
// every command flagged admin (it left MODULE out: code review).
func TestREADMEAdminCommands(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	i := strings.Index(text, "Administrative commands (those COMMAND flags")
	j := strings.Index(text[max(i, 0):], "are for the default")
	if i < 0 || j < 0 {
		t.Fatal("README.md lacks the paragraph on administrative commands")
	}
	para := text[i : i+j]
	for name, s := range table {
		if s.Has(Admin) && !strings.Contains(para, "`"+strings.ToUpper(name)+"`") {
			t.Errorf("README.md's administrative commands lack %s", strings.ToUpper(name))
		}
	}
}
