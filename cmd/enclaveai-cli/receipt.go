package main

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/enclaveai/enclaveai/enclave"
	"github.com/enclaveai/enclaveai/receipt"
)

// tensorFlags collects -tensor key=path flags.
type tensorFlags []string

func (t *tensorFlags) String() string     { return strings.Join(*t, ",") }
func (t *tensorFlags) Set(v string) error { *t = append(*t, v); return nil }

// receiptVerify is `enclaveai-cli receipt verify`: it checks a receipt
// (package receipt) offline, against
//   - its signature, with the key in its header;
//   - attestation evidence saved from AI.ATTEST (-evidence, -attest-nonce,
//     -tls-key), which must bind that key, and the enclave policy;
//   - the nonce the client sent with RECEIPT (-nonce or -nonce-hex);
//   - the client's own tensor bytes (-tensor key=file, as AI.TENSORSET BLOB
//     sent them or AI.TENSORGET BLOB returned them) and the model's digest
//     (-model-sha256).
//
// Any failed check prints FAILED and exits 1.
// receiptCmd: enclaveai-cli receipt verify [flags].
func receiptCmd(args []string, out io.Writer) error {
	if len(args) == 0 || args[0] != "verify" {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help") {
			return receiptVerify(args, out) // its flags: every subcommand takes -h (README)
		}
		return errors.New("usage: enclaveai-cli receipt verify [flags] (enclaveai-cli receipt verify -h for the flags)")
	}
	return receiptVerify(args[1:], out)
}

func receiptVerify(args []string, out io.Writer) error {
	fs := newFlags("receipt")
	file := fs.String("receipt", "", "the receipt file (- for standard input)")
	nonce := fs.String("nonce", "", "the nonce sent with RECEIPT, as text")
	nonceHex := fs.String("nonce-hex", "", "the nonce sent with RECEIPT, in hex")
	modelSHA := fs.String("model-sha256", "", "the SHA-256 the model that ran must have, hex")
	var tensors, inputs, outputs tensorFlags
	fs.Var(&tensors, "tensor", "key=file: the blob bytes of an input or output tensor of that key (repeatable)")
	fs.Var(&inputs, "input", "key=file: the blob bytes of the run's input tensor of that key (repeatable)")
	fs.Var(&outputs, "output", "key=file: the blob bytes of the run's output tensor of that key (repeatable)")
	evidenceFile := fs.String("evidence", "", "AI.ATTEST's evidence, saved to a file")
	attestNonce := fs.String("attest-nonce", "", "the nonce sent with AI.ATTEST, in hex")
	tlsKeyFile := fs.String("tls-key", "", "AI.ATTEST's tls_public_key (DER), saved to a file; none if the server has no TLS")
	skipAttest := fs.Bool("skip-attestation", false, "check the signature only: anyone could have made the key (tests only)")
	signer := fs.String("signer", "", "expected MRSIGNER, hex (ego signerid)")
	unique := fs.String("unique", "", "expected MRENCLAVE, hex (ego uniqueid)")
	product := fs.Uint("product-id", 1, "expected product id")
	minSVN := fs.Uint("min-svn", 1, "lowest acceptable security version")
	allowDebug := fs.Bool("allow-debug", false, "accept a debug enclave")
	allowSim := fs.Bool("allow-simulated", false, "accept simulated evidence, which proves nothing (development only)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *file == "" {
		return errors.New("-receipt is required")
	}
	var raw []byte
	var err error
	if *file == "-" {
		raw, err = io.ReadAll(io.LimitReader(os.Stdin, receipt.MaxSize+1))
	} else {
		raw, err = os.ReadFile(*file)
	}
	if err != nil {
		return err
	}
	p, pubDER, err := receipt.Verify(strings.TrimSpace(string(raw)))
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "signature:   valid (ES256, key %s)\n", p.Server.KeyID)

	if *skipAttest {
		fmt.Fprintln(out, "warning:     -skip-attestation: the key is not checked against the enclave's evidence")
	} else {
		if *evidenceFile == "" || *attestNonce == "" {
			return errors.New("-evidence and -attest-nonce are required (or -skip-attestation)")
		}
		evidence, err := os.ReadFile(*evidenceFile)
		if err != nil {
			return err
		}
		an, err := hex.DecodeString(*attestNonce)
		if err != nil {
			return fmt.Errorf("-attest-nonce: %w", err)
		}
		var tlsKey []byte
		if *tlsKeyFile != "" {
			if tlsKey, err = os.ReadFile(*tlsKeyFile); err != nil {
				return err
			}
		}
		policy := enclave.Policy{ProductID: uint16(*product), MinSecurityVersion: *minSVN,
			AllowDebug: *allowDebug, AllowSimulated: *allowSim}
		if policy.SignerID, err = hex.DecodeString(*signer); err != nil {
			return fmt.Errorf("-signer: %w", err)
		}
		if policy.UniqueID, err = hex.DecodeString(*unique); err != nil {
			return fmt.Errorf("-unique: %w", err)
		}
		res, err := enclave.Verify(evidence, an, tlsKey, pubDER, policy)
		if err != nil {
			return fmt.Errorf("attestation: %w (is the receipt from the attested server?)", err)
		}
		fmt.Fprintf(out, "attestation: the receipt key is bound into %s evidence\n", res.Kind)
		if res.Kind == enclave.KindSimulated {
			fmt.Fprintln(out, "warning:     simulated evidence proves nothing about the code (-allow-simulated)")
		}
	}

	if *nonce == "" && *nonceHex == "" {
		fmt.Fprintln(out, "warning:     nonce not checked: without -nonce, a receipt made for another request (a replay) verifies too")
	}
	if *nonce != "" || *nonceHex != "" {
		want := []byte(*nonce)
		if *nonceHex != "" {
			if want, err = hex.DecodeString(*nonceHex); err != nil {
				return fmt.Errorf("-nonce-hex: %w", err)
			}
		}
		if p.Nonce != base64.RawURLEncoding.EncodeToString(want) {
			return errors.New("nonce: the receipt was not made for this nonce")
		}
		fmt.Fprintln(out, "nonce:       matches")
	}
	if *modelSHA != "" {
		found := false
		for _, m := range p.Models {
			found = found || strings.EqualFold(m.SHA256, *modelSHA)
		}
		if !found {
			return fmt.Errorf("model: no model in the receipt has SHA-256 %s", *modelSHA)
		}
		fmt.Fprintln(out, "model:       sha256 matches")
	}
	// -tensor matches a key's input or output; -input and -output one
	// side only: a run whose output went onto its input key names the
	// key twice, with other bytes each time (security review: -tensor
	// then matched neither file).
	for _, side := range []struct {
		flags  tensorFlags
		what   string
		tables [][]receipt.Tensor
	}{
		{tensors, "tensor", [][]receipt.Tensor{p.Inputs, p.Outputs}},
		{inputs, "input", [][]receipt.Tensor{p.Inputs}},
		{outputs, "output", [][]receipt.Tensor{p.Outputs}},
	} {
		for _, t := range side.flags {
			key, path, ok := strings.Cut(t, "=")
			if !ok {
				return fmt.Errorf("-%s %q: want key=file", side.what, t)
			}
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(data)
			got := hex.EncodeToString(sum[:])
			named, matched := false, false
			for _, table := range side.tables {
				for _, rt := range table {
					if rt.Key == key {
						named = true
						matched = matched || rt.SHA256 == got
					}
				}
			}
			switch {
			case !named:
				return fmt.Errorf("%s %s: not in the receipt", side.what, key)
			case !matched:
				return fmt.Errorf("%s %s: the bytes in %s are not those the receipt names", side.what, key, path)
			}
			fmt.Fprintf(out, "%-12s %s sha256 matches\n", side.what+":", key)
		}
	}
	for _, m := range p.Models {
		fmt.Fprintf(out, "model:       %s sha256 %s\n", m.Key, m.SHA256)
	}
	fmt.Fprintf(out, "run:         %s by user %s at %d on %s %s (%s)\n", p.Type, p.User, p.Time, p.Server.Name, p.Server.Version, p.Server.Mode)
	fmt.Fprintln(out, "VERIFIED")
	return nil
}
