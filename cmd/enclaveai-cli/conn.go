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
	"time"

	"github.com/tidwall/redcon"
)

// connFlags are the flags that say how to reach the server.
type connFlags struct {
	host, password, user string
	port                 int
	tls                  bool
}

// register adds the connection flags to fs; attests says whether the
// subcommand checks the server's evidence (which -tls then binds to the
// connection's key).
func (cf *connFlags) register(fs *flag.FlagSet, attests bool) {
	fs.StringVar(&cf.host, "host", "127.0.0.1", "server host")
	fs.IntVar(&cf.port, "port", 6379, "server port (the tls-port with -tls)")
	tlsUsage := "connect with TLS (the certificate is not checked: this subcommand does not attest the server)"
	if attests {
		tlsUsage = "connect with TLS and bind the evidence to the server's TLS key"
	}
	fs.BoolVar(&cf.tls, "tls", false, tlsUsage)
	fs.StringVar(&cf.password, "a", "", "password (requirepass, or the user's with -user)")
	fs.StringVar(&cf.user, "user", "", "user name for AUTH")
}

// client is one connection to the server.
type client struct {
	addr   string
	conn   net.Conn
	rd     *bufio.Reader
	tls    bool
	tlsKey []byte // DER SubjectPublicKeyInfo of the peer's certificate, with TLS
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
func (cf *connFlags) connect() (*client, error) {
	addr := net.JoinHostPort(cf.host, strconv.Itoa(cf.port))
	c := &client{addr: addr, tls: cf.tls}
	var err error
	if cf.tls {
		// The certificate is self-signed inside the enclave: trust comes
		// from the evidence binding its public key, checked by attest.
		tc, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr,
			&tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12})
		if err != nil {
			return nil, err
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
		return redcon.RESP{}, err
	}
	return c.read()
}

// read reads one reply with redcon's RESP parser.
func (c *client) read() (redcon.RESP, error) {
	var buf []byte
	for {
		b, err := c.rd.Peek(max(1, c.rd.Buffered()))
		if err != nil && len(b) == 0 {
			return redcon.RESP{}, err
		}
		buf = append(buf, b...)
		c.rd.Discard(len(b))
		if m, resp := redcon.ReadNextRESP(buf); m > 0 {
			if m < len(buf) {
				return redcon.RESP{}, errors.New("unexpected data after the reply")
			}
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
