package main

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math/big"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/redcon"

	"github.com/enclaveai/enclaveai/enclave"
)

// fakeServer answers AI.ATTEST on a TLS (or plain) listener the way the
// server does, with what evidence(nonce, key) returns: an honest server
// binds it to the nonce and to its own TLS key; the dishonest ones below do
// not, and attest must refuse them.
type fakeServer struct {
	port   int
	tlsKey []byte // DER SubjectPublicKeyInfo of the listener's key; nil for plain TCP

	mu      sync.Mutex
	clients []string // with TLS, the common name of each client certificate presented
}

// presented is the common names of the client certificates it was shown.
func (fs *fakeServer) presented() []string {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return slices.Clone(fs.clients)
}

type evidenceFunc func(nonce, tlsKey []byte) (reply []byte)

func startFake(t *testing.T, useTLS bool, evidence evidenceFunc) *fakeServer {
	t.Helper()
	if !useTLS {
		return startFakeTLS(t, nil, evidence)
	}
	cert, _ := selfSigned(t)
	return startFakeTLS(t, &tls.Config{Certificates: []tls.Certificate{cert}}, evidence)
}

// startFakeTLS is startFake with the TLS configuration given (nil: plain
// TCP); it also answers CLUSTERX VERSION and CLUSTER NODES as one node
// of a cluster that serves every slot.
func startFakeTLS(t *testing.T, cfg *tls.Config, evidence evidenceFunc) *fakeServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fs := &fakeServer{port: ln.Addr().(*net.TCPAddr).Port}
	if cfg != nil {
		leaf, err := x509.ParseCertificate(cfg.Certificates[0].Certificate[0])
		if err != nil {
			t.Fatal(err)
		}
		if fs.tlsKey, err = x509.MarshalPKIXPublicKey(leaf.PublicKey); err != nil {
			t.Fatal(err)
		}
		ln = tls.NewListener(ln, cfg)
	}
	t.Cleanup(func() { ln.Close() })
	nodes := fmt.Sprintf("%040d 10.0.0.1:6379@16379 myself,master - 0 0 3 connected 0-16383\n", 1)
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				if tc, ok := conn.(*tls.Conn); ok {
					if tc.Handshake() != nil {
						return
					}
					if certs := tc.ConnectionState().PeerCertificates; len(certs) > 0 {
						fs.mu.Lock()
						fs.clients = append(fs.clients, certs[0].Subject.CommonName)
						fs.mu.Unlock()
					}
				}
				rd := redcon.NewReader(conn)
				for {
					cmd, err := rd.ReadCommand()
					if err != nil {
						return
					}
					var out []byte
					switch strings.ToUpper(string(cmd.Args[0])) {
					case "AI.ATTEST":
						out = evidence(cmd.Args[1], fs.tlsKey)
					case "AUTH":
						out = redcon.AppendOK(nil)
					case "CLUSTERX":
						out = redcon.AppendInt(nil, 3)
					case "CLUSTER":
						out = redcon.AppendBulkString(nil, nodes)
					default:
						out = redcon.AppendError(nil, "ERR unknown command")
					}
					conn.Write(out)
				}
			}()
		}
	}()
	return fs
}

func selfSigned(t *testing.T) (tls.Certificate, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "fake"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, pub
}

// attestReply is AI.ATTEST's reply as the server writes it in RESP2.
func attestReply(t *testing.T, nonce, boundKey, reportedKey []byte) []byte {
	ev, err := enclave.Attest(nonce, boundKey, nil)
	if err != nil {
		t.Error(err)
		return redcon.AppendError(nil, "ERR attestation failed")
	}
	b, err := ev.MarshalBinary()
	if err != nil {
		t.Error(err)
	}
	out := redcon.AppendArray(nil, 6)
	out = redcon.AppendBulkString(out, "mode")
	out = redcon.AppendBulkString(out, "simulation")
	out = redcon.AppendBulkString(out, "evidence")
	out = redcon.AppendBulk(out, b)
	out = redcon.AppendBulkString(out, "tls_public_key")
	return redcon.AppendBulk(out, reportedKey)
}

func runAttest(fs *fakeServer, extra ...string) (string, error) {
	var out bytes.Buffer
	args := append([]string{"-port", strconv.Itoa(fs.port)}, extra...)
	err := attest(args, &out)
	return out.String(), err
}

func TestAttest(t *testing.T) {
	if enclave.Mode() != enclave.Simulation {
		t.Skip("these fakes make simulated evidence: run outside an enclave")
	}
	otherKey := func() []byte { _, k := selfSigned(t); return k }()
	honest := func(nonce, key []byte) []byte { return attestReply(t, nonce, key, key) }
	tests := []struct {
		name     string
		tls      bool
		evidence evidenceFunc
		flags    []string
		want     error  // nil: accepted
		wantOut  string // in the output
	}{
		{"tls allowed", true, honest, []string{"-tls", "-allow-simulated"}, nil, "SIMULATED: bound to this nonce and TLS key"},
		{"tls refused", true, honest, []string{"-tls"}, enclave.ErrSimulated, "mode:        simulation"},
		{"plain allowed", false, honest, []string{"-allow-simulated"}, nil, "plain TCP"},
		{"plain refused", false, honest, nil, enclave.ErrSimulated, "plain TCP"},
		// A man in the middle terminates TLS with its own key and relays
		// evidence bound to the real server's key.
		{"other tls key", true, func(nonce, key []byte) []byte { return attestReply(t, nonce, otherKey, otherKey) },
			[]string{"-tls", "-allow-simulated"}, enclave.ErrBinding, ""},
		// ... or reports its own key while the evidence names another.
		{"reported key differs", true, func(nonce, key []byte) []byte { return attestReply(t, nonce, otherKey, key) },
			[]string{"-tls", "-allow-simulated"}, enclave.ErrBinding, ""},
		// Old evidence replayed for a different nonce.
		{"replayed nonce", true, func(nonce, key []byte) []byte {
			return attestReply(t, bytes.Repeat([]byte{7}, 32), key, key)
		}, []string{"-tls", "-allow-simulated"}, enclave.ErrBinding, ""},
		{"garbage evidence", true, func(nonce, key []byte) []byte {
			out := redcon.AppendArray(nil, 4)
			out = redcon.AppendBulkString(out, "mode")
			out = redcon.AppendBulkString(out, "sgx")
			out = redcon.AppendBulkString(out, "evidence")
			return redcon.AppendBulkString(out, "not evidence")
		}, []string{"-tls", "-allow-simulated"}, enclave.ErrEvidenceFormat, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fs := startFake(t, tc.tls, tc.evidence)
			out, err := runAttest(fs, tc.flags...)
			if tc.want == nil && err != nil {
				t.Fatalf("attest: %v; output:\n%s", err, out)
			}
			if tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("attest error %v, want %v; output:\n%s", err, tc.want, out)
			}
			if tc.want != nil && strings.Contains(out, "SIMULATED:") {
				t.Errorf("refused evidence reported as accepted:\n%s", out)
			}
			if !strings.Contains(out, tc.wantOut) {
				t.Errorf("output lacks %q:\n%s", tc.wantOut, out)
			}
		})
	}
}

func TestAttestServerError(t *testing.T) {
	fs := startFake(t, false, func(nonce, key []byte) []byte {
		return redcon.AppendError(nil, "ERR attestation failed: see the server log")
	})
	_, err := runAttest(fs, "-allow-simulated")
	if err == nil || !strings.Contains(err.Error(), "attestation failed") {
		t.Fatalf("attest error %v, want the server's error", err)
	}
}

func TestAttestBadFlags(t *testing.T) {
	fs := startFake(t, false, nil)
	for _, flags := range [][]string{{"-signer", "zz"}, {"-unique", "xyz"}} {
		if _, err := runAttest(fs, flags...); err == nil {
			t.Errorf("%v: accepted", flags)
		}
	}
}
