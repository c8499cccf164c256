package commands

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/enclaveai/enclaveai/enclave"
)

// AI.ATTEST <nonce>: evidence, from the enclave layer, that this server runs
// inside an enclave, bound to the caller's nonce, to the server's TLS
// public key and to the key it signs inference receipts with (receipt.go).
// In simulation mode the evidence is marked as simulated and a verifier
// refuses it unless told otherwise.
//
// It runs before AUTH (NoAuth), as a TLS handshake does: a client checks
// what it talks to before it sends a password or a token there. Before
// AUTH every argument is bounded at 16 KB (Limits), and the evidence says
// only what the server would tell anyone: its mode and its public keys.
// In SGX each answer costs a quote (the quoting enclave signs a report,
// milliseconds), so beyond a connection's first, the AI.ATTESTs of clients
// that have not authenticated share a budget of attest-rate answers a
// second; past it they are refused (errAttestRate) until the budget
// refills. Authenticated clients are not counted: their password or token
// already says who asks.
func init() {
	register(&Spec{Name: "ai.attest", Arity: 2, Flags: Readonly | LoadingOK | NoAuth, Group: "server",
		Summary: "Returns attestation evidence bound to the nonce and to the server's TLS public key.",
		Syntax:  "nonce", Parse: parseAttest})
	RegisterInfoSection(InfoSection{Name: "Enclave", Fields: enclaveInfo})
}

// EnclaveInfo is what the front end learned from the enclave layer at start.
type EnclaveInfo struct {
	Mode          string // "sgx" or "simulation"
	SealKeySource string
	SealPolicy    string
	Warning       string // shown in INFO; empty for an SGX production key
	TLSPublicKey  []byte // DER SubjectPublicKeyInfo of the TLS key; nil without TLS
}

func parseAttest(a Args) (Runner, error) {
	nonce := a.Keep(1)
	if len(nonce) < enclave.MinNonceSize || len(nonce) > enclave.MaxNonceSize {
		return nil, errorf("ERR %v", enclave.ErrNonce)
	}
	return attestCmd{nonce: nonce}, nil
}

// attestCmd is AI.ATTEST nonce.
type attestCmd struct{ nonce []byte }

// errAttestRate refuses an AI.ATTEST before AUTH past attest-rate.
var errAttestRate = Reply("ERR too many AI.ATTEST from unauthenticated clients: retry later, or AUTH first (attest-rate)")

// Run implements Runner.
func (c attestCmd) Run(x *Ctx) error {
	// A connection's first AI.ATTEST is always answered: a client attests
	// once a connection, before AUTH, and with one budget for all, one
	// connection asking in a loop kept every client from connecting
	// (diff review). The budget holds the repeats, so that a flood costs
	// a connection a quote.
	first := !x.C.attested
	x.C.attested = true
	if !first && !x.C.Authed() && !x.attests.take(x.Opts.AttestRate.Load(), time.Now()) {
		return errAttestRate
	}
	ev, err := enclave.Attest(c.nonce, x.Enclave.TLSPublicKey, x.ReceiptPublicKey())
	if err != nil {
		x.Log.Error("attestation failed", "err", err)
		return Reply("ERR attestation failed: see the server log")
	}
	b, err := ev.MarshalBinary()
	if err != nil {
		return err
	}
	x.W.Map(4)
	x.W.BulkString("mode")
	x.W.BulkString(x.Enclave.Mode)
	x.W.BulkString("evidence")
	x.W.Bulk(b)
	x.W.BulkString("tls_public_key")
	x.W.Bulk(x.Enclave.TLSPublicKey)
	x.W.BulkString("receipt_public_key")
	x.W.Bulk(x.ReceiptPublicKey())
	return nil
}

// attestBucket is a token bucket of AI.ATTEST answers for clients that
// have not authenticated: it holds at most a second's worth (rate) and
// refills at rate a second.
type attestBucket struct {
	mu      sync.Mutex
	tokens  float64
	at      time.Time // when tokens was last refilled
	refused atomic.Int64
}

// take spends one answer at now, false if none is left; rate <= 0 means
// no bound.
func (b *attestBucket) take(rate int64, now time.Time) bool {
	if rate <= 0 {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.at.IsZero() {
		b.tokens = float64(rate)
	} else if d := now.Sub(b.at); d > 0 {
		b.tokens = min(float64(rate), b.tokens+d.Seconds()*float64(rate))
	}
	b.at = now
	if b.tokens < 1 {
		b.refused.Add(1)
		return false
	}
	b.tokens--
	return true
}

func enclaveInfo(s *App) [][2]string {
	e := &s.Enclave
	f := [][2]string{{"enclave_mode", e.Mode}, {"seal_key_source", e.SealKeySource}, {"seal_policy", e.SealPolicy},
		{"tls", yesNo(e.TLSPublicKey != nil)}, {"attest_refused", itoa(s.attests.refused.Load())}}
	if e.Warning != "" {
		f = append(f, [2]string{"enclave_warning", e.Warning})
	}
	return f
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
