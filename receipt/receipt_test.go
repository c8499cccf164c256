package receipt

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"github.com/go-jose/go-jose/v4"
)

func sample() *Payload {
	return &Payload{Type: "enclaveai.inference", Server: Server{Name: "enclaveai", Mode: "simulation"},
		Models:  []Model{{Key: "m", SHA256: strings.Repeat("a", 64)}},
		Inputs:  []Tensor{{Key: "x", DType: "FLOAT", Shape: []int64{1, 4}, SHA256: strings.Repeat("b", 64)}},
		Outputs: []Tensor{{Key: "y", DType: "FLOAT", Shape: []int64{1, 4}, SHA256: strings.Repeat("c", 64)}},
		Nonce:   "bm9uY2U", Time: 1}
}

func TestSignVerify(t *testing.T) {
	s, err := NewSigner()
	if err != nil {
		t.Fatal(err)
	}
	jws, err := s.Sign(sample())
	if err != nil {
		t.Fatal(err)
	}
	p, der, err := Verify(jws)
	if err != nil {
		t.Fatal(err)
	}
	if string(der) != string(s.PublicKeyDER()) || p.Models[0].Key != "m" || p.Outputs[0].Shape[1] != 4 || p.Server.KeyID != s.KeyID() {
		t.Errorf("round trip: %+v", p)
	}
	parts := strings.Split(jws, ".")
	other, _ := NewSigner()
	otherJWS, _ := other.Sign(sample())
	otherParts := strings.Split(otherJWS, ".")
	tampered := sample()
	tampered.Outputs[0].SHA256 = strings.Repeat("d", 64)
	tamperedJWS, _ := s.Sign(tampered)
	k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	noJWK, _ := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: k}, nil)
	bare, _ := noJWK.Sign([]byte(`{"v":1}`))
	bareJWS, _ := bare.CompactSerialize()
	for name, c := range map[string]struct {
		in   string
		want error
	}{
		"payload swapped":     {parts[0] + "." + strings.Split(tamperedJWS, ".")[1] + "." + parts[2], ErrSignature},
		"header of other key": {otherParts[0] + "." + parts[1] + "." + parts[2], ErrSignature},
		"no signature":        {parts[0] + "." + parts[1] + ".", ErrSignature},
		"alg none":            {base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none"}`)) + "." + parts[1] + ".", ErrFormat},
		"no jwk":              {bareJWS, ErrFormat},
		"garbage":             {"a.b.c", ErrFormat},
	} {
		if _, _, err := Verify(c.in); !errors.Is(err, c.want) {
			t.Errorf("%s: got %v, want %v", name, err, c.want)
		}
	}
}

func FuzzVerify(f *testing.F) {
	s, err := NewSigner()
	if err != nil {
		f.Fatal(err)
	}
	jws, _ := s.Sign(sample())
	f.Add(jws)
	f.Add("a.b.c")
	f.Add("eyJhbGciOiJub25lIn0.e30.")
	f.Fuzz(func(t *testing.T, in string) {
		p, der, err := Verify(in)
		if err == nil && (p == nil || len(der) == 0 || p.V != Version) {
			t.Fatalf("accepted %q", in)
		}
	})
}

// BenchmarkSign is the signing part of a receipt's cost (make bench-loop's
// mlp-receipt kind has the whole of it).
func BenchmarkSign(b *testing.B) {
	s, err := NewSigner()
	if err != nil {
		b.Fatal(err)
	}
	p := sample()
	for b.Loop() {
		if _, err := s.Sign(p); err != nil {
			b.Fatal(err)
		}
	}
}
