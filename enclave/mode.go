package enclave

import (
	"sync"

	"github.com/edgelesssys/ego/attestation"
)

// RunMode says whether the process runs inside an SGX enclave.
type RunMode int

// The run modes.
const (
	Simulation RunMode = iota // not in an enclave: keys from a file, simulated reports
	SGX                       // inside an EGo enclave on SGX hardware
)

// String returns "sgx" or "simulation", as INFO shows it.
func (m RunMode) String() string {
	if m == SGX {
		return "sgx"
	}
	return "simulation"
}

// platform is what the package needs from EGo. hw is the real one, chosen by
// build tags; tests stand in a fake to exercise SGX mode without hardware.
type platform interface {
	// selfReport returns this enclave's own report; it fails outside one.
	selfReport() (attestation.Report, error)
	// sealKey returns the platform's seal key for the policy.
	sealKey(p SealPolicy) ([]byte, error)
	// remoteReport returns a report for remote attestation over data.
	remoteReport(data []byte) ([]byte, error)
	// verifyRemoteReport checks a remote report's signature chain and
	// returns its content, which the caller must still check.
	verifyRemoteReport(report []byte) (attestation.Report, error)
}

var (
	modeOnce sync.Once
	mode     RunMode
	debug    bool // SGX mode: the enclave was signed as a debug enclave
)

// Mode returns the run mode, detected on first use: SGX if and only if the
// process can get an SGX report of itself, which only an enclave can. Where
// the EGo runtime is absent the call is not even attempted, and outside an
// enclave it fails cleanly, so detection neither crashes nor blocks.
func Mode() RunMode {
	modeOnce.Do(func() { mode, debug = detect(hw) })
	return mode
}

func detect(p platform) (m RunMode, debug bool) {
	r, err := p.selfReport()
	if err != nil {
		return Simulation, false
	}
	return SGX, r.Debug
}
