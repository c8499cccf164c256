package enclave

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"errors"
	"fmt"
	"strings"
	"testing"
)

func tlsKey(t *testing.T) []byte {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

func nonce() []byte {
	n := make([]byte, 32)
	rand.Read(n)
	return n
}

// evidenceBytes attests with p in mode m and marshals the evidence.
func evidenceBytes(t *testing.T, p platform, m RunMode, n, key []byte) []byte {
	t.Helper()
	ev, err := attest(p, m, n, key, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := ev.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

var allowSim = Policy{AllowSimulated: true}

func TestSimulatedRoundTrip(t *testing.T) {
	n, key, rk := nonce(), tlsKey(t), tlsKey(t) // rk: a receipt key
	ev, err := Attest(n, key, rk)               // the real thing: simulation mode here
	if err != nil {
		t.Fatal(err)
	}
	if ev.Kind != KindSimulated || !bytes.HasPrefix(ev.Report, []byte("SIMULATED")) {
		t.Fatalf("evidence outside an enclave: %v %q", ev.Kind, ev.Report)
	}
	b, err := ev.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	res, err := Verify(b, n, key, rk, allowSim)
	if err != nil {
		t.Fatal(err)
	}
	if res.Kind != KindSimulated || !res.Debug || !isZero(res.SignerID) || !isZero(res.UniqueID) {
		t.Errorf("result %+v", res)
	}
	if _, err := Verify(b, n, key, rk, Policy{SignerID: make([]byte, 32), AllowDebug: true}); !errors.Is(err, ErrSimulated) {
		t.Errorf("simulated evidence without AllowSimulated: got %v", err)
	}
	if _, err := Verify(b, nonce(), key, rk, allowSim); !errors.Is(err, ErrBinding) {
		t.Errorf("wrong nonce: got %v", err)
	}
	if _, err := Verify(b, n, tlsKey(t), rk, allowSim); !errors.Is(err, ErrBinding) {
		t.Errorf("wrong TLS key: got %v", err)
	}
	if _, err := Verify(b, n, nil, rk, allowSim); !errors.Is(err, ErrBinding) {
		t.Errorf("no TLS key: got %v", err)
	}
	if _, err := Verify(b, n, key, tlsKey(t), allowSim); !errors.Is(err, ErrBinding) {
		t.Errorf("wrong receipt key: got %v", err)
	}
	if _, err := Verify(b, n, key, nil, allowSim); !errors.Is(err, ErrBinding) {
		t.Errorf("no receipt key: got %v", err)
	}
}

// Every byte of the evidence, flipped, makes Verify refuse it.
func TestTamperedEvidence(t *testing.T) {
	n, key := nonce(), tlsKey(t)
	b := evidenceBytes(t, hw, Simulation, n, key)
	for i := range b {
		for _, mask := range []byte{0x01, 0x80} {
			c := bytes.Clone(b)
			c[i] ^= mask
			_, err := Verify(c, n, key, nil, allowSim)
			want := ErrEvidenceFormat
			if i >= evidenceHdrSize+16 && i < evidenceHdrSize+80 {
				want = ErrBinding
			}
			if !errors.Is(err, want) {
				t.Errorf("byte %d ^ %#02x: got %v, want %v", i, mask, err, want)
			}
		}
	}
	for _, c := range [][]byte{nil, b[:evidenceHdrSize], b[:len(b)-1], append(bytes.Clone(b), 0)} {
		if _, err := Verify(c, n, key, nil, allowSim); !errors.Is(err, ErrEvidenceFormat) {
			t.Errorf("%d of %d bytes: got %v", len(c), len(b), err)
		}
	}
}

func TestNonceLimits(t *testing.T) {
	key := tlsKey(t)
	for _, size := range []int{0, MinNonceSize - 1, MaxNonceSize + 1} {
		if _, err := Attest(make([]byte, size), key, nil); !errors.Is(err, ErrNonce) {
			t.Errorf("Attest with a %d-byte nonce: got %v", size, err)
		}
		if _, err := Verify(nil, make([]byte, size), key, nil, allowSim); !errors.Is(err, ErrNonce) {
			t.Errorf("Verify with a %d-byte nonce: got %v", size, err)
		}
	}
}

func TestEvidenceEncoding(t *testing.T) {
	ev := &Evidence{Kind: KindSGX, Report: []byte("report")}
	b, err := ev.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if want := "EAIEVID\x00\x01\x01\x00\x00\x00\x06report"; string(b) != want {
		t.Fatalf("encoded %q, want %q", b, want)
	}
	got, err := ParseEvidence(b)
	if err != nil || got.Kind != ev.Kind || !bytes.Equal(got.Report, ev.Report) {
		t.Fatalf("parsed %+v, %v", got, err)
	}
	if _, err := (&Evidence{Kind: KindSGX, Report: make([]byte, maxReportSize+1)}).MarshalBinary(); !errors.Is(err, ErrEvidenceFormat) {
		t.Errorf("oversized report: got %v", err)
	}
	if s := fmt.Sprint(KindSGX, KindSimulated, EvidenceKind(9)); s != "sgx simulated kind 9" {
		t.Errorf("kind names: %q", s)
	}
}

// The SGX path, with a fake platform in place of the hardware.
func TestSGXAttestation(t *testing.T) {
	f := newFakeSGX()
	n, key := nonce(), tlsKey(t)
	b := evidenceBytes(t, f, SGX, n, key)
	if ev, _ := ParseEvidence(b); ev.Kind != KindSGX {
		t.Fatalf("kind %v in SGX mode", ev.Kind)
	}
	good := Policy{SignerID: f.report.SignerID, ProductID: 1, MinSecurityVersion: 3}
	res, err := verify(f, b, n, key, nil, good)
	if err != nil {
		t.Fatal(err)
	}
	if res.Kind != KindSGX || res.ProductID != 1 || res.SecurityVersion != 3 || !bytes.Equal(res.UniqueID, f.report.UniqueID) {
		t.Errorf("result %+v", res)
	}
	if _, err := verify(f, b, n, key, nil, Policy{UniqueID: f.report.UniqueID, ProductID: 1}); err != nil {
		t.Errorf("by unique id: %v", err)
	}

	with := func(change func(*Policy)) Policy { p := good; change(&p); return p }
	for name, c := range map[string]struct {
		policy Policy
		nonce  []byte
		key    []byte
		want   error
	}{
		"wrong nonce":       {good, nonce(), key, ErrBinding},
		"wrong TLS key":     {good, n, tlsKey(t), ErrBinding},
		"wrong signer":      {with(func(p *Policy) { p.SignerID = bytes.Repeat([]byte{9}, 32) }), n, key, ErrPolicy},
		"wrong unique id":   {with(func(p *Policy) { p.UniqueID = bytes.Repeat([]byte{9}, 32) }), n, key, ErrPolicy},
		"wrong product":     {with(func(p *Policy) { p.ProductID = 2 }), n, key, ErrPolicy},
		"security version":  {with(func(p *Policy) { p.MinSecurityVersion = 4 }), n, key, ErrPolicy},
		"empty policy":      {Policy{ProductID: 1}, n, key, ErrPolicy},
		"simulation policy": {allowSim, n, key, ErrPolicy},
	} {
		if _, err := verify(f, b, c.nonce, c.key, nil, c.policy); !errors.Is(err, c.want) {
			t.Errorf("%s: got %v, want %v", name, err, c.want)
		}
	}

	f.report.Debug = true
	if _, err := verify(f, b, n, key, nil, good); !errors.Is(err, ErrPolicy) {
		t.Errorf("debug enclave without AllowDebug: got %v", err)
	}
	if _, err := verify(f, b, n, key, nil, with(func(p *Policy) { p.AllowDebug = true })); err != nil {
		t.Errorf("debug enclave with AllowDebug: %v", err)
	}
	f.verifyErr = errors.New("OE_VERIFY_FAILED")
	if _, err := verify(f, b, n, key, nil, good); !errors.Is(err, ErrReportInvalid) {
		t.Errorf("platform refuses the report: got %v", err)
	}
}

// Outside an enclave, in the default build, SGX evidence cannot be checked:
// Verify says so rather than accepting it.
func TestVerifySGXOutsideEnclave(t *testing.T) {
	n, key := nonce(), tlsKey(t)
	b := evidenceBytes(t, newFakeSGX(), SGX, n, key)
	_, err := Verify(b, n, key, nil, Policy{SignerID: make([]byte, 32), AllowDebug: true, AllowSimulated: true})
	if !errors.Is(err, ErrReportInvalid) {
		t.Fatalf("got %v", err)
	}
	t.Log(err)
	if !strings.Contains(err.Error(), "EGo") {
		t.Errorf("error %q should say why", err)
	}
}
