package cluster

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"io"
	"math/big"
	"net"
	"strings"
	"testing"
	"time"
)

// testCA is a CA that issues node certificates.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

func newTestCA(t *testing.T, name string) *testCA {
	t.Helper()
	ca := &testCA{key: mustKey(t)}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &ca.key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	if ca.cert, err = x509.ParseCertificate(der); err != nil {
		t.Fatal(err)
	}
	ca.pool = x509.NewCertPool()
	ca.pool.AddCert(ca.cert)
	return ca
}

// issue makes a node's key pair, for the name given (never the address it
// is reached at: the chain is what counts) and the usages given (none: any).
func (ca *testCA) issue(t *testing.T, name string, usages ...x509.ExtKeyUsage) tls.Certificate {
	t.Helper()
	key := mustKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		DNSNames: []string{name}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: usages,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

func mustKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// target is a TLS listener standing for a migration's target, which
// requires a client certificate of clientCAs. got receives what each
// connection's client sent, or its handshake's error.
func target(t *testing.T, cert tls.Certificate, clientCAs *x509.CertPool) (addr string, got chan string) {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert},
		ClientCAs: clientCAs, ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	got = make(chan string, 4)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.SetDeadline(time.Now().Add(5 * time.Second))
			b, err := io.ReadAll(c)
			if err != nil {
				got <- "error: " + err.Error()
			} else {
				got <- string(b)
			}
			c.Close()
		}
	}()
	return ln.Addr().String(), got
}

// A source dials a target of the cluster's CA and reaches it, whatever name
// the target's certificate carries; a target whose certificate comes from
// another CA, or allows client authentication only, is refused before
// anything is sent to it.
func TestDialPeer(t *testing.T) {
	ca, other := newTestCA(t, "cluster CA"), newTestCA(t, "another CA")
	source := PeerTLS(ca.pool, ca.issue(t, "node-a", x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth))

	t.Run("the cluster's CA", func(t *testing.T) {
		addr, got := target(t, ca.issue(t, "node-b.example"), ca.pool)
		conn, err := DialPeer(addr, source, 5*time.Second)
		if err != nil {
			t.Fatalf("DialPeer: %v", err)
		}
		if _, ok := conn.(*tls.Conn); !ok {
			t.Fatalf("DialPeer returned a %T, want a *tls.Conn", conn)
		}
		conn.Write([]byte("AUTH node pw"))
		conn.Close()
		if s := <-got; s != "AUTH node pw" {
			t.Fatalf("the target got %q", s)
		}
	})
	for _, c := range []struct {
		name string
		cert tls.Certificate
		want string
	}{
		{"another CA", other.issue(t, "node-b"), "does not chain to tls-ca-cert-file"},
		{"client authentication only", ca.issue(t, "node-b", x509.ExtKeyUsageClientAuth), "incompatible key usage"},
	} {
		t.Run(c.name, func(t *testing.T) {
			addr, got := target(t, c.cert, ca.pool)
			conn, err := DialPeer(addr, source, 5*time.Second)
			if err == nil {
				conn.Close()
				t.Fatal("DialPeer reached a target whose certificate it should refuse")
			}
			if !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "TLS to "+addr) {
				t.Fatalf("DialPeer: %v, want an error naming the address and %q", err, c.want)
			}
			if s := <-got; !strings.HasPrefix(s, "error: ") {
				t.Fatalf("the target got %q, want nothing but a failed handshake", s)
			}
		})
	}

	// A source whose own certificate the target's CA did not issue is
	// refused by the target: its first read fails and nothing arrives.
	t.Run("the source's certificate from another CA", func(t *testing.T) {
		addr, got := target(t, ca.issue(t, "node-b"), ca.pool)
		stranger := PeerTLS(ca.pool, other.issue(t, "node-x"))
		conn, err := DialPeer(addr, stranger, 5*time.Second)
		if err == nil { // TLS 1.3: the client's handshake ends before the server checks it
			conn.Write([]byte("AUTH node pw"))
			_, err = conn.Read(make([]byte, 1))
			conn.Close()
		}
		if err == nil || !strings.Contains(err.Error(), "certificate") {
			t.Fatalf("the source's first read: %v, want the target's refusal of its certificate", err)
		}
		if s := <-got; !strings.Contains(s, "certificate") {
			t.Fatalf("the target got %q, want a refused certificate", s)
		}
	})

	// Without tls-cluster the dial is plain TCP.
	t.Run("plain", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		conn, err := DialPeer(ln.Addr().String(), nil, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if _, ok := conn.(*net.TCPConn); !ok {
			t.Fatalf("DialPeer(nil) returned a %T, want a *net.TCPConn", conn)
		}
	})
}
