package config

import (
	"strings"
	"syscall"
	"testing"
)

// CONFIG SET maxclients past what the open-file limit holds is refused
// with Redis's text; loading keeps the value (the server lowers it at
// start, with a warning).
func TestMaxClientsFitsTheOpenFileLimit(t *testing.T) {
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
		t.Skip(err)
	}
	low := old
	low.Cur = 200
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Skip(err)
	}
	defer syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old)
	o := Default()
	err := o.Set("maxclients", "10000")
	if err == nil || !strings.Contains(err.Error(), "The operating system is not able to handle the specified number of clients, try with 72") {
		t.Errorf("CONFIG SET maxclients 10000 under a limit of 200: %v", err)
	}
	if err := o.Set("maxclients", "72"); err != nil {
		t.Errorf("CONFIG SET maxclients 72: %v", err)
	}
	if o, err := Load([]string{"--maxclients", "10000"}); err != nil || o.MaxClients.Load() != 10000 {
		t.Errorf("loading: %v", err)
	}
}
