package enclave

import (
	"bytes"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/edgelesssys/ego/attestation"
)

// fakeSGX stands in for EGo inside an SGX enclave. Its "remote report" is
// the report data itself, and verifyRemoteReport hands back that data with
// the fake's identity, as the real platform would after checking signatures.
type fakeSGX struct {
	hwKey     []byte
	report    attestation.Report // identity of the enclave
	verifyErr error
}

func (f *fakeSGX) selfReport() (attestation.Report, error) { return f.report, nil }

func (f *fakeSGX) sealKey(p SealPolicy) ([]byte, error) {
	if f.hwKey == nil {
		return nil, errors.New("no seal key")
	}
	k := bytes.Clone(f.hwKey)
	if p == UniqueKey {
		k[0] ^= 0xff // the unique key differs from the product key
	}
	return k, nil
}

func (f *fakeSGX) remoteReport(data []byte) ([]byte, error) {
	return append(bytes.Clone(data), make([]byte, 64-len(data))...), nil
}

func (f *fakeSGX) verifyRemoteReport(report []byte) (attestation.Report, error) {
	if f.verifyErr != nil {
		return attestation.Report{}, f.verifyErr
	}
	r := f.report
	r.Data = report
	return r, nil
}

func newFakeSGX() *fakeSGX {
	return &fakeSGX{
		hwKey: bytes.Repeat([]byte{0x5a}, 16),
		report: attestation.Report{
			SignerID:        bytes.Repeat([]byte{0x11}, 32),
			UniqueID:        bytes.Repeat([]byte{0x22}, 32),
			ProductID:       append([]byte{1, 0}, make([]byte, 14)...),
			SecurityVersion: 3,
		},
	}
}

func TestModeOutsideEnclave(t *testing.T) {
	if Mode() != Simulation || Mode().String() != "simulation" {
		t.Fatalf("mode %v outside an enclave", Mode())
	}
	// Even with the EGo runtime's variable spoofed, the real syscalls
	// fail cleanly outside an enclave: no crash, no hang, no SGX.
	t.Setenv("EGOMAXTHREADS", "2")
	if m, _ := detect(hw); m != Simulation {
		t.Fatalf("detected %v with EGOMAXTHREADS set outside an enclave", m)
	}
	// And EGo's all-zero seal key is refused, never used.
	if _, err := sgxSealKey(hw, false, ProductKey); err == nil {
		t.Fatal("got an SGX seal key outside an enclave")
	}
}

func TestDetectSGX(t *testing.T) {
	f := newFakeSGX()
	f.report.Debug = true
	if m, debug := detect(f); m != SGX || !debug || m.String() != "sgx" {
		t.Fatalf("detect: %v, debug %v", m, debug)
	}
}

// simOpts gives simulation-mode options with a key file in a fresh
// directory and SealKeyEnv unset.
func simOpts(t *testing.T) SealKeyOptions {
	t.Setenv(SealKeyEnv, "")
	return SealKeyOptions{KeyFile: filepath.Join(t.TempDir(), "seal.key")}
}

func loadSim(opts SealKeyOptions) (*SealKey, error) { return loadSealKey(hw, Simulation, false, opts) }

func TestKeyFileCreatedAndReused(t *testing.T) {
	opts := simOpts(t)
	k1, err := loadSim(opts)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(opts.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 || st.Size() != SealKeySize {
		t.Fatalf("key file created with mode %v and %d bytes", st.Mode(), st.Size())
	}
	if len(k1.Key) != SealKeySize || isZero(k1.Key) || k1.Mode != Simulation {
		t.Fatalf("bad key %+v", k1)
	}
	if !strings.Contains(k1.Warning, "SIMULATION MODE") || !strings.Contains(k1.Warning, opts.KeyFile) {
		t.Errorf("warning %q should say simulation mode and name the key file", k1.Warning)
	}
	k2, err := loadSim(opts) // a restart
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(k1.Key, k2.Key) {
		t.Fatal("the key changed on restart")
	}
	other, err := loadSim(simOpts(t))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(k1.Key, other.Key) {
		t.Fatal("two new key files hold the same key")
	}
}

// Servers started at once on a fresh directory must agree on one key: the
// loser of the race reads the winner's whole file (before, it returned the
// "file not found" of its first look, or read a file not yet written).
func TestKeyFileConcurrentFirstStart(t *testing.T) {
	for round := 0; round < 20; round++ {
		path := filepath.Join(t.TempDir(), "seal.key")
		const n = 8
		keys := make([][]byte, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() { keys[i], errs[i] = keyFromFile(path) })
		}
		wg.Wait()
		for i := range n {
			if errs[i] != nil {
				t.Fatalf("round %d, loader %d: %v", round, i, errs[i])
			}
			if !bytes.Equal(keys[i], keys[0]) {
				t.Fatalf("round %d: loaders got different keys", round)
			}
		}
		if left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".seal.key.tmp*")); len(left) != 0 {
			t.Fatalf("temporary files left behind: %v", left)
		}
	}
}

func TestKeyFileRefused(t *testing.T) {
	for name, c := range map[string]struct {
		content []byte
		perm    os.FileMode
		want    error
	}{
		"group readable": {bytes.Repeat([]byte{1}, 32), 0o640, ErrKeyFile},
		"world readable": {bytes.Repeat([]byte{1}, 32), 0o604, ErrKeyFile},
		"group writable": {bytes.Repeat([]byte{1}, 32), 0o620, ErrKeyFile},
		"short":          {bytes.Repeat([]byte{1}, 31), 0o600, ErrKeyFile},
		"long":           {bytes.Repeat([]byte{1}, 33), 0o600, ErrKeyFile},
		"hex text":       {[]byte(strings.Repeat("ab", 32)), 0o600, ErrKeyFile},
		"empty":          {nil, 0o600, ErrKeyFile},
		"all zero":       {make([]byte, 32), 0o600, ErrZeroKey},
	} {
		t.Run(name, func(t *testing.T) {
			opts := simOpts(t)
			if err := os.WriteFile(opts.KeyFile, c.content, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(opts.KeyFile, c.perm); err != nil {
				t.Fatal(err)
			}
			_, err := loadSim(opts)
			if !errors.Is(err, c.want) || !strings.Contains(err.Error(), opts.KeyFile) {
				t.Fatalf("got %v, want %v naming the file", err, c.want)
			}
		})
	}
	t.Run("directory", func(t *testing.T) {
		opts := simOpts(t)
		if err := os.Mkdir(opts.KeyFile, 0o700); err != nil {
			t.Fatal(err)
		}
		if _, err := loadSim(opts); !errors.Is(err, ErrKeyFile) {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("missing directory", func(t *testing.T) {
		opts := simOpts(t)
		opts.KeyFile = filepath.Join(opts.KeyFile, "nested", "seal.key")
		if _, err := loadSim(opts); err == nil {
			t.Fatal("created a key file in a directory that does not exist")
		}
	})
}

func TestEnvKey(t *testing.T) {
	opts := simOpts(t)
	want := bytes.Repeat([]byte{0xab}, 32)
	t.Setenv(SealKeyEnv, hex.EncodeToString(want))
	k, err := loadSim(opts)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(k.Key, want) || !strings.Contains(k.Warning, SealKeyEnv) {
		t.Fatalf("got %+v", k)
	}
	if _, err := os.Stat(opts.KeyFile); !errors.Is(err, os.ErrNotExist) {
		t.Error("the key file was created although the environment held the key")
	}
	for _, bad := range []string{strings.Repeat("a", 63), strings.Repeat("a", 66), strings.Repeat("zz", 32)} {
		t.Setenv(SealKeyEnv, bad)
		if _, err := loadSim(opts); !errors.Is(err, ErrKeyEnv) {
			t.Errorf("%q: got %v", bad, err)
		}
	}
	t.Setenv(SealKeyEnv, strings.Repeat("00", 32))
	if _, err := loadSim(opts); !errors.Is(err, ErrZeroKey) {
		t.Errorf("zero key: got %v", err)
	}
}

func TestNoKeySource(t *testing.T) {
	t.Setenv(SealKeyEnv, "")
	if _, err := loadSim(SealKeyOptions{}); err == nil {
		t.Fatal("no key file and no environment variable gave a key")
	}
}

func TestRequireSGX(t *testing.T) {
	opts := simOpts(t)
	opts.RequireSGX = true
	if _, err := LoadSealKey(opts); !errors.Is(err, ErrNotInEnclave) {
		t.Fatalf("got %v", err)
	}
	if _, err := os.Stat(opts.KeyFile); !errors.Is(err, os.ErrNotExist) {
		t.Error("a key file was created although SGX was required")
	}
}

func TestSGXSealKey(t *testing.T) {
	f := newFakeSGX()
	t.Setenv(SealKeyEnv, strings.Repeat("ab", 32)) // ignored in SGX mode
	prod, err := loadSealKey(f, SGX, false, SealKeyOptions{Policy: ProductKey, KeyFile: "/nonexistent/seal.key"})
	if err != nil {
		t.Fatal(err)
	}
	again, _ := loadSealKey(f, SGX, false, SealKeyOptions{})
	uniq, err := loadSealKey(f, SGX, false, SealKeyOptions{Policy: UniqueKey})
	if err != nil {
		t.Fatal(err)
	}
	if len(prod.Key) != SealKeySize || !bytes.Equal(prod.Key, again.Key) || bytes.Equal(prod.Key, uniq.Key) ||
		bytes.Equal(prod.Key, bytes.Repeat([]byte{0xab}, 32)) {
		t.Fatalf("product %x, again %x, unique %x", prod.Key, again.Key, uniq.Key)
	}
	if prod.Mode != SGX || prod.Warning != "" || prod.Source != "SGX product seal key" {
		t.Errorf("got %+v", prod)
	}
	if dbg, _ := loadSealKey(f, SGX, true, SealKeyOptions{}); !strings.Contains(dbg.Warning, "DEBUG") {
		t.Errorf("debug enclave warning %q", dbg.Warning)
	}
	f.hwKey = make([]byte, 16) // what EGo returns outside an enclave
	if _, err := loadSealKey(f, SGX, false, SealKeyOptions{}); !errors.Is(err, ErrZeroKey) {
		t.Errorf("zero hardware key: got %v", err)
	}
	f.hwKey = nil
	if _, err := loadSealKey(f, SGX, false, SealKeyOptions{}); err == nil {
		t.Error("a failing platform gave a key")
	}
}
