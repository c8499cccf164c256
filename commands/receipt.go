package commands

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"time"

	"github.com/enclaveai/enclaveai/modelstore"
	"github.com/enclaveai/enclaveai/receipt"
)

// Signed inference receipts (package receipt has the format).
// `AI.MODELEXECUTE ... RECEIPT <nonce>` replies, instead of OK, with a
// receipt naming the model value that ran and its SHA-256, the input
// tensors it ran on and the outputs it made (each with the SHA-256 of its
// blob bytes), the nonce, the time, the user and the server.
// `AI.DAGEXECUTE RECEIPT <nonce> ...` appends one to its reply array, once
// every op and the PERSIST succeeded: its models are the DAG's
// MODELEXECUTE ops, its inputs the LOAD and TENSORSET tensors, its outputs
// the TENSORGET and PERSIST ones. The signing key is made at start, held
// only in memory, and bound into AI.ATTEST's evidence.

// MaxReceiptNonce bounds RECEIPT's nonce.
const MaxReceiptNonce = 1024

var errReceiptNonce = Reply("ERR RECEIPT takes a nonce of 1 to 1024 bytes")

// ReceiptPublicKey is the DER public key receipts are signed with.
func (s *App) ReceiptPublicKey() []byte { return s.receipts.PublicKeyDER() }

// parseReceiptNonce parses RECEIPT's nonce.
func parseReceiptNonce(a *Args) ([]byte, error) {
	if !a.More() {
		return nil, errReceiptNonce
	}
	n := a.Keep(a.Pos())
	a.Next()
	if len(n) == 0 || len(n) > MaxReceiptNonce {
		return nil, errReceiptNonce
	}
	return n, nil
}

func receiptTensor(key string, t *modelstore.Tensor) receipt.Tensor {
	sum := sha256.Sum256(t.Data)
	return receipt.Tensor{Key: key, DType: t.DType.String(), Shape: t.Shape, SHA256: hex.EncodeToString(sum[:])}
}

// receiptModel names m with its digest ("" if the model went away before
// its digest was computed, which a verifier refuses).
func receiptModel(key string, m *modelstore.Model) receipt.Model {
	rm := receipt.Model{Key: key}
	if sum, ok := modelDigest(m); ok {
		rm.SHA256 = hex.EncodeToString(sum[:])
	}
	return rm
}

// signReceipt fills the server's part of p and signs it.
func (x *Ctx) signReceipt(p *receipt.Payload, nonce []byte) (string, error) {
	now := time.Now()
	p.Server = receipt.Server{Name: "enclaveai", Version: Version, Mode: x.Enclave.Mode}
	p.User = x.C.User()
	p.Nonce = base64.RawURLEncoding.EncodeToString(nonce)
	p.Time, p.TimeNs = now.Unix(), now.UnixNano()
	return x.receipts.Sign(p)
}
