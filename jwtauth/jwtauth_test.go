package jwtauth

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

func newKey(t testing.TB) *ecdsa.PrivateKey {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func sign(t testing.TB, alg jose.SignatureAlgorithm, key any, c jwt.Claims) string {
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: key}, (&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jwt.Signed(s).Claims(c).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func pemOf(t testing.TB, pub any) []byte {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
}

func TestVerify(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	k1, k2, other := newKey(t), newKey(t), newKey(t)
	keys, err := ParsePublicKeys(append(pemOf(t, &k1.PublicKey), pemOf(t, &k2.PublicKey)...))
	if err != nil || len(keys) != 2 {
		t.Fatalf("ParsePublicKeys: %v %d", err, len(keys))
	}
	v := &Verifier{Keys: keys, Issuer: "iss1", Audience: "enclaveai", Leeway: 30 * time.Second}
	ok := jwt.Claims{Subject: "alice", Issuer: "iss1", Audience: jwt.Audience{"enclaveai"},
		Expiry: jwt.NewNumericDate(now.Add(time.Hour))}
	with := func(f func(c *jwt.Claims)) jwt.Claims { c := ok; f(&c); return c }
	rsaKey, _ := rsa.GenerateKey(rand.Reader, 2048)
	none := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","typ":"JWT"}`)) + "." +
		base64.RawURLEncoding.EncodeToString([]byte(`{"sub":"alice","exp":1900000000}`)) + ".x"
	hs := sign(t, jose.HS256, pemOf(t, &k1.PublicKey), ok)
	tampered := []byte(sign(t, jose.ES256, k1, ok))
	if tampered[len(tampered)-5] == 'A' {
		tampered[len(tampered)-5] = 'B'
	} else {
		tampered[len(tampered)-5] = 'A'
	}
	for _, tc := range []struct {
		name  string
		token string
		want  error
	}{
		{"valid key 1", sign(t, jose.ES256, k1, ok), nil},
		{"valid key 2 (rotation)", sign(t, jose.ES256, k2, ok), nil},
		{"inside leeway", sign(t, jose.ES256, k1, with(func(c *jwt.Claims) { c.Expiry = jwt.NewNumericDate(now.Add(-10 * time.Second)) })), nil},
		{"expired", sign(t, jose.ES256, k1, with(func(c *jwt.Claims) { c.Expiry = jwt.NewNumericDate(now.Add(-time.Minute)) })), ErrClaims},
		{"not yet valid", sign(t, jose.ES256, k1, with(func(c *jwt.Claims) { c.NotBefore = jwt.NewNumericDate(now.Add(time.Minute)) })), ErrClaims},
		{"no exp", sign(t, jose.ES256, k1, with(func(c *jwt.Claims) { c.Expiry = nil })), ErrNoExpiry},
		{"wrong issuer", sign(t, jose.ES256, k1, with(func(c *jwt.Claims) { c.Issuer = "x" })), ErrClaims},
		{"wrong audience", sign(t, jose.ES256, k1, with(func(c *jwt.Claims) { c.Audience = jwt.Audience{"x"} })), ErrClaims},
		{"no sub", sign(t, jose.ES256, k1, with(func(c *jwt.Claims) { c.Subject = "" })), ErrSubject},
		{"sub default", sign(t, jose.ES256, k1, with(func(c *jwt.Claims) { c.Subject = "default" })), ErrSubject},
		{"sub with space", sign(t, jose.ES256, k1, with(func(c *jwt.Claims) { c.Subject = "a b" })), ErrSubject},
		{"wrong key", sign(t, jose.ES256, other, ok), ErrSignature},
		{"tampered", string(tampered), ErrSignature},
		{"HS256 keyed with the public key", hs, ErrMalformed},
		{"RS256", sign(t, jose.RS256, rsaKey, ok), ErrMalformed},
		{"alg none", none, ErrMalformed},
		{"garbage", "a.b.c", ErrMalformed},
		{"password", "hunter2", ErrMalformed},
	} {
		id, err := v.Verify(tc.token, now)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, err, tc.want)
		}
		if err == nil && (id.User != "alice" || !id.Expires.Equal(now.Add(time.Hour).Truncate(time.Second)) && tc.name != "inside leeway") {
			t.Errorf("%s: identity %+v", tc.name, id)
		}
	}
}

func TestParsePublicKeysRefuses(t *testing.T) {
	rsaKey, _ := rsa.GenerateKey(rand.Reader, 2048)
	p384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	for name, data := range map[string][]byte{
		"empty": nil, "rsa": pemOf(t, &rsaKey.PublicKey), "p384": pemOf(t, &p384.PublicKey),
		"private": pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: []byte{1}}),
	} {
		if _, err := ParsePublicKeys(data); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestLooksLikeToken(t *testing.T) {
	for s, want := range map[string]bool{
		"a.b.c": true, "eyJ.eyJ.sig-_": true, "a..c": true, ".b.c": false, "a.b.": true,
		"a.b": false, "a.b.c.d": false, "pass word": false, "": false, "a.b.c=": false,
	} {
		if LooksLikeToken(s) != want {
			t.Errorf("LooksLikeToken(%q) != %v", s, want)
		}
	}
}

func FuzzVerify(f *testing.F) {
	k := newKey(f)
	v := &Verifier{Keys: []*ecdsa.PublicKey{&k.PublicKey}, Leeway: time.Second}
	now := time.Unix(1_800_000_000, 0)
	f.Add(sign(f, jose.ES256, k, jwt.Claims{Subject: "a", Expiry: jwt.NewNumericDate(now.Add(time.Hour))}))
	f.Add("eyJhbGciOiJub25lIn0.e30.")
	f.Add("a.b.c")
	f.Fuzz(func(t *testing.T, s string) {
		id, err := v.Verify(s, now)
		if err == nil && (id.User == "" || id.Expires.IsZero()) {
			t.Fatalf("accepted %q as %+v", s, id)
		}
	})
}
