package enclave

import (
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// SealKeySize is the size in bytes of the seal key LoadSealKey returns.
const SealKeySize = 32

// SealKeyEnv is the environment variable that may hold the simulation-mode
// seal key as 64 hex digits. When set and not empty it takes precedence over
// the key file. In SGX mode it is ignored: the host must not choose the key
// (and EGo does not pass the host's environment into the enclave anyway).
const SealKeyEnv = "ENCLAVEAI_SEAL_KEY"

// sgxKeyLabel derives the 256-bit seal key from SGX's 128-bit one. Part of
// the derivation of every SGX-mode key: never change it.
const sgxKeyLabel = "EnclaveAI seal key v1"

// SealPolicy chooses which SGX seal key LoadSealKey derives from.
type SealPolicy int

// The seal policies.
const (
	// ProductKey derives from the signer and the product id: every
	// version of the enclave signed with the same key and product id gets
	// the same seal key, so snapshots survive upgrades. The default.
	ProductKey SealPolicy = iota
	// UniqueKey derives from the exact enclave build (MRENCLAVE): a new
	// build cannot read the snapshots of the old one.
	UniqueKey
)

// String returns "product" or "unique".
func (p SealPolicy) String() string {
	if p == UniqueKey {
		return "unique"
	}
	return "product"
}

// SealKeyOptions says where LoadSealKey finds the seal key.
type SealKeyOptions struct {
	// Policy chooses the SGX seal key. Ignored in simulation mode.
	Policy SealPolicy
	// KeyFile is the simulation-mode key file: exactly 32 bytes, readable
	// and writable by its owner only. If it does not exist LoadSealKey
	// creates it with mode 0600 and random content. Ignored in SGX mode
	// and when SealKeyEnv is set.
	KeyFile string
	// RequireSGX makes LoadSealKey fail outside an enclave, so that a
	// production deployment cannot fall back to a key on disk.
	RequireSGX bool
}

// SealKey is the key that seals snapshots, and where it came from.
type SealKey struct {
	Key    []byte  // SealKeySize bytes, never all zero
	Mode   RunMode // the mode it was derived in
	Source string  // where it came from, for logs and INFO
	// Warning is non-empty when the key is weaker than an SGX production
	// key: in simulation mode, or in a debug enclave. The caller must log
	// it prominently and show it in INFO.
	Warning string
}

// The errors of LoadSealKey; test with errors.Is.
var (
	// ErrNotInEnclave means RequireSGX was set outside an enclave.
	ErrNotInEnclave = errors.New("not running inside an SGX enclave")
	// ErrZeroKey means the key is all zero, which EGo returns outside an
	// enclave instead of failing.
	ErrZeroKey = errors.New("seal key is all zero")
	// ErrKeyFile means the key file is unusable: wrong size, not a
	// regular file, or open to group or others.
	ErrKeyFile = errors.New("unusable seal key file")
	// ErrKeyEnv means SealKeyEnv is set but is not 64 hex digits.
	ErrKeyEnv = errors.New(SealKeyEnv + " must be 64 hex digits")
)

// LoadSealKey returns the key that seals snapshots: in SGX mode derived from
// the platform's seal key for opts.Policy, in simulation mode read from
// SealKeyEnv or opts.KeyFile.
func LoadSealKey(opts SealKeyOptions) (*SealKey, error) {
	Mode()
	return loadSealKey(hw, mode, debug, opts)
}

func loadSealKey(p platform, m RunMode, debug bool, opts SealKeyOptions) (*SealKey, error) {
	if m == SGX {
		return sgxSealKey(p, debug, opts.Policy)
	}
	if opts.RequireSGX {
		return nil, fmt.Errorf("%w, and the configuration requires one", ErrNotInEnclave)
	}
	var key []byte
	var source string
	if v := os.Getenv(SealKeyEnv); v != "" {
		k, err := hex.DecodeString(v)
		if err != nil || len(k) != SealKeySize {
			return nil, ErrKeyEnv
		}
		key, source = k, "environment variable "+SealKeyEnv
	} else {
		if opts.KeyFile == "" {
			return nil, fmt.Errorf("simulation mode needs a seal key: set %s or configure a key file", SealKeyEnv)
		}
		k, err := keyFromFile(opts.KeyFile)
		if err != nil {
			return nil, err
		}
		key, source = k, "key file "+opts.KeyFile
	}
	if isZero(key) {
		return nil, fmt.Errorf("%s: %w", source, ErrZeroKey)
	}
	return &SealKey{Key: key, Mode: Simulation, Source: source,
		Warning: "SIMULATION MODE: not running inside an SGX enclave. Snapshots are sealed with the seal key from " +
			source + ", so the data is only as safe as that key; attestation reports are simulated and prove nothing."}, nil
}

func sgxSealKey(p platform, debug bool, policy SealPolicy) (*SealKey, error) {
	hwKey, err := p.sealKey(policy)
	if err != nil {
		return nil, fmt.Errorf("SGX %s seal key: %w", policy, err)
	}
	if len(hwKey) == 0 || isZero(hwKey) {
		return nil, fmt.Errorf("SGX %s seal key: %w", policy, ErrZeroKey)
	}
	// SGX seal keys are 128 bits; HKDF stretches them to the 256 bits the
	// snapshot format takes.
	key, err := hkdf.Key(sha256.New, hwKey, nil, sgxKeyLabel, SealKeySize)
	if err != nil {
		return nil, err
	}
	sk := &SealKey{Key: key, Mode: SGX, Source: "SGX " + policy.String() + " seal key"}
	if debug {
		sk.Warning = "SGX DEBUG ENCLAVE: the host can read this enclave's memory, seal key included, with a debugger. Sign with debug=false for production."
	}
	return sk, nil
}

func isZero(b []byte) bool {
	return subtle.ConstantTimeCompare(b, make([]byte, len(b))) == 1
}

// keyFromFile reads the key file, creating it first if it does not exist.
// Two processes starting at once agree on one key: the file appears whole
// (createKeyFile links a finished temporary file into place), and the one
// that loses the race reads the winner's.
func keyFromFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		key, cerr := createKeyFile(path)
		if !errors.Is(cerr, os.ErrExist) {
			return key, cerr
		}
		f, err = os.Open(path) // created by someone else meanwhile
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	switch {
	case !st.Mode().IsRegular():
		return nil, fmt.Errorf("%w: %s is not a regular file", ErrKeyFile, path)
	case st.Mode().Perm()&0o077 != 0:
		return nil, fmt.Errorf("%w: %s has mode %#o, so group or others may access it: chmod 600 it", ErrKeyFile, path, st.Mode().Perm())
	case st.Size() != SealKeySize:
		return nil, fmt.Errorf("%w: %s is %d bytes, a seal key is %d", ErrKeyFile, path, st.Size(), SealKeySize)
	}
	key := make([]byte, SealKeySize)
	if _, err := io.ReadFull(f, key); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrKeyFile, path, err)
	}
	return key, nil
}

// createKeyFile creates a key file with a fresh random key, durably: the
// key must not be lost once a snapshot is sealed with it. The key is written
// and fsynced under a temporary name first and then hard-linked to path,
// which fails with os.ErrExist if path exists: no process ever reads a
// key file that is still being written.
func createKeyFile(path string) (key []byte, err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return nil, err
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	defer f.Close()
	if err := f.Chmod(0o600); err != nil {
		return nil, err
	}
	key = make([]byte, SealKeySize)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	if _, err := f.Write(key); err != nil {
		return nil, err
	}
	if err := f.Sync(); err != nil {
		return nil, err
	}
	if err := os.Link(tmp, path); err != nil {
		return nil, err
	}
	d, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return key, d.Sync()
}
