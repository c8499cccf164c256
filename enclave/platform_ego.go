//go:build cgo && linux && amd64

package enclave

import (
	"errors"
	"os"

	"github.com/edgelesssys/ego/attestation"
	"github.com/edgelesssys/ego/enclave"
)

// egoPlatform calls EGo's enclave package. Outside an enclave its calls are
// syscalls with numbers Linux does not know (1000 and up): the kernel
// answers ENOSYS, or EPERM under Docker's seccomp profile, and EGo turns
// that into an error (or, for the seal keys, into an all-zero key).
type egoPlatform struct{}

var hw platform = egoPlatform{}

// errNotInEGo is returned instead of issuing the syscall at all when the
// EGo runtime is not there.
var errNotInEGo = errors.New("not running in an EGo enclave")

// inEGo reports whether the EGo runtime is present: inside an enclave it
// always sets EGOMAXTHREADS. Without it the SGX syscalls are not attempted,
// since a strict seccomp filter (systemd's SystemCallFilter=, say) would
// kill the process for an unknown syscall instead of failing it.
func inEGo() bool { return os.Getenv("EGOMAXTHREADS") != "" }

func (egoPlatform) selfReport() (attestation.Report, error) {
	if !inEGo() {
		return attestation.Report{}, errNotInEGo
	}
	return enclave.GetSelfReport()
}

func (egoPlatform) sealKey(p SealPolicy) ([]byte, error) {
	if !inEGo() {
		return nil, errNotInEGo
	}
	var key []byte
	var err error
	// EGo v1.9.0 deprecates these for GetRandom{Unique,Product}SealKey,
	// which derive a fresh key per call and need its key request stored
	// beside the data to derive it again. The snapshot format wraps each
	// snapshot's data key with one key derived the same way every time
	// (persistence/doc.go); storing key requests would be a format change.
	if p == UniqueKey {
		key, _, err = enclave.GetUniqueSealKey() //lint:ignore SA1019 deterministic key, see above
	} else {
		key, _, err = enclave.GetProductSealKey() //lint:ignore SA1019 deterministic key, see above
	}
	return key, err
}

func (egoPlatform) remoteReport(data []byte) ([]byte, error) {
	if !inEGo() {
		return nil, errNotInEGo
	}
	return enclave.GetRemoteReport(data)
}

func (egoPlatform) verifyRemoteReport(report []byte) (attestation.Report, error) {
	return verifyReport(report)
}
