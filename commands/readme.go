package commands

import (
	"slices"
	"strings"
)

// CommandsMarkdown renders the command table as the README's command list,
// grouped as COMMAND DOCS groups them. The README section between the
// markers below is this text; TestREADMECommands keeps them equal.
func CommandsMarkdown() string {
	groups := map[string][]*Spec{}
	for _, s := range table.Sorted() {
		groups[s.Group] = append(groups[s.Group], s)
	}
	// The usual groups first, in this order; any other group after them
	// (sorted), so that a new group is never left out of the README.
	order := []string{"tensors", "models", "keyspace", "connection", "transactions", "cluster", "server"}
	var others []string
	for g := range groups {
		if !slices.Contains(order, g) {
			others = append(others, g)
		}
	}
	slices.Sort(others)
	var b strings.Builder
	for _, g := range append(order, others...) {
		specs := groups[g]
		if len(specs) == 0 {
			continue
		}
		b.WriteString("\n**" + g + "**\n\n| command | arguments | what it does |\n|---|---|---|\n")
		for _, s := range specs {
			b.WriteString("| `" + strings.ToUpper(s.Name) + "` | " + mdEscape(s.syntax()) + " | " + strings.ReplaceAll(s.Summary, "|", "\\|") + " |\n")
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
