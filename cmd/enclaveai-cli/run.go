package main

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"strings"

	"github.com/tidwall/redcon"
)

// stringList is a repeatable string flag.
type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

// run: enclaveai-cli run [flags] key in.npy [in.npy ...]: one
// AI.DAGEXECUTE_RO that sets the inputs, runs the model and gets the
// outputs, which are written as .npy files (-o, else <output name>.npy).
func run(args []string, out io.Writer) error {
	fs := newFlags("run")
	var cf connFlags
	var pf policyFlags
	cf.register(fs, true, "key")
	pf.register(fs, true)
	var outs stringList
	fs.Var(&outs, "o", "output file, repeatable, in the model's output order (default <output name>.npy)")
	timeout := fs.Int("timeout", 0, "TIMEOUT of the run in ms (0: none)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() < 2 {
		fs.Usage()
		return fmt.Errorf("run takes a model key and its input files")
	}
	key, inFiles := fs.Arg(0), fs.Args()[1:]
	inputs := make([]*npyArray, len(inFiles))
	for i, p := range inFiles {
		a, err := readNpy(p)
		if err != nil {
			return err
		}
		inputs[i] = a
	}
	c, err := attested(&cf, &pf, out)
	if err != nil {
		return err
	}
	defer c.Close()
	info, err := c.do("AI.MODELINFO", key)
	if err != nil {
		return err
	}
	outNames := ioNames(field(info, "outputs"))
	if n := len(ioNames(field(info, "inputs"))); n != len(inputs) {
		return fmt.Errorf("model %s takes %d inputs, got %d files", key, n, len(inputs))
	}
	tagBytes := make([]byte, 4)
	rand.Read(tagBytes)
	tag := hex.EncodeToString(tagBytes)
	cmd := []any{"AI.DAGEXECUTE_RO", "ROUTING", key}
	if *timeout > 0 {
		cmd = append(cmd, "TIMEOUT", *timeout)
	}
	var inKeys, outKeys []any
	for i, a := range inputs {
		k := fmt.Sprintf("in%d.%s", i, tag)
		inKeys = append(inKeys, k)
		cmd = append(cmd, "|>", "AI.TENSORSET", k, a.dtype)
		for _, d := range a.shape {
			cmd = append(cmd, d)
		}
		cmd = append(cmd, "BLOB", a.data)
	}
	for i := range outNames {
		outKeys = append(outKeys, fmt.Sprintf("out%d.%s", i, tag))
	}
	cmd = append(cmd, "|>", "AI.MODELEXECUTE", key, "INPUTS", len(inKeys))
	cmd = append(append(cmd, inKeys...), "OUTPUTS", len(outKeys))
	cmd = append(cmd, outKeys...)
	for _, k := range outKeys {
		cmd = append(cmd, "|>", "AI.TENSORGET", k, "META", "BLOB")
	}
	reply, err := c.do(cmd...)
	if err != nil {
		return err
	}
	results := items(reply)
	if len(results) < len(outNames) {
		return fmt.Errorf("unexpected reply: %s", reply.String())
	}
	// A step that failed is an error in its place and the ones after it
	// NA: the first error is the run's (it printed "no numpy type for "
	// of the NA outputs instead: tools review).
	for _, r := range results {
		if r.Type == redcon.Error {
			return fmt.Errorf("%s: %s", key, r.String())
		}
	}
	results = results[len(results)-len(outNames):]
	for i, r := range results {
		if r.Type == redcon.Error {
			return fmt.Errorf("output %s: %s", outNames[i], r.String())
		}
		a := &npyArray{dtype: field(r, "dtype").String(), data: field(r, "blob").Bytes()}
		for _, d := range items(field(r, "shape")) {
			a.shape = append(a.shape, d.Int())
		}
		path := outNames[i] + ".npy"
		if i < len(outs) {
			path = outs[i]
		}
		if err := writeNpy(path, a); err != nil {
			return err
		}
		fmt.Fprintf(out, "%s: %s %v -> %s\n", outNames[i], a.dtype, a.shape, path)
	}
	return nil
}

// ioNames are the names in AI.MODELINFO's inputs or outputs.
func ioNames(list redcon.RESP) []string {
	var names []string
	for _, io := range items(list) {
		names = append(names, field(io, "name").String())
	}
	return names
}
