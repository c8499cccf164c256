package main

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/tidwall/redcon"
)

// info: enclaveai-cli info [flags] [key]: without a key, the server and
// its models (one line each); with one, that model's AI.MODELINFO and
// AI.INFO run statistics.
func info(args []string, out io.Writer) error {
	fs := newFlags("info")
	var cf connFlags
	cf.register(fs, false, "key")
	if err := parse(fs, args); err != nil {
		return err
	}
	c, err := cf.dial()
	if err != nil {
		return err
	}
	defer c.Close()
	if fs.NArg() == 1 {
		return modelInfo(c, fs.Arg(0), out)
	}
	srv, err := c.do("INFO", "server")
	if err != nil {
		return err
	}
	for _, line := range strings.Split(srv.String(), "\r\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && (k == "redis_version" || k == "tcp_port" || k == "uptime_in_seconds") {
			fmt.Fprintf(out, "%s: %s\n", k, v)
		}
	}
	scan, err := c.do("AI._MODELSCAN")
	if err != nil {
		return err
	}
	models := items(scan)
	slices.SortFunc(models, func(a, b redcon.RESP) int {
		return strings.Compare(items(a)[0].String(), items(b)[0].String())
	})
	fmt.Fprintf(out, "models: %d\n", len(models))
	for _, m := range models {
		kt := items(m)
		if len(kt) != 2 {
			continue
		}
		mi, err := c.do("AI.MODELINFO", kt[0].String())
		if err != nil {
			fmt.Fprintf(out, "  %s: %v\n", kt[0].String(), err)
			continue
		}
		fmt.Fprintf(out, "  %s  %s  sha256 %.16s…  tag %q  inputs %s  outputs %s\n", kt[0].String(),
			mb(field(mi, "size").Int()), field(mi, "sha256").String(), kt[1].String(),
			ios(field(mi, "inputs")), ios(field(mi, "outputs")))
	}
	return nil
}

func modelInfo(c *client, key string, out io.Writer) error {
	mi, err := c.do("AI.MODELINFO", key)
	if err != nil {
		return err
	}
	arr := items(mi)
	for i := 0; i+1 < len(arr); i += 2 {
		k, v := arr[i].String(), arr[i+1]
		switch k {
		case "inputs", "outputs":
			fmt.Fprintf(out, "%-16s %s\n", k+":", ios(v))
		default:
			fmt.Fprintf(out, "%-16s %s\n", k+":", v.String())
		}
	}
	st, err := c.do("AI.INFO", key)
	if err != nil {
		return err
	}
	calls := field(st, "calls").Int()
	avg := int64(0)
	if calls > 0 {
		avg = field(st, "duration").Int() / calls
	}
	fmt.Fprintf(out, "%-16s %d calls, %d errors, %d samples, %d us in all (%d us a call)\n", "runs:",
		calls, field(st, "errors").Int(), field(st, "samples").Int(), field(st, "duration").Int(), avg)
	return nil
}

// ios renders AI.MODELINFO's inputs or outputs: name:TYPE[d0,d1].
func ios(list redcon.RESP) string {
	var parts []string
	for _, io := range items(list) {
		var dims []string
		for _, d := range items(field(io, "shape")) {
			dims = append(dims, d.String())
		}
		parts = append(parts, fmt.Sprintf("%s:%s[%s]", field(io, "name").String(), field(io, "dtype").String(),
			strings.Join(dims, ",")))
	}
	return strings.Join(parts, " ")
}
