//go:build cgo && linux && amd64 && !enclaveai_eclient

package enclave

import (
	"fmt"

	"github.com/edgelesssys/ego/attestation"
	"github.com/edgelesssys/ego/enclave"
)

// verifyReport verifies through the EGo enclave runtime, so it works only
// inside an enclave. Outside one, build with -tags enclaveai_eclient.
func verifyReport(report []byte) (attestation.Report, error) {
	if !inEGo() {
		return attestation.Report{}, fmt.Errorf("verifying SGX reports outside an enclave needs a build with -tags enclaveai_eclient and EGo installed: %w", errNotInEGo)
	}
	return enclave.VerifyRemoteReport(report)
}
