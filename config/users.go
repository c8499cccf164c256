package config

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
)

// User is one named user from a `user` directive, which takes a subset of
// Redis's ACL rules:
//
//	user <name> [on|off] [>password]... [#sha256-hex]... [nopass] [resetpass]
//
//	    [+@admin | +@all | allcommands | -@admin]
//
// A user starts off and without passwords, as in Redis. Users have no key
// rules and one command rule: administrative commands (Admin) are for the
// default user and the users given +@admin; every user may run every other
// command, but when users are configured a model belongs to the user who
// stored it, and only that user may read, run, change or delete it (see
// the README). The default user is not configured here: requirepass sets
// its password.
type User struct {
	Name   string
	On     bool
	NoPass bool
	// Admin lets the user run administrative commands (`+@admin`,
	// `+@all` or `allcommands`; `-@admin` takes it back): SHUTDOWN,
	// CONFIG, MONITOR, CLIENT KILL and LIST, ... Named users start without
	// it: with users, one tenant must not stop or reconfigure the server
	// of all. The default user always has it.
	Admin bool
	// Hashes are the SHA-256 digests of the user's passwords; the
	// passwords themselves are not kept.
	Hashes [][32]byte
}

// Check reports whether pass lets the user in, in constant time for a
// given number of passwords.
func (u *User) Check(pass string) bool {
	if !u.On {
		return false
	}
	if u.NoPass {
		return true
	}
	h := sha256.Sum256([]byte(pass))
	ok := 0
	for _, want := range u.Hashes {
		ok |= subtle.ConstantTimeCompare(h[:], want[:])
	}
	return ok == 1
}

// String shows the user as a `user` line with passwords as digests, for
// CONFIG GET: no password is ever shown.
func (u *User) String() string {
	parts := []string{u.Name, "off"}
	if u.On {
		parts[1] = "on"
	}
	if u.NoPass {
		parts = append(parts, "nopass")
	}
	if u.Admin {
		parts = append(parts, "+@admin")
	}
	for _, h := range u.Hashes {
		parts = append(parts, "#"+hex.EncodeToString(h[:]))
	}
	return strings.Join(parts, " ")
}

// addUser applies one `user` line; a second line for the same name adds
// to the first, as ACL SETUSER does.
func (o *Options) addUser(args []string) error {
	if len(args) < 1 {
		return fmt.Errorf("user needs: name [rules]")
	}
	name := args[0]
	if name == "default" {
		return fmt.Errorf("the default user is configured with requirepass")
	}
	if name == "" || strings.ContainsAny(name, " \t\r\n") {
		return fmt.Errorf("bad user name %q", name)
	}
	if o.Users == nil {
		o.Users = map[string]*User{}
	}
	u := o.Users[name]
	if u == nil {
		u = &User{Name: name}
	}
	for _, r := range args[1:] {
		switch {
		case strings.EqualFold(r, "on"):
			u.On = true
		case strings.EqualFold(r, "off"):
			u.On = false
		case strings.EqualFold(r, "nopass"):
			u.NoPass, u.Hashes = true, nil
		case strings.EqualFold(r, "resetpass"):
			u.NoPass, u.Hashes = false, nil
		case strings.EqualFold(r, "+@admin"), strings.EqualFold(r, "+@all"), strings.EqualFold(r, "allcommands"):
			u.Admin = true
		case strings.EqualFold(r, "-@admin"):
			u.Admin = false
		case strings.HasPrefix(r, ">"):
			u.addHash(sha256.Sum256([]byte(r[1:])))
		case strings.HasPrefix(r, "#"):
			b, err := hex.DecodeString(r[1:])
			if err != nil || len(b) != sha256.Size {
				return fmt.Errorf("user %s: a #password must be 64 hex digits (its SHA-256)", name)
			}
			u.addHash([32]byte(b))
		default:
			return fmt.Errorf("user %s: unsupported rule %q (EnclaveAI takes on, off, >password, #sha256, nopass, resetpass, +@admin, -@admin; every user may run every command but the administrative ones, which need +@admin)", name, r)
		}
	}
	o.Users[name] = u
	return nil
}

func (u *User) addHash(h [32]byte) {
	u.NoPass = false
	if !slices.Contains(u.Hashes, h) {
		u.Hashes = append(u.Hashes, h)
	}
}

// UsersEnabled reports whether named users are configured, or token
// authentication names them, which makes models belong to the users who
// store them.
func (o *Options) UsersEnabled() bool { return len(o.Users) > 0 || o.JWTPublicKeyFile != "" }

func (o *Options) usersString() string {
	names := make([]string, 0, len(o.Users))
	for n := range o.Users {
		names = append(names, n)
	}
	slices.Sort(names)
	lines := make([]string, len(names))
	for i, n := range names {
		lines[i] = o.Users[n].String()
	}
	return strings.Join(lines, "; ")
}
