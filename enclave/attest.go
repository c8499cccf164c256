package enclave

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/binary"
	"errors"
	"fmt"
)

// The constants of evidence format version 1 and of the report data (see the
// package doc). Never change them.
const (
	evidenceMagic   = "EAIEVID\x00"
	evidenceVersion = 1
	evidenceHdrSize = 14
	maxReportSize   = 64 << 10

	reportDataLabel = "EnclaveAI attestation v1\x00"
	receiptKeyLabel = "EnclaveAI receipt key v1\x00"

	simMarker     = "SIMULATED REPORT"
	simReportSize = 149
)

// Nonce limits of Attest and Verify. A short nonce would let a report be
// replayed; a long one is a waste of the server's time.
const (
	MinNonceSize = 16
	MaxNonceSize = 1024
)

// EvidenceKind says what kind of report a piece of evidence carries.
type EvidenceKind uint8

// The evidence kinds. The numbers are part of the evidence format.
const (
	KindSGX       EvidenceKind = 1 // an EGo (Open Enclave) remote report
	KindSimulated EvidenceKind = 2 // a simulated report: proves nothing
)

// String returns "sgx" or "simulated".
func (k EvidenceKind) String() string {
	switch k {
	case KindSGX:
		return "sgx"
	case KindSimulated:
		return "simulated"
	}
	return fmt.Sprintf("kind %d", uint8(k))
}

// Evidence is what Attest produces: a report and its kind.
type Evidence struct {
	Kind   EvidenceKind
	Report []byte
}

// The errors of Attest, ParseEvidence and Verify; test with errors.Is.
var (
	// ErrNonce means the nonce is shorter than MinNonceSize or longer
	// than MaxNonceSize.
	ErrNonce = fmt.Errorf("nonce must be %d to %d bytes", MinNonceSize, MaxNonceSize)
	// ErrEvidenceFormat means the evidence bytes are not well-formed.
	ErrEvidenceFormat = errors.New("malformed attestation evidence")
	// ErrSimulated means the evidence is simulated and the policy does not
	// allow simulated evidence.
	ErrSimulated = errors.New("simulated attestation evidence refused")
	// ErrReportInvalid means the platform refused the SGX report: a bad
	// signature, an outdated TCB, or no way to verify here.
	ErrReportInvalid = errors.New("SGX report failed verification")
	// ErrBinding means the report was not made for this nonce, TLS key and
	// receipt key (the server binds its receipt key too: a verifier must
	// give it, enclaveai-cli verify's -receipt-key).
	ErrBinding = errors.New("report data does not match the nonce, TLS key and receipt key")
	// ErrPolicy means the enclave's identity does not satisfy the policy.
	ErrPolicy = errors.New("enclave identity does not satisfy the policy")
)

// ReportData returns the first 32 of the 64 bytes of report data that bind a
// report to nonce and to the TLS public key (DER); the other 32 are zero.
func ReportData(nonce, tlsPubKeyDER []byte) [32]byte {
	hn, hk := sha256.Sum256(nonce), sha256.Sum256(tlsPubKeyDER)
	h := sha256.New()
	h.Write([]byte(reportDataLabel))
	h.Write(hn[:])
	h.Write(hk[:])
	var out [32]byte
	h.Sum(out[:0])
	return out
}

// MarshalBinary encodes the evidence in evidence format version 1.
func (e *Evidence) MarshalBinary() ([]byte, error) {
	if len(e.Report) > maxReportSize {
		return nil, fmt.Errorf("%w: report is %d bytes", ErrEvidenceFormat, len(e.Report))
	}
	b := make([]byte, 0, evidenceHdrSize+len(e.Report))
	b = append(b, evidenceMagic...)
	b = append(b, evidenceVersion, byte(e.Kind))
	b = binary.BigEndian.AppendUint32(b, uint32(len(e.Report)))
	return append(b, e.Report...), nil
}

// ParseEvidence decodes evidence in format version 1. It checks the framing
// only; Verify checks the content.
func ParseEvidence(b []byte) (*Evidence, error) {
	if len(b) < evidenceHdrSize || string(b[:8]) != evidenceMagic {
		return nil, fmt.Errorf("%w: no evidence header", ErrEvidenceFormat)
	}
	if b[8] != evidenceVersion {
		return nil, fmt.Errorf("%w: version %d", ErrEvidenceFormat, b[8])
	}
	kind := EvidenceKind(b[9])
	if kind != KindSGX && kind != KindSimulated {
		return nil, fmt.Errorf("%w: unknown kind %d", ErrEvidenceFormat, b[9])
	}
	n := binary.BigEndian.Uint32(b[10:])
	if n > maxReportSize || int(n) != len(b)-evidenceHdrSize {
		return nil, fmt.Errorf("%w: report length %d in %d bytes", ErrEvidenceFormat, n, len(b))
	}
	return &Evidence{Kind: kind, Report: bytes.Clone(b[evidenceHdrSize:])}, nil
}

// Attest returns evidence that this server runs in an enclave, bound to the
// verifier's nonce and to the server's TLS public key (DER-encoded
// SubjectPublicKeyInfo; empty when the server has no TLS). In SGX mode it is
// an EGo remote report; in simulation mode a report marked SIMULATED.
//
// receiptPubKeyDER, the public key the server signs inference receipts
// with (nil: none), is bound in the second half of the report data.
func Attest(nonce, tlsPubKeyDER, receiptPubKeyDER []byte) (*Evidence, error) {
	return attest(hw, Mode(), nonce, tlsPubKeyDER, receiptPubKeyDER)
}

func attest(p platform, m RunMode, nonce, tlsPubKeyDER, receiptPubKeyDER []byte) (*Evidence, error) {
	if len(nonce) < MinNonceSize || len(nonce) > MaxNonceSize {
		return nil, ErrNonce
	}
	first, second := ReportData(nonce, tlsPubKeyDER), ReceiptKeyData(receiptPubKeyDER)
	data := append(first[:], second[:]...)
	if m == SGX {
		report, err := p.remoteReport(data[:])
		if err != nil {
			return nil, fmt.Errorf("SGX remote report: %w", err)
		}
		return &Evidence{Kind: KindSGX, Report: report}, nil
	}
	r := make([]byte, simReportSize)
	copy(r, simMarker)
	copy(r[16:], data)
	r[148] = 1 // debug; the identity fields stay zero
	return &Evidence{Kind: KindSimulated, Report: r}, nil
}

// Policy is what a verifier requires of the enclave behind the evidence.
type Policy struct {
	// SignerID is the expected MRSIGNER (32 bytes): the hash of the key
	// that signed the enclave (ego signerid). Required unless UniqueID is
	// set.
	SignerID []byte
	// UniqueID, if set, is the expected MRENCLAVE (32 bytes): one exact
	// build (ego uniqueid).
	UniqueID []byte
	// ProductID is the expected product id (productID in enclave.json).
	ProductID uint16
	// MinSecurityVersion is the lowest acceptable security version
	// (securityVersion in enclave.json).
	MinSecurityVersion uint
	// AllowDebug accepts debug enclaves, whose memory the host can read.
	AllowDebug bool
	// AllowSimulated accepts simulated evidence, which proves nothing:
	// for tests and development only.
	AllowSimulated bool
}

// Result is what verified evidence says about the enclave.
type Result struct {
	Kind            EvidenceKind
	UniqueID        []byte // MRENCLAVE; zero for simulated evidence
	SignerID        []byte // MRSIGNER; zero for simulated evidence
	ProductID       uint16
	SecurityVersion uint
	Debug           bool
	TCBStatus       string // the platform's TCB status; empty for simulated evidence
}

// Verify checks evidence from Attest: that it is well-formed, signed by the
// platform, made for nonce and tlsPubKeyDER, and that the enclave satisfies
// policy. A platform whose TCB level is not up to date is refused
// (ErrReportInvalid), as is SGX evidence where this build cannot verify it
// (see the package doc). Simulated evidence is refused unless
// policy.AllowSimulated; when allowed only its binding is checked, since its
// identity fields are zero.
//
// receiptPubKeyDER is the receipt key the evidence must bind (nil: none,
// the second half of the report data is then zero).
func Verify(evidence, nonce, tlsPubKeyDER, receiptPubKeyDER []byte, policy Policy) (*Result, error) {
	return verify(hw, evidence, nonce, tlsPubKeyDER, receiptPubKeyDER, policy)
}

func verify(p platform, evidence, nonce, tlsPubKeyDER, receiptPubKeyDER []byte, policy Policy) (*Result, error) {
	if len(nonce) < MinNonceSize || len(nonce) > MaxNonceSize {
		return nil, ErrNonce
	}
	ev, err := ParseEvidence(evidence)
	if err != nil {
		return nil, err
	}
	want, receipt := ReportData(nonce, tlsPubKeyDER), ReceiptKeyData(receiptPubKeyDER)
	if ev.Kind == KindSimulated {
		if !policy.AllowSimulated {
			return nil, ErrSimulated
		}
		r := ev.Report
		if len(r) != simReportSize || string(r[:16]) != simMarker || !isZero(r[80:148]) || r[148] != 1 {
			return nil, fmt.Errorf("%w: bad simulated report", ErrEvidenceFormat)
		}
		if err := checkBinding(r[16:80], want, receipt); err != nil {
			return nil, err
		}
		return &Result{Kind: KindSimulated, UniqueID: make([]byte, 32), SignerID: make([]byte, 32), Debug: true}, nil
	}

	if len(policy.SignerID) == 0 && len(policy.UniqueID) == 0 {
		return nil, fmt.Errorf("%w: the policy names neither a signer id nor a unique id", ErrPolicy)
	}
	report, err := p.verifyRemoteReport(ev.Report)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrReportInvalid, err)
	}
	if err := checkBinding(report.Data, want, receipt); err != nil {
		return nil, err
	}
	if len(report.ProductID) < 2 {
		return nil, fmt.Errorf("%w: report has no product id", ErrReportInvalid)
	}
	res := &Result{
		Kind: KindSGX, UniqueID: report.UniqueID, SignerID: report.SignerID,
		ProductID:       binary.LittleEndian.Uint16(report.ProductID),
		SecurityVersion: report.SecurityVersion, Debug: report.Debug, TCBStatus: report.TCBStatus.String(),
	}
	switch {
	case len(policy.SignerID) > 0 && !bytes.Equal(res.SignerID, policy.SignerID):
		return nil, fmt.Errorf("%w: signer id %x", ErrPolicy, res.SignerID)
	case len(policy.UniqueID) > 0 && !bytes.Equal(res.UniqueID, policy.UniqueID):
		return nil, fmt.Errorf("%w: unique id %x", ErrPolicy, res.UniqueID)
	case res.ProductID != policy.ProductID:
		return nil, fmt.Errorf("%w: product id %d, want %d", ErrPolicy, res.ProductID, policy.ProductID)
	case res.SecurityVersion < policy.MinSecurityVersion:
		return nil, fmt.Errorf("%w: security version %d, want at least %d", ErrPolicy, res.SecurityVersion, policy.MinSecurityVersion)
	case res.Debug && !policy.AllowDebug:
		return nil, fmt.Errorf("%w: debug enclave", ErrPolicy)
	}
	return res, nil
}

// ReceiptKeyData returns the second 32 bytes of report data: the binding
// of the server's receipt-signing public key (DER SubjectPublicKeyInfo), or
// 32 zero bytes when there is none.
func ReceiptKeyData(receiptPubKeyDER []byte) [32]byte {
	var out [32]byte
	if len(receiptPubKeyDER) == 0 {
		return out
	}
	h := sha256.New()
	h.Write([]byte(receiptKeyLabel))
	h.Write(receiptPubKeyDER)
	h.Sum(out[:0])
	return out
}

// checkBinding checks 64 bytes of report data against ReportData and
// ReceiptKeyData.
func checkBinding(data []byte, want, receipt [32]byte) error {
	if len(data) != 64 || subtle.ConstantTimeCompare(data[:32], want[:]) != 1 ||
		subtle.ConstantTimeCompare(data[32:], receipt[:]) != 1 {
		return ErrBinding
	}
	return nil
}
