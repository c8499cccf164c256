//go:build !(cgo && linux && amd64)

package enclave

import (
	"errors"

	"github.com/edgelesssys/ego/attestation"
)

// nonePlatform stands in for EGo where its enclave package cannot be built
// (it needs cgo, and EGo targets linux/amd64): always simulation mode.
type nonePlatform struct{}

var hw platform = nonePlatform{}

var errNoEGo = errors.New("built without EGo support (needs cgo on linux/amd64)")

func (nonePlatform) selfReport() (attestation.Report, error) { return attestation.Report{}, errNoEGo }

func (nonePlatform) sealKey(SealPolicy) ([]byte, error) { return nil, errNoEGo }

func (nonePlatform) remoteReport([]byte) ([]byte, error) { return nil, errNoEGo }

func (nonePlatform) verifyRemoteReport([]byte) (attestation.Report, error) {
	return attestation.Report{}, errNoEGo
}
