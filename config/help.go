package config

import (
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Doc returns a directive's meaning ("" for an unknown one).
func Doc(name string) string {
	if d, ok := directives[name]; ok {
		return d.doc
	}
	return ""
}

// DefaultValue is a directive's default as a configuration file writes it:
// sizes in Redis units, "" quoted, and "" for a repeated directive.
func DefaultValue(name string) string {
	d, ok := directives[name]
	if !ok || d.multi {
		return ""
	}
	if d.def == "" || strings.ContainsAny(d.def, " \t") {
		return strconv.Quote(d.def)
	}
	return d.def
}

// Help writes every directive with its default and meaning, as
// `enclaveai-server --help` shows them.
func Help(w io.Writer) {
	for _, name := range Names() {
		d := directives[name]
		value := DefaultValue(name)
		if d.multi || value == `""` {
			value = directives[name].args
		}
		mut := ""
		if d.mutable {
			mut = " (CONFIG SET)"
		}
		fmt.Fprintf(w, "  --%s %s\n      %s%s\n", name, value, directives[name].doc, mut)
	}
}

// Example writes enclaveai.conf.example: every directive, commented out at
// its default, under its meaning.
func Example(w io.Writer) {
	fmt.Fprint(w, `# EnclaveAI configuration: one "directive value" per line, as redis.conf.
# Start with: bin/enclaveai-server enclaveai.conf [--directive value ...]
# Every directive is shown at its default, commented out. Sizes take Redis
# units (1k = 1000, 1kb = 1024, mb, gb). Generated from the directive table
# (config/help.go): go test ./config -run TestExample -update
`)
	for _, name := range Names() {
		d := directives[name]
		value := DefaultValue(name)
		if d.multi || value == `""` {
			value = directives[name].args
		}
		fmt.Fprintf(w, "\n# %s\n# %s %s\n", wrap(directives[name].doc, "# "), name, value)
	}
}

// Markdown is the README's configuration table.
func Markdown() string {
	var b strings.Builder
	b.WriteString("| directive | default | |\n|---|---|---|\n")
	for _, name := range Names() {
		value := DefaultValue(name)
		if directives[name].multi || value == `""` {
			value = "none"
		} else {
			value = "`" + value + "`"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", name, value, strings.ReplaceAll(directives[name].doc, "|", `\|`))
	}
	return b.String()
}

// wrap breaks text at 76 columns, continuing lines with prefix. No line
// begins with a directive's name: "# tls-key-file are set" read as a
// directive to whoever uncomments the example's lines (code review).
func wrap(text, prefix string) string {
	var lines [][]string
	n := 0
	for _, word := range strings.Fields(text) {
		if len(lines) == 0 || n+1+len(word) > 76 {
			lines = append(lines, nil)
			n = -1
		}
		last := &lines[len(lines)-1]
		*last = append(*last, word)
		n += 1 + len(word)
	}
	for i := 1; i < len(lines); i++ {
		if _, ok := directives[lines[i][0]]; ok && len(lines[i-1]) > 1 {
			prev := lines[i-1]
			lines[i-1], lines[i] = prev[:len(prev)-1], append([]string{prev[len(prev)-1]}, lines[i]...)
		}
	}
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = strings.Join(l, " ")
	}
	return strings.Join(out, "\n"+prefix)
}
