// Command enclaveai-cli talks to an EnclaveAI server:
//
//	enclaveai-cli attest [flags]            check by remote attestation what code the server runs
//	enclaveai-cli upload [flags] model.onnx store a model, with progress and throughput
//	enclaveai-cli run [flags] key in.npy... run a model on .npy inputs, write .npy outputs
//	enclaveai-cli info [flags] [key]        list the models, or show one
//	enclaveai-cli verify [flags]            verify evidence saved from AI.ATTEST
//	enclaveai-cli receipt verify [flags]    verify a signed inference receipt (receipt.go)
//	enclaveai-cli cluster create|show|move ...   push a cluster topology, show each node's, or move a slot (cluster.go)
//
// Every subcommand takes -h (or --help). upload and run check the server's
// attestation first, with attest's policy flags (-no-attest skips it).
// Those that connect take redis-cli's TLS flags (conn.go): -tls, -cacert,
// -cert and -key (-cert-key in upload, whose -key names the model), -sni.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
)

// subcommand is one enclaveai-cli subcommand.
type subcommand struct {
	name, args, summary string
	run                 func(args []string, out io.Writer) error
}

// subcommands is set in init: the subcommands' help reads it.
var subcommands []subcommand

func init() {
	subcommands = []subcommand{
		{"attest", "[flags]", "check the server's attestation evidence against a policy", attest},
		{"upload", "[flags] model.onnx", "store a model (progress bar, throughput, sha256 checked)", upload},
		{"run", "[flags] key in.npy [in.npy ...]", "run a model on .npy inputs and write its outputs as .npy", run},
		{"info", "[flags] [key]", "list the models, or show one model's details and statistics", info},
		{"verify", "[flags] -evidence FILE -nonce HEX", "verify AI.ATTEST evidence saved to a file (used by the Python client)", verify},
		{"receipt", "verify [flags]", "verify a signed inference receipt against attestation evidence and your tensors", receiptCmd},
		{"cluster", "create|show|move [flags] host:port ...", "push a topology to cluster-enabled nodes (slots split evenly), show and compare their views, or move a slot to another node", clusterCmd},
	}
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "Usage: enclaveai-cli <command> [flags] [args]   (enclaveai-cli <command> -h for its flags)")
	fmt.Fprintln(w)
	for _, s := range subcommands {
		fmt.Fprintf(w, "  %-8s %s\n", s.name, s.summary)
	}
}

func main() {
	if len(os.Args) < 2 {
		usage(os.Stderr)
		os.Exit(2)
	}
	switch os.Args[1] {
	case "-h", "--help", "-help", "help":
		usage(os.Stdout)
		return
	}
	for _, s := range subcommands {
		if s.name == os.Args[1] {
			if err := s.run(os.Args[2:], os.Stdout); err != nil {
				if errors.Is(err, flag.ErrHelp) {
					return
				}
				fmt.Fprintln(os.Stdout, "FAILED:", err)
				os.Exit(1)
			}
			return
		}
	}
	fmt.Fprintf(os.Stderr, "enclaveai-cli: unknown command %q\n", os.Args[1])
	usage(os.Stderr)
	os.Exit(2)
}

// newFlags is a subcommand's flag set: -h prints its synopsis and flags.
func newFlags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.Usage = func() {
		for _, s := range subcommands {
			if s.name == name {
				fmt.Fprintf(fs.Output(), "Usage: enclaveai-cli %s %s\n\n%s.\n\nFlags:\n", s.name, s.args, s.summary)
			}
		}
		fs.PrintDefaults()
	}
	return fs
}

// parse parses a subcommand's flags; -h gives flag.ErrHelp (exit 0).
func parse(fs *flag.FlagSet, args []string) error {
	err := fs.Parse(args)
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		return fmt.Errorf("%s: %w", fs.Name(), err)
	}
	return err
}
