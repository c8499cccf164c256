package commands

import (
	"reflect"
	"testing"

	"github.com/enclaveai/enclaveai/config"
)

// parseCase is one row of a parse table: a raw command line (split as
// redis-cli splits it), and either the typed command its parse must give
// or the error text it must refuse with (errorText's, as the client gets
// it).
type parseCase struct {
	line string
	want Runner // nil when err is set
	err  string
}

// parseTable runs each case through the command table's Parse alone: no
// dispatcher, no keyspace. A failing row names its line.
func parseTable(t *testing.T, cases ...parseCase) {
	t.Helper()
	for _, c := range cases {
		args, err := config.SplitArgs(c.line)
		if err != nil || len(args) == 0 {
			t.Fatalf("bad command line %q: %v", c.line, err)
		}
		argv := make([][]byte, len(args))
		for i, s := range args {
			argv[i] = []byte(s)
		}
		spec := Commands().Lookup(argv[0])
		if spec == nil {
			t.Errorf("%q: unknown command", c.line)
			continue
		}
		// Parsed as a queued command (its own memory) and as one run at
		// once (into the connection's scratch): the same result.
		withScratch := NewArgs(argv, nil)
		withScratch.scratch = new(scratch)
		for _, a := range []Args{NewArgs(argv, nil), withScratch} {
			got, err := spec.Parse(a)
			switch {
			case c.err != "":
				if err == nil || errorText(err) != c.err {
					t.Errorf("%q: error %v, want %q", c.line, err, c.err)
				}
			case err != nil:
				t.Errorf("%q: error %v, want %#v", c.line, err, c.want)
			case !reflect.DeepEqual(got, c.want):
				t.Errorf("%q (scratch %v):\n got %#v\nwant %#v", c.line, a.scratch != nil, got, c.want)
			}
		}
	}
}
