// Package jwtauth checks the JSON Web Tokens clients authenticate with
// (`AUTH <token>`, `AUTH <user> <token>`, `HELLO 3 AUTH <user> <token>`).
//
// Only ES256 (ECDSA P-256 with SHA-256) is accepted: go-jose refuses any
// other "alg" while parsing, so "none", HS256 (an HMAC keyed with the
// public key, the classic confusion attack) and RS256 never reach a key.
// The verifier holds one or more public keys (rotation: a token signed by
// any of them passes), and optionally the issuer and an audience the
// token must name. A token must carry "sub" (the user) and "exp"; "exp"
// and "nbf" are checked with a small leeway for clock skew.
//
// Errors say why for the log; the client only ever sees WRONGPASS. No
// error text includes the token.
package jwtauth

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// MaxTokenLen bounds a token before it is parsed.
const MaxTokenLen = 8 << 10

// Errors Verify returns; each is logged, never shown to the client.
var (
	ErrMalformed = errors.New("jwt: malformed token or algorithm other than ES256")
	ErrSignature = errors.New("jwt: signature does not verify with any configured key")
	ErrClaims    = errors.New("jwt: claims refused")
	ErrSubject   = errors.New("jwt: missing or unusable sub")
	ErrNoExpiry  = errors.New("jwt: token has no exp")
)

// Verifier checks tokens against the configured keys and claims.
type Verifier struct {
	Keys     []*ecdsa.PublicKey
	Issuer   string        // "" = any
	Audience string        // "" = any
	Leeway   time.Duration // clock skew allowed on exp and nbf
}

// Identity is what a valid token proves.
type Identity struct {
	User    string
	Expires time.Time
}

// ParsePublicKeys reads every PEM block of a file: each a P-256 public key
// as "PUBLIC KEY" (SubjectPublicKeyInfo) or a certificate holding one.
func ParsePublicKeys(pemData []byte) ([]*ecdsa.PublicKey, error) {
	var keys []*ecdsa.PublicKey
	for {
		var b *pem.Block
		b, pemData = pem.Decode(pemData)
		if b == nil {
			break
		}
		var pub any
		switch b.Type {
		case "PUBLIC KEY":
			k, err := x509.ParsePKIXPublicKey(b.Bytes)
			if err != nil {
				return nil, fmt.Errorf("jwt public key %d: %v", len(keys)+1, err)
			}
			pub = k
		case "CERTIFICATE":
			c, err := x509.ParseCertificate(b.Bytes)
			if err != nil {
				return nil, fmt.Errorf("jwt certificate %d: %v", len(keys)+1, err)
			}
			pub = c.PublicKey
		default:
			return nil, fmt.Errorf("jwt key file: unexpected PEM block %q (want PUBLIC KEY or CERTIFICATE)", b.Type)
		}
		k, ok := pub.(*ecdsa.PublicKey)
		if !ok || k.Curve != elliptic.P256() {
			return nil, fmt.Errorf("jwt public key %d is not an ECDSA P-256 key (only ES256 is accepted)", len(keys)+1)
		}
		keys = append(keys, k)
	}
	if len(keys) == 0 {
		return nil, errors.New("jwt key file holds no PEM public key")
	}
	return keys, nil
}

// LooksLikeToken reports whether a password argument has a compact JWS's
// shape (three base64url parts, the first not empty; an unsigned token's
// last part is empty), so AUTH treats it as a token.
func LooksLikeToken(s string) bool {
	if len(s) > MaxTokenLen || s == "" || s[0] == '.' {
		return false
	}
	dots := 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '.':
			dots++
		case c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-', c == '_':
		default:
			return false
		}
	}
	return dots == 2
}

// validUser is a user name fit for CLIENT LIST and ownership records:
// printable ASCII without spaces, not the default user.
func validUser(s string) bool {
	if s == "" || s == "default" || len(s) > 256 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '!' || s[i] > '~' {
			return false
		}
	}
	return true
}

// Verify checks a token at time now: signature by one of the keys, ES256
// only, issuer and audience when configured, exp (required) and nbf with
// the leeway, and a usable sub.
func (v *Verifier) Verify(token string, now time.Time) (Identity, error) {
	if !LooksLikeToken(token) {
		return Identity{}, ErrMalformed
	}
	tok, err := jwt.ParseSigned(token, []jose.SignatureAlgorithm{jose.ES256})
	if err != nil {
		return Identity{}, ErrMalformed
	}
	var claims jwt.Claims
	verified := false
	for _, k := range v.Keys {
		if tok.Claims(k, &claims) == nil {
			verified = true
			break
		}
	}
	if !verified {
		return Identity{}, ErrSignature
	}
	if claims.Expiry == nil {
		return Identity{}, ErrNoExpiry
	}
	want := jwt.Expected{Issuer: v.Issuer, Time: now}
	if v.Audience != "" {
		want.AnyAudience = jwt.Audience{v.Audience}
	}
	if err := claims.ValidateWithLeeway(want, v.Leeway); err != nil {
		return Identity{}, fmt.Errorf("%w: %v", ErrClaims, err)
	}
	if !validUser(claims.Subject) {
		return Identity{}, ErrSubject
	}
	return Identity{User: claims.Subject, Expires: claims.Expiry.Time()}, nil
}
