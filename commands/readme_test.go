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
