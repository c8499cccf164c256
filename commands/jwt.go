package commands

import (
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"github.com/enclaveai/enclaveai/jwtauth"
)

// Token authentication: with jwt-public-key-file set, AUTH's password (in
// `AUTH <token>`, `AUTH <user> <token>` and `HELLO 3 AUTH <user> <token>`)
// is taken as a JWT when it has a compact JWS's shape. A token that
// verifies (package jwtauth: ES256 only, exp and nbf with jwt-leeway,
// jwt-issuer and jwt-audience) logs the connection in as its sub, who then
// owns models and tensors as a configured user does; with a user argument
// the sub must equal it. Any failure is -WRONGPASS and nothing else: the
// reason is logged, the token never is. Once the token's exp (plus the
// leeway) has passed, the connection gets -NOAUTH until it authenticates
// again (App.check).

// SetupJWT reads jwt-public-key-file, if set (Prepare); a bad file stops
// the start.
func (s *App) SetupJWT() error {
	if s.Opts.JWTPublicKeyFile == "" {
		return nil
	}
	data, err := os.ReadFile(s.Opts.JWTPublicKeyFile)
	if err != nil {
		return fmt.Errorf("jwt-public-key-file: %w", err)
	}
	keys, err := jwtauth.ParsePublicKeys(data)
	if err != nil {
		return fmt.Errorf("jwt-public-key-file: %w", err)
	}
	s.jwt = &jwtauth.Verifier{Keys: keys, Issuer: s.Opts.JWTIssuer, Audience: s.Opts.JWTAudience,
		Leeway: time.Duration(s.Opts.JWTLeeway) * time.Second}
	s.Log.Info("token authentication on", "keys", len(keys))
	return nil
}

// login is who an AUTH made the client: the user, and when that stops
// holding (zero: never).
type login struct {
	user    string
	expires time.Time
}

// authenticate checks AUTH's or HELLO's credentials: a token when token
// authentication is on and pass looks like one, a password otherwise.
// user is "" when AUTH named none.
func authenticate(x *Ctx, user, pass string) (login, error) {
	if x.jwt != nil && jwtauth.LooksLikeToken(pass) {
		id, err := x.jwt.Verify(pass, time.Now())
		if err == nil && user != "" && user != id.User {
			err = fmt.Errorf("token sub is not the user AUTH named")
		}
		// A user directive's off holds for tokens too (security review:
		// a token logged in as a user switched off, admin included).
		if u := x.Opts.Users[id.User]; err == nil && u != nil && !u.On {
			err = fmt.Errorf("token sub is a user switched off")
		}
		if err != nil {
			if n, ok := x.refusedTokens.allow(time.Now().UnixMilli()); ok {
				x.Log.Info("token refused", "client", x.C.ID, "addr", x.C.Addr, "reason", err.Error(), "refused_unlogged_before", n)
			}
			return login{}, errWrongPass
		}
		return login{user: id.User, expires: id.Expires.Add(x.jwt.Leeway)}, nil
	}
	legacy := user == ""
	if legacy {
		user = "default"
	}
	if err := checkPassword(x, user, pass, legacy); err != nil {
		return login{}, err
	}
	return login{user: user}, nil
}

// logThrottle lets one log line through a second and counts those it
// holds back, which the next line gives: a client before AUTH could
// otherwise write the log as fast as it sends AUTH with bad tokens (3,000
// lines in 0.44 s from one connection: security review). Redis does not
// log failed AUTH at all.
type logThrottle struct {
	last, held atomic.Int64 // unix ms of the last line let through; lines held since
}

// allow reports whether a line may be written at nowMs, and how many were
// held back before it.
func (t *logThrottle) allow(nowMs int64) (int64, bool) {
	last := t.last.Load()
	if nowMs-last < 1000 || !t.last.CompareAndSwap(last, nowMs) {
		t.held.Add(1)
		return 0, false
	}
	return t.held.Swap(0), true
}
