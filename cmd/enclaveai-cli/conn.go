package main

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"strconv"
	"syscall"
	"time"

	"github.com/tidwall/redcon"

	"github.com/enclaveai/enclaveai/cluster"
)

// connFlags are the flags that say how to reach the server.
type connFlags struct {
	host, password, user string
	port                 int
	tls                  bool
	tlsFlags
}

// tlsFlags are the TLS flags, redis-cli's --cacert, --cert, --key and
// --sni: which CA the server's certificate must chain to and which
// certificate this client presents (a node with tls-ca-cert-file and
// tls-auth-clients yes asks every client for one of its CA).
type tlsFlags struct {
	caCert, cert, key, sni string
	keyFlag                string      // the name of the key's flag: -key, or -cert-key where -key names a model
	cfg                    *tls.Config // from the flags, made once by load
}

// register adds the connection flags to fs; attests says whether the
// subcommand checks the server's evidence (which -tls then binds to the
// connection's key), keyFlag names the flag of the client certificate's
// key ("key", or "cert-key" in upload, whose -key is the model's key).
func (cf *connFlags) register(fs *flag.FlagSet, attests bool, keyFlag string) {
	fs.StringVar(&cf.host, "host", "127.0.0.1", "server host")
	fs.IntVar(&cf.port, "port", 6379, "server port (the tls-port with -tls)")
	tlsUsage := "connect with TLS (the certificate is not checked unless -cacert is given: this subcommand does not attest the server)"
	if attests {
		tlsUsage = "connect with TLS and bind the evidence to the server's TLS key"
	}
	fs.BoolVar(&cf.tls, "tls", false, tlsUsage)
	fs.StringVar(&cf.password, "a", "", "password (requirepass, or the user's with -user)")
	fs.StringVar(&cf.user, "user", "", "user name for AUTH")
	cf.tlsFlags.register(fs, keyFlag)
}

// register adds -cacert, -cert, the key's flag and -sni to fs.
func (tf *tlsFlags) register(fs *flag.FlagSet, keyFlag string) {
	tf.keyFlag = keyFlag
	fs.StringVar(&tf.caCert, "cacert", "", "with -tls: PEM file of the CAs the server's certificate must chain to (its chain is checked, not its name unless -sni is given, as the nodes check each other's)")
	fs.StringVar(&tf.cert, "cert", "", "with -tls: PEM client certificate to present (a server with tls-ca-cert-file and tls-auth-clients yes needs one of that CA)")
	fs.StringVar(&tf.key, keyFlag, "", "with -tls: PEM private key of -cert (default: -cert's file, if it holds the key too)")
	fs.StringVar(&tf.sni, "sni", "", "with -tls: server name to send (SNI); with -cacert, the server's certificate must carry it")
}

// load checks the TLS flags and, with tls, reads their files into the
// configuration every connection uses. Without -cacert the server's
// certificate is not checked here: an enclave's is self-signed, and trust
// comes from the evidence that binds its public key (attest).
func (tf *tlsFlags) load(useTLS bool) error {
	if tf.cfg != nil {
		return nil
	}
	if !useTLS {
		if tf.caCert != "" || tf.cert != "" || tf.key != "" || tf.sni != "" {
			return fmt.Errorf("-cacert, -cert, -%s and -sni need -tls", tf.keyFlag)
		}
		return nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: tf.sni,
		// Go's own check would compare the host name with the address
		// and want a CA even without -cacert: verifyServer checks the
		// chain, in VerifyConnection, which runs on every handshake.
		InsecureSkipVerify: true}
	if tf.caCert != "" {
		roots, err := cluster.LoadCAs("-cacert", tf.caCert)
		if err != nil {
			return err
		}
		name, file := tf.sni, tf.caCert
		cfg.VerifyConnection = func(cs tls.ConnectionState) error {
			return verifyServer(roots, name, file, cs.PeerCertificates)
		}
	}
	switch {
	case tf.cert != "":
		keyFile := tf.key
		if keyFile == "" {
			keyFile = tf.cert
		}
		pair, err := tls.LoadX509KeyPair(tf.cert, keyFile)
		if err != nil {
			return fmt.Errorf("-cert %s, -%s %s: %w", tf.cert, tf.keyFlag, keyFile, err)
		}
		// Presented whatever CAs the server says it accepts, so that a
		// server that refuses it says why (Go would send none where the
		// server's list leaves its CA out).
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &pair, nil }
	case tf.key != "":
		return fmt.Errorf("-%s needs -cert", tf.keyFlag)
	}
	tf.cfg = cfg
	return nil
}

// verifyServer checks that certs[0], with the intermediates that follow
// it, chains to roots (-cacert, read from file), for server
// authentication, and carries name when one is given (-sni).
func verifyServer(roots *x509.CertPool, name, file string, certs []*x509.Certificate) error {
	if err := cluster.VerifyChain(roots, certs, x509.ExtKeyUsageServerAuth, name); err != nil {
		if len(certs) == 0 {
			return errors.New("the server sent no certificate")
		}
		return fmt.Errorf("the server's certificate (%s) does not verify against -cacert %s: %w", certs[0].Subject, file, err)
	}
	return nil
}

// client is one connection to the server.
type client struct {
	addr      string
	conn      net.Conn
	rd        *bufio.Reader
	tls       bool
	tlsKey    []byte // DER SubjectPublicKeyInfo of the peer's certificate, with TLS
	asked     bool   // with TLS, whether the server asked for a client certificate
	presented bool   // ... and this client sent one (-cert)
	replied   bool   // whether a reply has been read
}

// dial connects and authenticates (AUTH, with -a).
func (cf *connFlags) dial() (*client, error) {
	c, err := cf.connect()
	if err != nil {
		return nil, err
	}
	if err := cf.auth(c); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// connect opens the connection, with TLS under -tls, and sends nothing.
// With -cacert the server's certificate has been verified when it
// returns; whether the server accepts this client's (or its lack of one)
// shows with TLS 1.3 only at the first reply (explain).
func (cf *connFlags) connect() (*client, error) {
	if err := cf.load(cf.tls); err != nil {
		return nil, err
	}
	addr := net.JoinHostPort(cf.host, strconv.Itoa(cf.port))
	c := &client{addr: addr, tls: cf.tls}
	var err error
	if cf.tls {
		cfg := cf.cfg.Clone()
		present := cfg.GetClientCertificate
		cfg.GetClientCertificate = func(cri *tls.CertificateRequestInfo) (*tls.Certificate, error) {
			c.asked, c.presented = true, present != nil
			if present == nil {
				return &tls.Certificate{}, nil // none
			}
			return present(cri)
		}
		tc, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
		if err != nil {
			return nil, c.explain(fmt.Errorf("TLS to %s: %w", addr, err))
		}
		certs := tc.ConnectionState().PeerCertificates
		if len(certs) == 0 {
			tc.Close()
			return nil, errors.New("server sent no TLS certificate")
		}
		if c.tlsKey, err = x509.MarshalPKIXPublicKey(certs[0].PublicKey); err != nil {
			tc.Close()
			return nil, err
		}
		c.conn = tc
	} else if c.conn, err = net.DialTimeout("tcp", addr, 5*time.Second); err != nil {
		return nil, err
	}
	c.rd = bufio.NewReaderSize(c.conn, 1<<20)
	return c, nil
}

// explain says why a server that asked for a client certificate cut the
// connection before its first reply: it refused this client's
// certificate, or wanted one (tls-auth-clients yes). With TLS 1.3 that
// shows only at the first read, as an alert or, when the alert was lost
// to the server's close, a reset. Other errors are returned as they are.
func (c *client) explain(err error) error {
	var op *net.OpError
	alert := errors.As(err, &op) && op.Op == "remote error"
	if !c.asked || c.replied || !alert && !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET) {
		return err
	}
	if c.presented {
		return fmt.Errorf("the server refused this client's certificate (-cert: does it chain to the server's tls-ca-cert-file, for client authentication?): %w", err)
	}
	return fmt.Errorf("the server wants a client certificate (tls-auth-clients): give -cert and its key, of a CA in the server's tls-ca-cert-file: %w", err)
}

// auth sends AUTH with -a (and -user), if given.
func (cf *connFlags) auth(c *client) error {
	if cf.password == "" {
		return nil
	}
	args := []any{"AUTH", cf.password}
	if cf.user != "" {
		args = []any{"AUTH", cf.user, cf.password}
	}
	_, err := c.do(args...)
	return err
}

func (c *client) Close() error { return c.conn.Close() }

// encode appends a command: strings, byte slices and integers.
func encode(req []byte, args ...any) []byte {
	req = redcon.AppendArray(req, len(args))
	for _, a := range args {
		switch v := a.(type) {
		case string:
			req = redcon.AppendBulkString(req, v)
		case []byte:
			req = redcon.AppendBulk(req, v)
		case int:
			req = redcon.AppendBulkString(req, strconv.Itoa(v))
		case int64:
			req = redcon.AppendBulkString(req, strconv.FormatInt(v, 10))
		default:
			panic(fmt.Sprintf("encode: %T", a))
		}
	}
	return req
}

// do sends one command and reads its reply; an error reply is an error.
func (c *client) do(args ...any) (redcon.RESP, error) {
	if _, err := c.conn.Write(encode(nil, args...)); err != nil {
		return redcon.RESP{}, c.explain(err)
	}
	return c.read()
}

// read reads one reply with redcon's RESP parser.
func (c *client) read() (redcon.RESP, error) {
	var buf []byte
	for {
		b, err := c.rd.Peek(max(1, c.rd.Buffered()))
		if err != nil && len(b) == 0 {
			return redcon.RESP{}, c.explain(err)
		}
		buf = append(buf, b...)
		c.rd.Discard(len(b))
		if m, resp := redcon.ReadNextRESP(buf); m > 0 {
			if m < len(buf) {
				return redcon.RESP{}, errors.New("unexpected data after the reply")
			}
			c.replied = true
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

// field looks up a key in a RESP2 flat key/value reply.
func field(r redcon.RESP, key string) redcon.RESP {
	return r.Map()[key]
}

// writeAll writes to the connection (payload bytes of an upload).
func (c *client) writeAll(r io.Reader, buf []byte) (int64, error) {
	return io.CopyBuffer(c.conn, r, buf)
}

// items are the elements of an array reply.
func items(r redcon.RESP) []redcon.RESP {
	var out []redcon.RESP
	r.ForEach(func(e redcon.RESP) bool { out = append(out, e); return true })
	return out
}
