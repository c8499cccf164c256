package server

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log/slog"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/enclaveai/enclaveai/config"
)

// pemCA is a test CA whose certificate and issued key pairs are files.
type pemCA struct {
	dir  string
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	file string // the CA certificate's PEM file
}

func newPEMCA(t *testing.T, name string) *pemCA {
	t.Helper()
	ca := &pemCA{dir: t.TempDir(), key: genKey(t)}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &ca.key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	ca.cert, _ = x509.ParseCertificate(der)
	ca.file = writePEM(t, ca.dir, "ca.pem", "CERTIFICATE", der)
	return ca
}

// issue writes a key pair for name, issued by ca: its cert and key files.
func (ca *pemCA) issue(t *testing.T, name string) (certFile, keyFile string) {
	t.Helper()
	key := genKey(t)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return writePEM(t, ca.dir, name+".pem", "CERTIFICATE", der), writePEM(t, ca.dir, name+".key", "PRIVATE KEY", kder)
}

func genKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func writePEM(t *testing.T, dir, name, typ string, der []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func keyPair(t *testing.T, certFile, keyFile string) tls.Certificate {
	t.Helper()
	c, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// tlsServer is a Server with options set by args, and its TLS listener
// on a port of its own (tlsConfig); the peer certificate's CN of each
// accepted connection that completes a handshake, or the handshake's
// error, arrives on got.
func tlsServer(t *testing.T, args ...string) (s *Server, addr string, got chan string) {
	t.Helper()
	opts, err := config.Load(append([]string{"--tls-port", "1"}, args...))
	if err != nil {
		t.Fatal(err)
	}
	s = New(opts, slog.New(slog.NewTextHandler(io.Discard, nil)))
	t.Cleanup(s.Cmds.Queue.Close)
	cfg, err := s.tlsConfig()
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	got = make(chan string, 8)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			tc := c.(*tls.Conn)
			tc.SetDeadline(time.Now().Add(5 * time.Second))
			if err := tc.Handshake(); err != nil {
				got <- "error: " + err.Error()
			} else if certs := tc.ConnectionState().PeerCertificates; len(certs) > 0 {
				got <- certs[0].Subject.CommonName
			} else {
				got <- "no certificate"
			}
			c.Close()
		}
	}()
	return s, ln.Addr().String(), got
}

// dial connects to addr as a TLS client presenting certs (none: nil),
// whatever CAs the server says it accepts.
func dial(t *testing.T, addr string, certs ...tls.Certificate) {
	t.Helper()
	present := func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
		if len(certs) == 0 {
			return &tls.Certificate{}, nil
		}
		return &certs[0], nil
	}
	c, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true, GetClientCertificate: present, MinVersion: tls.VersionTLS12})
	if err == nil {
		c.Read(make([]byte, 1)) // TLS 1.3: a refusal arrives after the client's handshake
		c.Close()
	}
}

// tls-auth-clients, once tls-ca-cert-file is set: yes asks every client for
// a certificate of that CA, optional checks one that a client presents,
// no asks none; without a CA file, nothing is asked (as before these
// directives). Under tls-cluster the node connects to others with
// tls-client-cert-file's key pair, or else its listener's.
func TestTLSClientAuth(t *testing.T) {
	ca, other := newPEMCA(t, "cluster CA"), newPEMCA(t, "another CA")
	nodeCert, nodeKey := ca.issue(t, "node")
	clientCert, clientKey := ca.issue(t, "client")
	strangerCert, strangerKey := other.issue(t, "stranger")
	good, stranger := keyPair(t, clientCert, clientKey), keyPair(t, strangerCert, strangerKey)
	node := []string{"--tls-cert-file", nodeCert, "--tls-key-file", nodeKey}
	withCA := append([]string{"--tls-ca-cert-file", ca.file}, node...)

	for _, c := range []struct {
		name string
		args []string
		// what the listener makes of a client without a certificate, one
		// of the CA, one of another CA
		none, good, stranger string
	}{
		{"default, no CA", node, "no certificate", "no certificate", "no certificate"},
		{"yes by default", withCA, "error: tls: client didn't provide a certificate", "client", "error: tls: failed to verify certificate"},
		{"optional", append([]string{"--tls-auth-clients", "optional"}, withCA...), "no certificate", "client", "error: tls: failed to verify certificate"},
		{"no", append([]string{"--tls-auth-clients", "no"}, withCA...), "no certificate", "no certificate", "no certificate"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, addr, got := tlsServer(t, c.args...)
			for _, r := range []struct {
				certs []tls.Certificate
				want  string
			}{{nil, c.none}, {[]tls.Certificate{good}, c.good}, {[]tls.Certificate{stranger}, c.stranger}} {
				dial(t, addr, r.certs...)
				if s := <-got; !strings.HasPrefix(s, r.want) {
					t.Errorf("a client presenting %d certificates: %q, want %q", len(r.certs), s, r.want)
				}
			}
			if s.Cmds.PeerTLS != nil {
				t.Error("PeerTLS set without tls-cluster")
			}
		})
	}

	// A node under tls-cluster reaches another of the CA, presenting its
	// listener's certificate, or tls-client-cert-file's when it is set.
	_, addr, got := tlsServer(t, withCA...)
	for _, c := range []struct {
		args []string
		cn   string
	}{
		{withCA, "node"},
		{append([]string{"--tls-client-cert-file", clientCert, "--tls-client-key-file", clientKey}, withCA...), "client"},
	} {
		src, _, _ := tlsServer(t, append([]string{"--tls-cluster", "yes"}, c.args...)...)
		if src.Cmds.PeerTLS == nil {
			t.Fatal("no PeerTLS under tls-cluster")
		}
		conn, err := tls.Dial("tcp", addr, src.Cmds.PeerTLS)
		if err != nil {
			t.Fatalf("a node of the CA: %v", err)
		}
		conn.Close()
		if s := <-got; s != c.cn {
			t.Errorf("the target saw %q, want %q", s, c.cn)
		}
	}
}

// A CA file that holds no certificate stops the start, naming the directive.
func TestTLSCAFileErrors(t *testing.T) {
	empty := filepath.Join(t.TempDir(), "empty.pem")
	os.WriteFile(empty, []byte("not a certificate\n"), 0o600)
	for _, c := range []struct{ file, want string }{
		{empty, "tls-ca-cert-file " + empty + ": no PEM certificate in it"},
		{filepath.Join(t.TempDir(), "missing.pem"), "tls-ca-cert-file: open "},
	} {
		opts, err := config.Load([]string{"--tls-port", "1", "--tls-ca-cert-file", c.file})
		if err != nil {
			t.Fatal(err)
		}
		s := New(opts, slog.New(slog.NewTextHandler(io.Discard, nil)))
		_, err = s.tlsConfig()
		s.Cmds.Queue.Close()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("tlsConfig: %v, want %q", err, c.want)
		}
	}
}
