package server

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math/big"
	"net"
	"path/filepath"
	"strconv"
	"time"

	"github.com/edgelesssys/ego/marble"

	"github.com/enclaveai/enclaveai/cluster"
	"github.com/enclaveai/enclaveai/enclave"
)

// setupEnclave loads the seal key and records the enclave mode. Outside an
// enclave the key comes from a file (or $ENCLAVEAI_SEAL_KEY) and the data
// is only as safe as that file: that is logged loudly and shown in INFO.
func (s *Server) setupEnclave() error {
	keyFile := s.opts.SealKeyFile
	if keyFile != "" && !filepath.IsAbs(keyFile) {
		keyFile = filepath.Join(s.opts.Dir, keyFile)
	}
	policy := enclave.ProductKey
	if s.opts.SealPolicy == "unique" {
		policy = enclave.UniqueKey
	}
	var sk *enclave.SealKey
	var err error
	if s.opts.Marble {
		sk, err = enclave.MarbleSealKey()
	} else {
		sk, err = enclave.LoadSealKey(enclave.SealKeyOptions{Policy: policy, KeyFile: keyFile})
	}
	if err != nil {
		return fmt.Errorf("seal key: %w", err)
	}
	if sk.Warning != "" {
		s.log.Warn("!!! " + sk.Warning + " !!!")
	}
	s.Cmds.Snapshot.SealKey = sk.Key
	s.Cmds.Enclave.Mode = sk.Mode.String()
	s.Cmds.Enclave.SealKeySource = sk.Source
	s.Cmds.Enclave.SealPolicy = policy.String()
	if s.opts.Marble {
		s.Cmds.Enclave.SealPolicy = "marble"
	}
	s.Cmds.Enclave.Warning = sk.Warning
	s.log.Info("enclave layer ready", "mode", sk.Mode.String(), "seal_key", sk.Source)
	return nil
}

// listenTLS opens the TLS listener when tls-port is set (tlsConfig).
func (s *Server) listenTLS() error {
	if s.opts.TLSPort == 0 {
		return nil
	}
	cfg, err := s.tlsConfig()
	if err != nil {
		return err
	}
	addr := net.JoinHostPort(s.opts.Bind, strconv.FormatInt(s.opts.TLSPort, 10))
	ln, err := tls.Listen("tcp", addr, cfg)
	if err != nil {
		return err
	}
	s.tlsLn = ln
	return nil
}

// tlsConfig is the TLS listener's configuration. With no cert and key
// files, a self-signed key pair is generated in memory, so inside an
// enclave the private key never leaves it; clients bind to it through the
// attestation report (AI.ATTEST), not through a CA. A marble serves the
// certificate MarbleRun's Coordinator issued it (marble yes). With
// tls-ca-cert-file, clients are asked for a certificate that chains to it
// as tls-auth-clients says, and under tls-cluster the command layer is
// given the configuration it connects to other nodes with (PeerTLS): the
// CA, and tls-client-cert-file's key pair or else the listener's.
func (s *Server) tlsConfig() (*tls.Config, error) {
	var cert tls.Certificate
	var err error
	switch {
	case s.opts.Marble:
		// The certificate the Coordinator issued this marble: clients
		// that verified the Coordinator trust it through its root CA.
		var cfg *tls.Config
		if cfg, err = marble.GetTLSConfig(false); err == nil {
			cert = cfg.Certificates[0]
		}
	case s.opts.TLSCertFile != "":
		cert, err = tls.LoadX509KeyPair(s.opts.TLSCertFile, s.opts.TLSKeyFile)
	default:
		cert, err = SelfSignedCert()
	}
	if err != nil {
		return nil, fmt.Errorf("TLS key pair: %w", err)
	}
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		return nil, err
	}
	pub, err := x509.MarshalPKIXPublicKey(leaf.PublicKey)
	if err != nil {
		return nil, err
	}
	s.Cmds.Enclave.TLSPublicKey = pub
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if s.opts.TLSCACertFile == "" {
		return cfg, nil // config.Validate refuses tls-cluster without it
	}
	roots, err := cluster.LoadCAs("tls-ca-cert-file", s.opts.TLSCACertFile)
	if err != nil {
		return nil, err
	}
	cfg.ClientCAs = roots
	cfg.ClientAuth = clientAuth[s.opts.TLSAuthClients]
	if s.opts.TLSCluster {
		own := cert
		if s.opts.TLSClientCertFile != "" {
			if own, err = tls.LoadX509KeyPair(s.opts.TLSClientCertFile, s.opts.TLSClientKeyFile); err != nil {
				return nil, fmt.Errorf("tls-client-cert-file: %w", err)
			}
		}
		s.Cmds.PeerTLS = cluster.PeerTLS(roots, own)
		s.log.Info("tls-cluster: slot migrations connect to their targets over TLS, verified against tls-ca-cert-file",
			"tls_auth_clients", s.opts.TLSAuthClients)
	}
	return cfg, nil
}

// clientAuth is what tls-auth-clients asks of a TLS client, with
// tls-ca-cert-file set: Go verifies a certificate that a client presents
// against it, for client authentication.
var clientAuth = map[string]tls.ClientAuthType{
	"yes":      tls.RequireAndVerifyClientCert,
	"optional": tls.VerifyClientCertIfGiven,
	"no":       tls.NoClientCert,
}

// SelfSignedCert returns a fresh P-256 key and a certificate for it,
// signed by itself, for localhost and 127.0.0.1 (the TLS listener's when
// it is given none; bench/loop's Redis over TLS).
func SelfSignedCert() (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "enclaveai"},
		DNSNames:     []string{"localhost", "enclaveai"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}
