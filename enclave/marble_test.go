package enclave

import (
	"bytes"
	"strings"
	"testing"
)

func TestMarbleSealKey(t *testing.T) {
	for _, c := range []struct{ env, err string }{
		{"", "is not set"},
		{"zz", "must be 64 hex digits"},
		{strings.Repeat("ab", 31), "must be 64 hex digits"},
		{strings.Repeat("00", 32), "all zero"},
	} {
		t.Setenv(MarbleSealKeyEnv, c.env)
		if _, err := MarbleSealKey(); err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%q: %v, want %q", c.env, err, c.err)
		}
	}
	t.Setenv(MarbleSealKeyEnv, strings.Repeat("7f", 32))
	sk, err := MarbleSealKey()
	if err != nil || !bytes.Equal(sk.Key, bytes.Repeat([]byte{0x7f}, 32)) || !strings.Contains(sk.Source, "MarbleRun") {
		t.Fatalf("%+v, %v", sk, err)
	}
	if sk.Mode != SGX && sk.Warning == "" {
		t.Error("outside SGX the key must come with a warning")
	}
}
