package config

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
)

func TestUsers(t *testing.T) {
	h := sha256.Sum256([]byte("s2"))
	o, err := Load([]string{"--user", "alice", "on", ">s1", "--user", "bob", "on", "#" + hex.EncodeToString(h[:]),
		"--user", "carol", ">s3", "--user", "dave", "on", "nopass", "--user", "alice", ">s1b"})
	if err != nil {
		t.Fatal(err)
	}
	if !o.UsersEnabled() || len(o.Users) != 4 {
		t.Fatalf("users %v", o.Users)
	}
	for _, c := range []struct {
		user, pass string
		ok         bool
	}{
		{"alice", "s1", true}, {"alice", "s1b", true}, {"alice", "s2", false},
		{"bob", "s2", true}, {"bob", "", false},
		{"carol", "s3", false}, // off
		{"dave", "anything", true},
	} {
		if got := o.Users[c.user].Check(c.pass); got != c.ok {
			t.Errorf("%s/%s: %v, want %v", c.user, c.pass, got, c.ok)
		}
	}
	shown, _ := o.Get("user")
	if strings.Contains(shown, "s1") || !strings.Contains(shown, "bob on #"+hex.EncodeToString(h[:])) {
		t.Errorf("CONFIG GET user shows %q", shown)
	}
	a, err := Load([]string{"--user", "root", "on", ">r", "+@admin", "--user", "ops", "on", ">o", "allcommands", "-@admin", "--user", "all", "+@all"})
	if err != nil {
		t.Fatal(err)
	}
	if !a.Users["root"].Admin || a.Users["ops"].Admin || !a.Users["all"].Admin || o.Users["alice"].Admin {
		t.Errorf("admin: root %v ops %v all %v alice %v", a.Users["root"].Admin, a.Users["ops"].Admin, a.Users["all"].Admin, o.Users["alice"].Admin)
	}
	if shown, _ := a.Get("user"); !strings.Contains(shown, "root on +@admin #") {
		t.Errorf("CONFIG GET user shows %q", shown)
	}
	if Default().UsersEnabled() {
		t.Error("users enabled by default")
	}
	for _, bad := range [][]string{
		{"--user", "default", "on", ">x"},
		{"--user", "eve", "on", "~*"},
		{"--user", "eve", "on", "+@read"},
		{"--user", "eve", "#abc"},
		{"--user"},
	} {
		if _, err := Load(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if err := o.Set("user", "x on"); err == nil {
		t.Error("CONFIG SET user accepted")
	}
}
