package config

import (
	"bytes"
	"flag"
	"os"
	"strconv"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite enclaveai.conf.example and the README's configuration table")

// Every directive of the table is documented, and its default is written
// as a configuration file would write it: what CONFIG GET shows, or the
// same size in Redis units.
func TestDirectiveTable(t *testing.T) {
	o := Default()
	seen := map[string]bool{}
	for _, d := range table {
		if seen[d.name] {
			t.Errorf("directive %q is in the table twice", d.name)
		}
		seen[d.name] = true
		if d.doc == "" {
			t.Errorf("directive %q has no doc", d.name)
		}
		if (d.multi || d.def == "") && d.args == "" {
			t.Errorf("directive %q shows no default and has no args placeholder", d.name)
		}
		if d.multi {
			if d.def != "" || d.mutable {
				t.Errorf("repeated directive %q has a default or is mutable", d.name)
			}
			continue
		}
		got := d.get(o)
		if got == d.def {
			continue
		}
		n, err := ParseMemory(d.def)
		if err != nil || strconv.FormatInt(n, 10) != got {
			t.Errorf("%s: default %q reads back as %q", d.name, d.def, got)
		}
	}
	if len(directives) != len(table) {
		t.Errorf("%d directives indexed for %d in the table", len(directives), len(table))
	}
}

// Help shows every directive with its default.
func TestHelp(t *testing.T) {
	var b bytes.Buffer
	Help(&b)
	for _, want := range []string{"  --port 6379\n", "  --proto-max-bulk-len 512mb\n", "  --max-model-size 4gb\n",
		"  --save \"3600 1 300 100 60 10000\"\n", "  --loadmodel <key> ONNX CPU", "  --requirepass <password>\n"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("--help lacks %q", want)
		}
	}
	for _, name := range Names() {
		if !strings.Contains(b.String(), "  --"+name+" ") {
			t.Errorf("--help lacks %s", name)
		}
	}
}

// enclaveai.conf.example is what Example writes, and each of its
// commented-out defaults, uncommented, reads back as the default.
func TestExample(t *testing.T) {
	documentedBuild(t)
	const path = "../enclaveai.conf.example"
	var b bytes.Buffer
	Example(&b)
	if *update {
		if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, b.Bytes()) {
		t.Fatalf("enclaveai.conf.example is out of date: run go test ./config -run TestExample -update")
	}
	// Each block after the header ends with its directive's line.
	var lines []string
	blocks := strings.Split(strings.TrimSpace(b.String()), "\n\n")
	for _, block := range blocks[1:] {
		l := strings.TrimPrefix(block[strings.LastIndex(block, "\n")+1:], "# ")
		if !strings.Contains(l, "<") {
			lines = append(lines, l)
		}
	}
	if len(blocks)-1 != len(Names()) {
		t.Fatalf("%d directive blocks in the example for %d directives", len(blocks)-1, len(Names()))
	}
	// Only a block's last line begins with a directive's name: a doc line
	// that did ("# tls-key-file are set") read as one to whoever
	// uncommented every directive (code review).
	for _, block := range blocks[1:] {
		doc := strings.Split(block, "\n")
		for _, l := range doc[:len(doc)-1] {
			if word, _, _ := strings.Cut(strings.TrimPrefix(l, "# "), " "); directives[word] != nil {
				t.Errorf("a doc line reads as a directive: %q", l)
			}
		}
	}
	o := Default()
	if err := o.ReadFile(strings.NewReader(strings.Join(lines, "\n"))); err != nil {
		t.Fatalf("the example's defaults do not read back: %v", err)
	}
	for _, name := range Names() {
		got, _ := o.Get(name)
		want, _ := Default().Get(name)
		if got != want {
			t.Errorf("%s: the example's default reads as %q, want %q", name, got, want)
		}
	}
}

// README.md's configuration table is Markdown's.
func TestREADMEConfig(t *testing.T) {
	documentedBuild(t)
	const path = "../README.md"
	const begin = "<!-- config:begin (generated from the directive table; go test ./config -run TestREADMEConfig -update) -->"
	const end = "<!-- config:end -->"
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	i, j := strings.Index(text, begin), strings.Index(text, end)
	if i < 0 || j < i {
		t.Fatalf("README.md lacks the configuration table markers")
	}
	want := begin + "\n" + Markdown()
	if text[i:j] == want {
		return
	}
	if *update {
		if err := os.WriteFile(path, []byte(text[:i]+want+text[j:]), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("README.md's configuration table is out of date: run go test ./config -run TestREADMEConfig -update")
}

// documentedBuild skips a test of the generated documentation in a build
// whose defaults differ from the ONNX Runtime build's, which the README and
// enclaveai.conf.example describe (inference-engine is go without cgo).
func documentedBuild(t *testing.T) {
	t.Helper()
	if DefaultInferenceEngine != EngineONNXRuntime {
		t.Skip("the README and enclaveai.conf.example show the ONNX Runtime build's defaults")
	}
}
