// Command enclaveai-cli talks to an EnclaveAI server. The subcommand
// attest checks by remote attestation what code the server runs before a
// client trusts it with models and data:
//
//	enclaveai-cli attest [-host 127.0.0.1] [-port 6379] [-tls] [-signer HEX | -unique HEX]
//	                     [-product-id N] [-min-svn N] [-allow-debug] [-allow-simulated]
//
// and `enclaveai-cli receipt verify` checks a signed inference receipt
// offline (receipt.go).
//
// It sends a fresh random nonce with AI.ATTEST and verifies the evidence:
// the platform signature (SGX), the binding to the nonce and to the TLS key
// of this very connection, and the enclave identity against the policy.
package main

import (
	"bufio"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/tidwall/redcon"

	"github.com/enclaveai/enclaveai/enclave"
)

func main() {
	if len(os.Args) >= 3 && os.Args[1] == "receipt" && os.Args[2] == "verify" {
		if err := receiptVerify(os.Args[3:], os.Stdout); err != nil {
			fmt.Fprintln(os.Stdout, "FAILED:", err)
			os.Exit(1)
		}
		return
	}
	if len(os.Args) < 2 || os.Args[1] != "attest" {
		fmt.Fprintln(os.Stderr, "usage: enclaveai-cli attest [flags]  (enclaveai-cli attest -h for the flags)")
		os.Exit(2)
	}
	if err := attest(os.Args[2:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stdout, "FAILED:", err)
		os.Exit(1)
	}
}

func attest(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("attest", flag.ExitOnError)
	host := fs.String("host", "127.0.0.1", "server host")
	port := fs.Int("port", 6379, "server port (the tls-port with -tls)")
	useTLS := fs.Bool("tls", false, "connect with TLS and bind the evidence to the server's TLS key")
	signer := fs.String("signer", "", "expected MRSIGNER, hex (ego signerid)")
	unique := fs.String("unique", "", "expected MRENCLAVE, hex (ego uniqueid)")
	product := fs.Uint("product-id", 1, "expected product id")
	minSVN := fs.Uint("min-svn", 1, "lowest acceptable security version")
	allowDebug := fs.Bool("allow-debug", false, "accept a debug enclave (its memory is readable by the host)")
	allowSim := fs.Bool("allow-simulated", false, "accept simulated evidence, which proves nothing (development only)")
	password := fs.String("a", "", "password (requirepass)")
	fs.Parse(args)

	policy := enclave.Policy{ProductID: uint16(*product), MinSecurityVersion: *minSVN,
		AllowDebug: *allowDebug, AllowSimulated: *allowSim}
	var err error
	if policy.SignerID, err = hex.DecodeString(*signer); err != nil {
		return fmt.Errorf("-signer: %w", err)
	}
	if policy.UniqueID, err = hex.DecodeString(*unique); err != nil {
		return fmt.Errorf("-unique: %w", err)
	}

	addr := net.JoinHostPort(*host, strconv.Itoa(*port))
	var conn net.Conn
	var tlsKey []byte
	if *useTLS {
		// The certificate is self-signed inside the enclave: trust comes
		// from the evidence binding its public key, checked below.
		tc, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr,
			&tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12})
		if err != nil {
			return err
		}
		certs := tc.ConnectionState().PeerCertificates
		if len(certs) == 0 {
			return errors.New("server sent no TLS certificate")
		}
		if tlsKey, err = x509.MarshalPKIXPublicKey(certs[0].PublicKey); err != nil {
			return err
		}
		conn = tc
	} else if conn, err = net.DialTimeout("tcp", addr, 5*time.Second); err != nil {
		return err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	rd := bufio.NewReader(conn)

	if *password != "" {
		if _, err := call(conn, rd, "AUTH", []byte(*password)); err != nil {
			return err
		}
	}
	nonce := make([]byte, 32)
	rand.Read(nonce)
	fmt.Fprintf(out, "server:      %s (tls: %v)\n", addr, *useTLS)
	fmt.Fprintf(out, "nonce:       %x\n", nonce)
	reply, err := call(conn, rd, "AI.ATTEST", nonce)
	if err != nil {
		return err
	}
	fields := reply.Map()
	evidence := fields["evidence"].Bytes()
	fmt.Fprintf(out, "mode:        %s\n", fields["mode"].String())
	fmt.Fprintf(out, "evidence:    %d bytes\n", len(evidence))
	if !*useTLS {
		tlsKey = fields["tls_public_key"].Bytes()
		fmt.Fprintln(out, "warning:     plain TCP: the evidence is bound to the key the server reports, not to this connection")
	}
	res, err := enclave.Verify(evidence, nonce, tlsKey, fields["receipt_public_key"].Bytes(), policy)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "kind:        %s\n", res.Kind)
	fmt.Fprintf(out, "unique id:   %x\n", res.UniqueID)
	fmt.Fprintf(out, "signer id:   %x\n", res.SignerID)
	fmt.Fprintf(out, "product id:  %d, security version %d, debug %v\n", res.ProductID, res.SecurityVersion, res.Debug)
	if res.TCBStatus != "" {
		fmt.Fprintf(out, "TCB status:  %s\n", res.TCBStatus)
	}
	if res.Kind == enclave.KindSimulated {
		fmt.Fprintln(out, "SIMULATED: bound to this nonce and TLS key, accepted only because of -allow-simulated; it proves nothing about the code")
		return nil
	}
	fmt.Fprintln(out, "VERIFIED: the evidence is bound to this nonce and TLS key and satisfies the policy")
	return nil
}

// call sends one command and reads one reply with redcon's RESP parser.
func call(conn net.Conn, rd *bufio.Reader, args ...any) (redcon.RESP, error) {
	var req []byte
	req = redcon.AppendArray(req, len(args))
	for _, a := range args {
		switch v := a.(type) {
		case string:
			req = redcon.AppendBulkString(req, v)
		case []byte:
			req = redcon.AppendBulk(req, v)
		}
	}
	if _, err := conn.Write(req); err != nil {
		return redcon.RESP{}, err
	}
	var buf []byte
	chunk := make([]byte, 64<<10)
	for {
		n, err := rd.Read(chunk)
		buf = append(buf, chunk[:n]...)
		if m, resp := redcon.ReadNextRESP(buf); m > 0 {
			if resp.Type == redcon.Error {
				return resp, errors.New(resp.String())
			}
			return resp, nil
		}
		if err != nil {
			return redcon.RESP{}, err
		}
	}
}
