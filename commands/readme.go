package commands

import (
	"strings"
)

// CommandsMarkdown renders the command table as the README's command list,
// grouped as COMMAND DOCS groups them. The README section between the
// markers below is this text; TestREADMECommands keeps them equal.
func CommandsMarkdown() string {
	groups := map[string][]*Spec{}
	var order []string
	for _, s := range table.Sorted() {
		if _, ok := groups[s.Group]; !ok {
			order = append(order, s.Group)
		}
		groups[s.Group] = append(groups[s.Group], s)
	}
	var b strings.Builder
	for _, g := range []string{"tensors", "models", "keyspace", "connection", "transactions", "server"} {
		specs := groups[g]
		if len(specs) == 0 {
			continue
		}
		b.WriteString("\n**" + g + "**\n\n| command | arguments | what it does |\n|---|---|---|\n")
		for _, s := range specs {
			b.WriteString("| `" + strings.ToUpper(s.Name) + "` | " + mdEscape(s.Syntax) + " | " + strings.ReplaceAll(s.Summary, "|", "\\|") + " |\n")
		}
	}
	return b.String()
}

func mdEscape(s string) string {
	if s == "" {
		return ""
	}
	return "`" + strings.ReplaceAll(s, "|", "\\|") + "`"
}

// README markers around the generated command list.
const (
	ReadmeBegin = "<!-- commands:begin (generated from the command table; go test ./commands -run TestREADMECommands -update) -->"
	ReadmeEnd   = "<!-- commands:end -->"
)
