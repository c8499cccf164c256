// Package receipt is the format of EnclaveAI's signed inference receipts:
// a JWS (RFC 7515) in compact serialization, ES256, whose protected header
// carries the signing public key (jwk) and whose payload is the JSON of
// Payload. The server signs with a P-256 key made at start and held only
// in memory (Signer); AI.ATTEST binds that key into the enclave's report
// data (enclave.ReceiptKeyData), which is what makes a receipt worth more
// than its signature. docs/ENCLAVE.md has the format and a worked example.
//
// Verify is the parser clients use (enclaveai-cli receipt verify): it
// accepts only ES256 with an embedded P-256 key, and returns the payload
// and the key's DER encoding for the caller to check against the
// attestation evidence.
package receipt

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/go-jose/go-jose/v4"
)

// The payload's version and the JWS "typ". Never change what version 1
// means: add a version.
const (
	Version = 1
	JWSType = "enclaveai-receipt+jws"
	// MaxSize bounds a receipt given to Verify.
	MaxSize = 1 << 20
)

// Payload is a receipt's JSON payload.
type Payload struct {
	V       int      `json:"v"`
	Type    string   `json:"typ"` // "enclaveai.inference" or "enclaveai.dag"
	Server  Server   `json:"server"`
	User    string   `json:"user"` // who ran it
	Models  []Model  `json:"models"`
	Inputs  []Tensor `json:"inputs"`
	Outputs []Tensor `json:"outputs"`
	Nonce   string   `json:"nonce"`  // base64url of the client's nonce bytes, no padding
	Time    int64    `json:"iat"`    // unix seconds
	TimeNs  int64    `json:"iat_ns"` // unix nanoseconds
}

// Server names the server that signed.
type Server struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	Mode    string `json:"enclave_mode"` // "sgx" or "simulation"
	// KeyID is the SHA-256 of the receipt key's DER public key, hex.
	KeyID string `json:"key_id"`
}

// Model is a model that ran: its key and the SHA-256 of its bytes.
type Model struct {
	Key    string `json:"key"`
	SHA256 string `json:"sha256"`
}

// Tensor is a tensor the run read or wrote; SHA256 is that of its blob
// bytes in C order, as AI.TENSORGET BLOB returns them.
type Tensor struct {
	Key    string  `json:"key"`
	DType  string  `json:"dtype"`
	Shape  []int64 `json:"shape"`
	SHA256 string  `json:"sha256"`
}

// Signer signs receipts with a key it makes.
type Signer struct {
	pubDER []byte
	keyID  string
	signer jose.Signer
}

// NewSigner makes a fresh P-256 key, kept only in memory.
func NewSigner() (*Signer, error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	der, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
	if err != nil {
		return nil, err
	}
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: k},
		(&jose.SignerOptions{EmbedJWK: true}).WithType(JWSType))
	if err != nil {
		return nil, err
	}
	return &Signer{pubDER: der, keyID: KeyID(der), signer: s}, nil
}

// KeyID is the SHA-256 of a DER public key, hex: Server.KeyID.
func KeyID(pubDER []byte) string {
	sum := sha256.Sum256(pubDER)
	return hex.EncodeToString(sum[:])
}

// PublicKeyDER is the signing key's public half (SubjectPublicKeyInfo).
func (s *Signer) PublicKeyDER() []byte { return s.pubDER }

// KeyID is Server.KeyID for this signer.
func (s *Signer) KeyID() string { return s.keyID }

// Sign sets p's version and key id and returns the compact JWS.
func (s *Signer) Sign(p *Payload) (string, error) {
	p.V, p.Server.KeyID = Version, s.keyID
	b, err := json.Marshal(p)
	if err != nil {
		return "", err
	}
	jws, err := s.signer.Sign(b)
	if err != nil {
		return "", err
	}
	return jws.CompactSerialize()
}

// Errors of Verify.
var (
	ErrFormat    = errors.New("receipt: not a compact ES256 JWS with an embedded P-256 jwk")
	ErrSignature = errors.New("receipt: signature does not verify")
	ErrPayload   = errors.New("receipt: bad payload")
)

// Verify checks a receipt's signature with the key in its header and
// returns the payload and that key (DER). It does not know whether the key
// is the enclave's: the caller checks pubDER against AI.ATTEST's evidence
// (enclave.Verify), and the digests against its own tensors.
func Verify(compact string) (p *Payload, pubDER []byte, err error) {
	if len(compact) > MaxSize {
		return nil, nil, ErrFormat
	}
	jws, err := jose.ParseSignedCompact(compact, []jose.SignatureAlgorithm{jose.ES256})
	if err != nil || len(jws.Signatures) != 1 {
		return nil, nil, ErrFormat
	}
	h := jws.Signatures[0].Protected
	if h.JSONWebKey == nil || !h.JSONWebKey.Valid() || !h.JSONWebKey.IsPublic() {
		return nil, nil, ErrFormat
	}
	pub, ok := h.JSONWebKey.Key.(*ecdsa.PublicKey)
	if !ok || pub.Curve != elliptic.P256() {
		return nil, nil, ErrFormat
	}
	payload, err := jws.Verify(pub)
	if err != nil {
		return nil, nil, ErrSignature
	}
	if pubDER, err = x509.MarshalPKIXPublicKey(pub); err != nil {
		return nil, nil, ErrFormat
	}
	p = &Payload{}
	if err := json.Unmarshal(payload, p); err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrPayload, err)
	}
	if p.V != Version {
		return nil, nil, fmt.Errorf("%w: version %d", ErrPayload, p.V)
	}
	if p.Server.KeyID != KeyID(pubDER) {
		return nil, nil, fmt.Errorf("%w: key_id is not the signing key's", ErrPayload)
	}
	return p, pubDER, nil
}
