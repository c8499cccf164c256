//go:build cgo && linux && amd64 && enclaveai_eclient

package enclave

import (
	"github.com/edgelesssys/ego/attestation"
	"github.com/edgelesssys/ego/eclient"
)

// verifyReport verifies with ego/eclient, for clients outside an enclave.
// eclient links the Open Enclave host verification library with cgo
// (#cgo LDFLAGS: -loehostverify -lcrypto -ldl, header
// openenclave/attestation/verifier.h), which only an EGo installation
// provides: that is why this file needs the enclaveai_eclient tag, e.g.
//
//	CGO_CFLAGS=-I/opt/ego/include CGO_LDFLAGS=-L/opt/ego/lib go build -tags enclaveai_eclient ./...
//
// and the verifying machine needs Intel's quote provider set up (see
// docs/ENCLAVE.md).
func verifyReport(report []byte) (attestation.Report, error) {
	return eclient.VerifyRemoteReport(report)
}
