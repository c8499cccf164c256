package main

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/enclaveai/enclaveai/enclave"
)

// testCA issues key pairs, written as PEM files, as a cluster's CA does.
type testCA struct {
	t    *testing.T
	dir  string
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	file string // the CA certificate, PEM (-cacert, tls-ca-cert-file)
	pool *x509.CertPool
}

func newCA(t *testing.T, name string) *testCA {
	t.Helper()
	ca := &testCA{t: t, dir: t.TempDir()}
	ca.key = newKey(t)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &ca.key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	if ca.cert, err = x509.ParseCertificate(der); err != nil {
		t.Fatal(err)
	}
	ca.pool = x509.NewCertPool()
	ca.pool.AddCert(ca.cert)
	ca.file = ca.write(name+".ca.pem", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	return ca
}

func newKey(t *testing.T) *ecdsa.PrivateKey {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func (ca *testCA) write(name string, b []byte) string {
	path := filepath.Join(ca.dir, name)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		ca.t.Fatal(err)
	}
	return path
}

// issue makes a key pair for name, valid for dnsNames: its certificate
// and key files, and the pair.
func (ca *testCA) issue(name string, dnsNames ...string) (certFile, keyFile string, pair tls.Certificate) {
	key := newKey(ca.t)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), DNSNames: dnsNames}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		ca.t.Fatal(err)
	}
	kb, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		ca.t.Fatal(err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kb})
	return ca.write(name+".pem", certPEM), ca.write(name+".key", keyPEM),
		tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// startCANode is a fake node whose TLS listener serves a certificate of ca
// (for node.example) and asks clients for one of ca, as a node with
// tls-ca-cert-file and tls-auth-clients yes does; maxVersion caps its TLS
// version (0: 1.3).
func startCANode(t *testing.T, ca *testCA, maxVersion uint16) *fakeServer {
	_, _, pair := ca.issue("node", "node.example")
	return startFakeTLS(t, &tls.Config{Certificates: []tls.Certificate{pair}, ClientCAs: ca.pool,
		ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12, MaxVersion: maxVersion},
		func(nonce, key []byte) []byte { return attestReply(t, nonce, key, key) })
}

func TestTLSClientCertificates(t *testing.T) {
	if enclave.Mode() != enclave.Simulation {
		t.Skip("the fake makes simulated evidence: run outside an enclave")
	}
	ca, other := newCA(t, "cluster CA"), newCA(t, "another CA")
	cert, key, _ := ca.issue("client")
	otherCert, otherKey, _ := other.issue("stranger")
	// One file holding both the certificate and its key: -key defaults to it.
	both := ca.write("both.pem", append(must(os.ReadFile(cert)), must(os.ReadFile(key))...))
	tests := []struct {
		name      string
		flags     []string
		wantErr   string // "" for success
		presented []string
	}{
		{"ca and client certificate", []string{"-tls", "-cacert", ca.file, "-cert", cert, "-key", key}, "", []string{"client"}},
		{"key in the certificate's file", []string{"-tls", "-cacert", ca.file, "-cert", both}, "", []string{"client"}},
		{"server name checked with -sni", []string{"-tls", "-cacert", ca.file, "-sni", "node.example", "-cert", cert, "-key", key}, "", []string{"client"}},
		// Without -cacert the attestation alone vouches for the server, as before.
		{"no ca: attestation only", []string{"-tls", "-cert", cert, "-key", key}, "", []string{"client"}},
		{"server of another ca", []string{"-tls", "-cacert", other.file, "-cert", cert, "-key", key},
			"the server's certificate (CN=node) does not verify against -cacert " + other.file + ": x509: certificate signed by unknown authority", nil},
		{"another server name", []string{"-tls", "-cacert", ca.file, "-sni", "other.example", "-cert", cert, "-key", key},
			"does not verify against -cacert " + ca.file + ": x509: certificate is valid for node.example, not other.example", nil},
		{"no client certificate", []string{"-tls", "-cacert", ca.file},
			"the server wants a client certificate (tls-auth-clients): give -cert and its key", nil},
		{"client certificate of another ca", []string{"-tls", "-cacert", ca.file, "-cert", otherCert, "-key", otherKey},
			"the server refused this client's certificate", nil},
	}
	// With TLS 1.3 the server's verdict on the client's certificate comes
	// after the client's handshake, at its first read; with 1.2, in it.
	for _, version := range []uint16{tls.VersionTLS13, tls.VersionTLS12} {
		node := startCANode(t, ca, version)
		for _, tc := range tests {
			t.Run(tls.VersionName(version)+"/"+tc.name, func(t *testing.T) {
				before := len(node.presented())
				out, err := runAttest(node, append(tc.flags, "-allow-simulated")...)
				if tc.wantErr == "" {
					if err != nil {
						t.Fatalf("attest: %v; output:\n%s", err, out)
					}
					if !strings.Contains(out, "SIMULATED: bound to this nonce and TLS key") {
						t.Errorf("output:\n%s", out)
					}
				} else if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("attest error %v, want %q; output:\n%s", err, tc.wantErr, out)
				}
				if got := node.presented()[before:]; !slices.Equal(got, tc.presented) {
					t.Errorf("the server accepted client certificates %q, want %q", got, tc.presented)
				}
			})
		}
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestTLSFlagErrors: flags that cannot work are refused before anything
// is dialled, naming the flag.
func TestTLSFlagErrors(t *testing.T) {
	ca := newCA(t, "cluster CA")
	cert, key, _ := ca.issue("client")
	notPEM := ca.write("not.pem", []byte("not a certificate"))
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-cacert", ca.file}, "-cacert, -cert, -key and -sni need -tls"},
		{[]string{"-cert", cert, "-key", key}, "need -tls"},
		{[]string{"-tls", "-key", key}, "-key needs -cert"},
		{[]string{"-tls", "-cert", cert}, "-cert " + cert + ", -key " + cert + ": tls: found a certificate rather than a key"},
		{[]string{"-tls", "-cert", filepath.Join(ca.dir, "none.pem"), "-key", key}, "no such file"},
		{[]string{"-tls", "-cacert", notPEM}, "-cacert " + notPEM + ": no PEM certificate in it"},
		{[]string{"-tls", "-cacert", filepath.Join(ca.dir, "none.pem")}, "-cacert: open"},
	} {
		// Port 1: nothing listens, so an error that is not the flags' is
		// a refused connection.
		args := append([]string{"-port", "1"}, tc.args...)
		if err := info(args, &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("info %v: error %v, want %q", tc.args, err, tc.want)
		}
		if err := clusterCmd(append([]string{"show"}, append(tc.args, "127.0.0.1:1")...), &bytes.Buffer{}); err == nil ||
			!strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "127.0.0.1:1") {
			t.Errorf("cluster show %v: error %v, want %q, before any node is dialled", tc.args, err, tc.want)
		}
	}
}

// TestUploadCertKey: upload's -key names the model, so its client key is
// -cert-key; both reach their use.
func TestUploadCertKey(t *testing.T) {
	ca := newCA(t, "cluster CA")
	cert, key, _ := ca.issue("uploader")
	node := startCANode(t, ca, 0)
	model := filepath.Join(t.TempDir(), "m.onnx")
	if err := os.WriteFile(model, []byte("model"), 0o600); err != nil {
		t.Fatal(err)
	}
	// The fake knows no AI.CONFIG: reaching it means the TLS connection,
	// with the certificate, was made.
	err := upload([]string{"-port", strconv.Itoa(node.port), "-tls", "-cacert", ca.file, "-cert", cert, "-cert-key", key,
		"-no-attest", "-key", "m", model}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "unknown command") {
		t.Fatalf("upload: %v, want the fake's unknown command", err)
	}
	if got := node.presented(); !slices.Equal(got, []string{"uploader"}) {
		t.Errorf("client certificates %q, want uploader's", got)
	}
}

// TestClusterTLS: the cluster subcommands take the same TLS flags and
// dial every node with them.
func TestClusterTLS(t *testing.T) {
	ca := newCA(t, "cluster CA")
	cert, key, _ := ca.issue("admin")
	a, b := startCANode(t, ca, 0), startCANode(t, ca, 0)
	addrs := []string{"127.0.0.1:" + strconv.Itoa(a.port), "127.0.0.1:" + strconv.Itoa(b.port)}
	var out bytes.Buffer
	args := append([]string{"show", "-tls", "-cacert", ca.file, "-cert", cert, "-key", key}, addrs...)
	if err := clusterCmd(args, &out); err != nil {
		t.Fatalf("cluster show: %v; output:\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), addrs[1]+": version 3\n") || !strings.HasSuffix(out.String(), "all nodes agree\n") {
		t.Errorf("cluster show output:\n%s", out.String())
	}
	for _, n := range []*fakeServer{a, b} {
		if got := n.presented(); !slices.Equal(got, []string{"admin"}) {
			t.Errorf("node %d: client certificates %q, want admin's", n.port, got)
		}
	}
	err := clusterCmd(append([]string{"show", "-tls", "-cacert", ca.file}, addrs...), &out)
	if err == nil || !strings.Contains(err.Error(), addrs[0]+": the server wants a client certificate") {
		t.Errorf("cluster show without -cert: %v", err)
	}
	// Without -tls a TLS port answers nothing a client can read.
	if err := clusterCmd(append([]string{"show"}, addrs...), &out); err == nil {
		t.Error("cluster show over plain TCP to a TLS port succeeded")
	}
}
