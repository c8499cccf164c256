package commands

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"testing"
	"time"

	"github.com/enclaveai/enclaveai/config"
	"github.com/enclaveai/enclaveai/jwtauth"
	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// jwtHarness is a harness with token authentication on and requirepass
// set, and a function that signs tokens with the configured key.
func jwtHarness(t *testing.T) (*harness, func(sub string, exp time.Duration) string, *ecdsa.PrivateKey) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	opts := config.Default()
	pass := "secret"
	opts.Requirepass.Store(&pass)
	opts.JWTPublicKeyFile = "(in test)"
	h := newHarnessOpts(t, opts)
	h.s.jwt = &jwtauth.Verifier{Keys: []*ecdsa.PublicKey{&key.PublicKey}}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: key}, nil)
	if err != nil {
		t.Fatal(err)
	}
	sign := func(sub string, exp time.Duration) string {
		tok, err := jwt.Signed(signer).Claims(jwt.Claims{Subject: sub, Expiry: jwt.NewNumericDate(time.Now().Add(exp))}).Serialize()
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	return h, sign, key
}

func TestAuthToken(t *testing.T) {
	h, sign, _ := jwtHarness(t)
	alice, bob := sign("alice", time.Hour), sign("bob", time.Hour)
	h.run(
		row("PING", noAuth),
		row("AUTH "+alice, "+OK"),
		row("ACL WHOAMI", `"alice"`),
		row("AUTH bob "+bob, "+OK"),
		row("ACL WHOAMI", `"bob"`),
		row("AUTH alice "+bob, wrongPass), // sub must be the named user
		row("ACL WHOAMI", `"bob"`),        // a refused AUTH changes nothing
		row("AUTH "+sign("alice", -time.Hour), wrongPass),
		row("AUTH "+alice[:len(alice)-4]+"AAAA", wrongPass),
		row("AUTH a.b.c", wrongPass),
		row("AUTH secret", "+OK"), // passwords still work
		row("ACL WHOAMI", `"default"`),
		row("HELLO 2 AUTH alice "+alice, hello2),
		row("ACL WHOAMI", `"alice"`),
		row("RESET", "+RESET"),
		row("PING", noAuth),
	)
}

// A token login lapses at the token's expiry: -NOAUTH until the client
// authenticates again.
func TestAuthTokenExpires(t *testing.T) {
	h, sign, _ := jwtHarness(t)
	h.run(row("AUTH "+sign("alice", 1500*time.Millisecond), "+OK"), row("PING", "+PONG"))
	deadline := time.Now().Add(5 * time.Second)
	for render(h.do("PING")) == "+PONG" && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	h.run(
		row("PING", noAuth),
		row("ACL WHOAMI", noAuth),
		row("AUTH "+sign("alice", time.Hour), "+OK"),
		row("PING", "+PONG"),
	)
}

// Refused tokens are logged at most once a second, the next line counting
// those held back (security review: 3,000 lines in 0.44 s from one
// connection before AUTH).
func TestLogThrottle(t *testing.T) {
	var th logThrottle
	now := int64(1_000_000)
	if n, ok := th.allow(now); !ok || n != 0 {
		t.Fatalf("first line: %d %v", n, ok)
	}
	for i := range 5 {
		if _, ok := th.allow(now + int64(i*100)); ok {
			t.Fatalf("line %d within the second let through", i+2)
		}
	}
	if n, ok := th.allow(now + 1000); !ok || n != 5 {
		t.Fatalf("a second later: %d held, %v; want 5, true", n, ok)
	}
}
