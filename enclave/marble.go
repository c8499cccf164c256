package enclave

import (
	"encoding/hex"
	"fmt"
	"os"
)

// MarbleSealKeyEnv holds, in a MarbleRun marble, the seal key as 64 hex
// digits: the manifest's `"ENCLAVEAI_MARBLE_SEAL_KEY": "{{ hex
// .Secrets.enclaveai_seal_key }}"`, a shared 256-bit symmetric key, so that
// every replica seals with the same key and can read the others' snapshots
// and logs. Inside an enclave the variable is set by EGo's premain from what
// the Coordinator sent after verifying the enclave's quote: EGo does not
// pass the host's environment in, so unlike SealKeyEnv it cannot be chosen
// by the host.
const MarbleSealKeyEnv = "ENCLAVEAI_MARBLE_SEAL_KEY"

// MarbleSealKey is the seal key of a MarbleRun marble (MarbleSealKeyEnv).
func MarbleSealKey() (*SealKey, error) {
	m := Mode()
	v := os.Getenv(MarbleSealKeyEnv)
	if v == "" {
		return nil, fmt.Errorf("marble mode: %s is not set (the MarbleRun manifest gives it from a shared symmetric-key secret)", MarbleSealKeyEnv)
	}
	k, err := hex.DecodeString(v)
	if err != nil || len(k) != SealKeySize {
		return nil, fmt.Errorf("marble mode: %s must be 64 hex digits", MarbleSealKeyEnv)
	}
	if isZero(k) {
		return nil, fmt.Errorf("marble mode: %s: %w", MarbleSealKeyEnv, ErrZeroKey)
	}
	sk := &SealKey{Key: k, Mode: m, Source: "MarbleRun secret " + MarbleSealKeyEnv}
	if m != SGX {
		sk.Warning = "SIMULATION MODE: not running inside an SGX enclave. Snapshots are sealed with the MarbleRun secret in " +
			MarbleSealKeyEnv + ", which any process given this environment holds; attestation reports are simulated and prove nothing."
	}
	return sk, nil
}
