package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/enclaveai/enclaveai/config"
	"github.com/enclaveai/enclaveai/modelstore"
)

// infoFlag handles `--help`/`-h` and `--version`/`-v` given alone: it
// writes the answer and reports true.
func infoFlag(args []string, w io.Writer) bool {
	if len(args) != 1 {
		return false
	}
	switch args[0] {
	case "--help", "-h", "help":
		usage(w)
	case "--version", "-v", "version":
		fmt.Fprintln(w, version())
	default:
		return false
	}
	return true
}

func usage(w io.Writer) {
	fmt.Fprint(w, `Usage: enclaveai-server [enclaveai.conf] [--directive value ...]
       enclaveai-server --help | --version

A Redis-protocol (RESP2/RESP3) ONNX model server, RedisAI-compatible, built
to run inside an SGX enclave. Directives come from the configuration file
(one "directive value" per line; see enclaveai.conf.example), then from
--directive flags, which win. (CONFIG SET) marks those that may change at run
time. Sizes take Redis units: 1k = 1000, 1kb = 1024, mb, gb.

Directives, with their defaults:
`)
	config.Help(w)
}

// revision is the git revision `make build` stamps in with -ldflags
// (-X main.revision=...); without it the VCS stamp of go build is used.
var revision string

// version is the build's revision, the Go release and the ONNX Runtime it
// expects (or that it has none: the pure-Go engine alone).
func version() string {
	engine := "ONNX Runtime " + modelstore.RuntimeVersionWanted
	if !modelstore.HasRuntime {
		engine = "no ONNX Runtime: the pure-Go engine only"
	}
	return fmt.Sprintf("enclaveai-server %s (%s, %s/%s, %s)", buildRevision(),
		runtime.Version(), runtime.GOOS, runtime.GOARCH, engine)
}

// buildRevision is the build's revision, "-dirty" after it when go build
// saw uncommitted changes, or "unknown".
func buildRevision() string {
	if revision != "" {
		return revision
	}
	rev, dirty := "unknown", ""
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			switch {
			case s.Key == "vcs.revision" && len(s.Value) >= 12:
				rev = s.Value[:12]
			case s.Key == "vcs.modified" && s.Value == "true":
				dirty = "-dirty"
			}
		}
	}
	return rev + dirty
}
