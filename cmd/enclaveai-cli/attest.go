package main

import (
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/enclaveai/enclaveai/enclave"
)

// policyFlags are the flags of the attestation policy.
type policyFlags struct {
	signer, unique       string
	product, minSVN      uint
	allowDebug, allowSim bool
	skip                 bool
}

func (pf *policyFlags) register(fs *flag.FlagSet, skippable bool) {
	fs.StringVar(&pf.signer, "signer", "", "expected MRSIGNER, hex (ego signerid)")
	fs.StringVar(&pf.unique, "unique", "", "expected MRENCLAVE, hex (ego uniqueid)")
	fs.UintVar(&pf.product, "product-id", 1, "expected product id")
	fs.UintVar(&pf.minSVN, "min-svn", 1, "lowest acceptable security version")
	fs.BoolVar(&pf.allowDebug, "allow-debug", false, "accept a debug enclave (its memory is readable by the host)")
	fs.BoolVar(&pf.allowSim, "allow-simulated", false, "accept simulated evidence, which proves nothing (development only)")
	if skippable {
		fs.BoolVar(&pf.skip, "no-attest", false, "do not check the server's attestation first")
	}
}

func (pf *policyFlags) policy() (enclave.Policy, error) {
	p := enclave.Policy{ProductID: uint16(pf.product), MinSecurityVersion: pf.minSVN,
		AllowDebug: pf.allowDebug, AllowSimulated: pf.allowSim}
	var err error
	if p.SignerID, err = hex.DecodeString(pf.signer); err != nil {
		return p, fmt.Errorf("-signer: %w", err)
	}
	if p.UniqueID, err = hex.DecodeString(pf.unique); err != nil {
		return p, fmt.Errorf("-unique: %w", err)
	}
	return p, nil
}

// checkAttestation asks the server for evidence bound to a fresh nonce and
// verifies it against the policy: bound to this connection's TLS key with
// TLS, to the key the server reports without. verbose writes every detail.
func checkAttestation(c *client, policy enclave.Policy, out io.Writer, verbose bool) (*enclave.Result, error) {
	c.conn.SetDeadline(time.Now().Add(30 * time.Second))
	defer c.conn.SetDeadline(time.Time{})
	nonce := make([]byte, 32)
	rand.Read(nonce)
	say := func(format string, args ...any) {
		if verbose {
			fmt.Fprintf(out, format, args...)
		}
	}
	say("server:      %s (tls: %v)\n", c.addr, c.tls)
	say("nonce:       %x\n", nonce)
	reply, err := c.do("AI.ATTEST", nonce)
	if err != nil {
		return nil, err
	}
	evidence := field(reply, "evidence").Bytes()
	say("mode:        %s\n", field(reply, "mode").String())
	say("evidence:    %d bytes\n", len(evidence))
	tlsKey := c.tlsKey
	if !c.tls {
		tlsKey = field(reply, "tls_public_key").Bytes()
		say("warning:     plain TCP: the evidence is bound to the key the server reports, not to this connection\n")
	}
	res, err := enclave.Verify(evidence, nonce, tlsKey, field(reply, "receipt_public_key").Bytes(), policy)
	if err != nil {
		return nil, err
	}
	printResult(out, res, verbose)
	return res, nil
}

func printResult(out io.Writer, res *enclave.Result, verbose bool) {
	if verbose {
		fmt.Fprintf(out, "kind:        %s\n", res.Kind)
		fmt.Fprintf(out, "unique id:   %x\n", res.UniqueID)
		fmt.Fprintf(out, "signer id:   %x\n", res.SignerID)
		fmt.Fprintf(out, "product id:  %d, security version %d, debug %v\n", res.ProductID, res.SecurityVersion, res.Debug)
		if res.TCBStatus != "" {
			fmt.Fprintf(out, "TCB status:  %s\n", res.TCBStatus)
		}
	}
	if res.Kind == enclave.KindSimulated {
		fmt.Fprintln(out, "SIMULATED: bound to this nonce and TLS key, accepted only because of -allow-simulated; it proves nothing about the code")
		return
	}
	fmt.Fprintln(out, "VERIFIED: the evidence is bound to this nonce and TLS key and satisfies the policy")
}

// attest: enclaveai-cli attest [connection and policy flags].
func attest(args []string, out io.Writer) error {
	fs := newFlags("attest")
	var cf connFlags
	var pf policyFlags
	cf.register(fs, true, "key")
	pf.register(fs, false)
	if err := parse(fs, args); err != nil {
		return err
	}
	policy, err := pf.policy()
	if err != nil {
		return err
	}
	c, err := cf.connect()
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = checkAttestation(c, policy, out, true)
	return err
}

// attested connects and, unless -no-attest, checks the attestation (one
// line) before it authenticates: the password goes only to a server whose
// evidence satisfied the policy (the server answers AI.ATTEST before AUTH).
func attested(cf *connFlags, pf *policyFlags, out io.Writer) (*client, error) {
	policy, err := pf.policy()
	if err != nil {
		return nil, err
	}
	c, err := cf.connect()
	if err != nil {
		return nil, err
	}
	if !pf.skip {
		if _, err := checkAttestation(c, policy, out, false); err != nil {
			c.Close()
			return nil, fmt.Errorf("attestation: %w (-allow-simulated for a development server, -no-attest to skip)", err)
		}
	}
	if err := cf.auth(c); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// verify: enclaveai-cli verify -evidence FILE -nonce HEX [-tls-key HEX]
// [policy flags]: checks evidence another client obtained (the Python
// client hands SGX evidence here, since only Go links the verifier).
func verify(args []string, out io.Writer) error {
	fs := newFlags("verify")
	var pf policyFlags
	pf.register(fs, false)
	evFile := fs.String("evidence", "", "file holding the evidence bytes of AI.ATTEST")
	nonceHex := fs.String("nonce", "", "the nonce sent with AI.ATTEST, hex")
	keyHex := fs.String("tls-key", "", "the server's TLS public key (DER SubjectPublicKeyInfo), hex")
	receiptHex := fs.String("receipt-key", "", "the server's receipt public key (AI.ATTEST receipt_public_key, DER), hex; empty: none")
	if err := parse(fs, args); err != nil {
		return err
	}
	policy, err := pf.policy()
	if err != nil {
		return err
	}
	evidence, err := os.ReadFile(*evFile)
	if err != nil {
		return err
	}
	nonce, err := hex.DecodeString(*nonceHex)
	if err != nil {
		return fmt.Errorf("-nonce: %w", err)
	}
	key, err := hex.DecodeString(*keyHex)
	if err != nil {
		return fmt.Errorf("-tls-key: %w", err)
	}
	receiptKey, err := hex.DecodeString(*receiptHex)
	if err != nil {
		return fmt.Errorf("-receipt-key: %w", err)
	}
	res, err := enclave.Verify(evidence, nonce, key, receiptKey, policy)
	if err != nil {
		return err
	}
	printResult(out, res, true)
	return nil
}
