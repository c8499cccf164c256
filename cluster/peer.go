package cluster

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"time"
)

// PeerTLS is the TLS configuration with which a node connects to another
// under tls-cluster (a slot migration's source to its target). The other
// node's certificate must chain to roots (tls-ca-cert-file) and allow
// server authentication; its host name is not compared with the address,
// as Redis compares none between nodes: the topology names nodes by IP
// address, which a node's certificate need not carry. cert is presented
// whatever CAs the other node says it accepts, so that one that refuses
// it says why in its own terms rather than finding no certificate.
func PeerTLS(roots *x509.CertPool, cert tls.Certificate) *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		// Go's own verification would compare the host name too: the
		// chain is verified in VerifyConnection instead, which runs on
		// every handshake, before anything is sent over the connection.
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			return verifyChain(roots, cs.PeerCertificates, x509.ExtKeyUsageServerAuth)
		},
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return &cert, nil
		},
	}
}

// verifyChain checks that certs[0], with the intermediates that follow it,
// chains to roots and allows usage (a certificate without extended key
// usages allows any).
func verifyChain(roots *x509.CertPool, certs []*x509.Certificate, usage x509.ExtKeyUsage) error {
	if err := VerifyChain(roots, certs, usage, ""); err != nil {
		if len(certs) == 0 {
			return errors.New("the node sent no certificate")
		}
		return fmt.Errorf("the node's certificate (%s) does not chain to tls-ca-cert-file: %w", certs[0].Subject, err)
	}
	return nil
}

// VerifyChain checks that certs[0], with the intermediates that follow
// it, chains to roots, allows usage (a certificate without extended key
// usages allows any) and, when name is not empty, carries name. It is the
// check of a peer's certificate wherever one is checked against a CA
// file rather than by Go's own verification, which compares a host name
// (nodes, and enclaveai-cli's -cacert without -sni). The error is x509's,
// for the caller to name what failed; ErrNoCertificate when there is no
// certificate.
func VerifyChain(roots *x509.CertPool, certs []*x509.Certificate, usage x509.ExtKeyUsage, name string) error {
	if len(certs) == 0 {
		return ErrNoCertificate
	}
	inter := x509.NewCertPool()
	for _, c := range certs[1:] {
		inter.AddCert(c)
	}
	_, err := certs[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, DNSName: name, KeyUsages: []x509.ExtKeyUsage{usage}})
	return err
}

// ErrNoCertificate is VerifyChain's error for a peer that sent none.
var ErrNoCertificate = errors.New("no certificate")

// LoadCAs reads a PEM file of CA certificates (path, given as what: a
// directive or a flag, which the errors name).
func LoadCAs(what, path string) (*x509.CertPool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("%s %s: no PEM certificate in it", what, path)
	}
	return pool, nil
}

// DialPeer connects to another node at addr: over TLS with cfg (PeerTLS),
// the handshake done and the node's certificate verified before it
// returns, or over plain TCP when cfg is nil. timeout bounds the
// connection and the handshake together.
func DialPeer(addr string, cfg *tls.Config, timeout time.Duration) (net.Conn, error) {
	d := &net.Dialer{Timeout: timeout}
	if cfg == nil {
		return d.Dial("tcp", addr)
	}
	conn, err := tls.DialWithDialer(d, "tcp", addr, cfg)
	if err != nil {
		return nil, fmt.Errorf("TLS to %s: %w", addr, err)
	}
	return conn, nil
}
