package config

import (
	"slices"
	"testing"
)

func TestParseMemory(t *testing.T) {
	rows := []struct {
		at   string
		in   string
		want int64 // -1: refused
	}{
		{at(), "0", 0},
		{at(), "1", 1},
		{at(), "1b", 1},
		{at(), "1k", 1000},
		{at(), "1kb", 1024},
		{at(), "1K", 1000},
		{at(), "1KB", 1024},
		{at(), "1Kb", 1024},
		{at(), "1m", 1000 * 1000},
		{at(), "1mb", 1 << 20},
		{at(), "512mb", 512 << 20},
		{at(), "1g", 1000 * 1000 * 1000},
		{at(), "1gb", 1 << 30},
		{at(), "4GB", 4 << 30},
		{at(), "9223372036854775807", 1<<63 - 1},
		{at(), "9007199254740991kb", 9007199254740991 << 10},
		{at(), "9007199254740992kb", -1}, // overflows int64
		{at(), "9223372036854775808", -1},
		{at(), "", -1},
		{at(), "k", -1},
		{at(), "kb", -1},
		{at(), "-1", -1},
		{at(), "-1mb", -1},
		{at(), "1.5mb", -1},
		{at(), "1x", -1},
		{at(), "1 mb", -1},
		{at(), " 1", -1},
		{at(), "1tb", -1},
	}
	for _, r := range rows {
		got, err := ParseMemory(r.in)
		if r.want < 0 {
			if err == nil {
				t.Errorf("%s: ParseMemory(%q) = %d, want an error", r.at, r.in, got)
			}
			continue
		}
		if err != nil || got != r.want {
			t.Errorf("%s: ParseMemory(%q) = %d, %v, want %d", r.at, r.in, got, err, r.want)
		}
	}
}

// SplitArgs against redis-server 7.0's sdssplitargs (checked with RPUSH
// of inline commands).
func TestSplitArgs(t *testing.T) {
	rows := []struct {
		at   string
		in   string
		want []string // nil: unbalanced quotes
	}{
		{at(), "", []string{}},
		{at(), "   \t ", []string{}},
		{at(), "a b c", []string{"a", "b", "c"}},
		{at(), "  x   y  ", []string{"x", "y"}},
		{at(), "a\tb\r\nc", []string{"a", "b", "c"}},
		{at(), `"a b" c`, []string{"a b", "c"}},
		{at(), `'a b' c`, []string{"a b", "c"}},
		{at(), `"a\"b"`, []string{`a"b`}},
		{at(), `"\x41\x4a\x4z"`, []string{"AJx4z"}},
		{at(), `"\x4"`, []string{"x4"}},
		{at(), `"\n\r\t\b\a\\\q"`, []string{"\n\r\t\b\a\\q"}},
		{at(), `'it\'s'`, []string{"it's"}},
		{at(), `'a\nb'`, []string{`a\nb`}},
		{at(), `'\\'`, nil}, // \' is a quote: the string never closes
		{at(), `a'\''`, []string{"a'"}},
		{at(), `""`, []string{""}},
		{at(), `'' ""`, []string{"", ""}},
		{at(), `a"b c"`, []string{"ab c"}},
		{at(), `a''`, []string{"a"}},
		{at(), "\"a\"\tb", []string{"a", "b"}},
		{at(), "\"a\"\vb", []string{"a", "b"}},
		{at(), "a\vb", []string{"a\vb"}},
		{at(), "x\x00y z", []string{"x"}},
		{at(), `"a"b`, nil},
		{at(), `'a'b`, nil},
		{at(), `a"b"c`, nil},
		{at(), `"ab`, nil},
		{at(), `'ab`, nil},
		{at(), `"\`, nil},
		{at(), `'it\'`, nil},
		{at(), "\"a\x00\"", nil},
	}
	for _, r := range rows {
		got, err := SplitArgs(r.in)
		if r.want == nil {
			if err == nil {
				t.Errorf("%s: SplitArgs(%q) = %q, want unbalanced quotes", r.at, r.in, got)
			}
			continue
		}
		if got == nil {
			got = []string{}
		}
		if err != nil || !slices.Equal(got, r.want) {
			t.Errorf("%s: SplitArgs(%q) = %q, %v, want %q", r.at, r.in, got, err, r.want)
		}
	}
}
