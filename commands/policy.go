package commands

import (
	"sync"

	"github.com/enclaveai/enclaveai/modelstore"
)

// Upload policy, checked on the length header of an upload's first chunk
// (StartUpload, before any of its bytes are read) and again when the
// command runs (FILE uploads, and what changed in between):
//   - allow-modelstore no refuses AI.MODELSTORE, AI.MODELSET and
//     AI.MODELDEL, and DEL, UNLINK, RENAME, EXPIRE or FLUSHALL of a model
//     (allowChange): only the models `loadmodel` loads at start exist.
//   - modelstore-requires-auth yes refuses uploads from a client that has
//     not authenticated as a named user (a `user` directive or a token's
//     sub; not the default user).
//   - max-model-bytes-per-user bounds the bytes of the model blobs each
//     user's keys hold, the model being replaced at the upload's key not
//     counted, together with the bytes the user has claimed for models to
//     come (quota): an upload in flight claims each chunk on its length
//     header, a resumable upload its announced size at AI.UPLOAD BEGIN.
//     A claim is checked and made in one step under quota.mu, and a store
//     checks again under it as the model enters the keyspace, and hands
//     its claim back in that same step: uploads of one user side by side,
//     on any number of connections, never take it past the limit (16 at
//     once stored 11 models against a limit of 1). A claim is given back
//     when its upload is stored, refused, cut off (a closed connection)
//     or, for a resumable upload, aborted or expired. The models' bytes
//     are the keyspace's count per owner (Keyspace.ModelBytes), so a check
//     costs the same however many keys there are, and nothing is paid
//     without the limit. A model whose TTL has passed no longer counts,
//     whether or not active expiry has removed it yet: it is gone for
//     every command (ModelBytes removes it).
//
// max-models (per user when users exist, so per tenant with tokens) is
// enforced after the store by evicting the user's oldest model
// (evictModels).

var (
	errModelstoreOff       = Reply("ERR model uploads and deletes are disabled on this server (allow-modelstore no)")
	errModelstoreNeedsAuth = Reply("NOPERM model uploads need an authenticated user (modelstore-requires-auth yes)")
	errUserModelBytes      = Reply("ERR model upload refused: the user's models would pass max-model-bytes-per-user")
)

// mayChangeModels is allow-modelstore, for uploads and deletes.
func (s *App) mayChangeModels(c *Client) error {
	if !c.internal && !s.Opts.AllowModelstore.Load() {
		return errModelstoreOff
	}
	return nil
}

// allowChange is the check for commands that delete, rename or expire
// values (DEL, UNLINK, RENAME, EXPIRE, FLUSHALL): with allow-modelstore no,
// no model may go, so the models `loadmodel` loaded are all there are.
func (x *Ctx) allowChange() modelstore.Allow {
	allow := x.allow()
	if x.C.internal || x.Opts.AllowModelstore.Load() {
		return allow
	}
	return func(v modelstore.Value) error {
		if _, ok := v.(*modelstore.Model); ok {
			return errModelstoreOff
		}
		if allow != nil {
			return allow(v)
		}
		return nil
	}
}

// mayUpload is the upload policy for client c, key and size excepted.
func (s *App) mayUpload(c *Client) error {
	if err := s.mayChangeModels(c); err != nil {
		return err
	}
	if !c.internal && s.Opts.ModelstoreRequiresAuth.Load() && (!c.Authed() || c.User() == "default") {
		return errModelstoreNeedsAuth
	}
	return nil
}

// quota is max-model-bytes-per-user's ledger of claims: the bytes each
// user has claimed for models not yet stored. Its lock is taken under
// App.tx (never the other way) and takes Keyspace.mu under it, to read
// the user's models and to store one (docs/LOCKS.md).
type quota struct {
	mu   sync.Mutex
	held map[string]int64 // user -> bytes its claims hold
}

// claim is what one upload holds in quota: n bytes for user.
type claim struct {
	user string
	n    int64
}

// quotaUser is the user whose max-model-bytes-per-user bounds c's uploads,
// and the limit: ok is false without the limit (0) and for the server's
// own client.
func (s *App) quotaUser(c *Client) (user string, limit int64, ok bool) {
	limit = s.Opts.MaxModelBytesPerUser.Load()
	if limit <= 0 || c.internal {
		return "", 0, false
	}
	return c.User(), limit, true
}

// overQuotaLocked is errUserModelBytes if a model of n bytes at key would
// take user past limit, next to the user's models at other keys and what
// its claims hold, own's excepted (own, if not nil, is the claim of the
// upload that brings those bytes). quota.mu is held.
func (s *App) overQuotaLocked(user, key string, limit, n int64, own *claim) error {
	held := s.quota.held[user]
	if own != nil && own.user == user {
		held -= own.n
	}
	used := s.Keys.ModelBytes(user, key)
	if user == "default" {
		used += s.Keys.ModelBytes("", key) // stored without users
	}
	if used+held+n > limit {
		return errUserModelBytes
	}
	return nil
}

// claimQuota adds n bytes to cl, the claim of c's upload onto key (""
// for none yet), if they do not take c's user past
// max-model-bytes-per-user; without the limit it claims nothing.
func (s *App) claimQuota(c *Client, cl *claim, key string, n int64) error {
	user, limit, ok := s.quotaUser(c)
	if !ok {
		return nil
	}
	s.quota.mu.Lock()
	defer s.quota.mu.Unlock()
	if err := s.overQuotaLocked(user, key, limit, n, nil); err != nil {
		return err
	}
	s.quota.held[user] += n
	cl.user, cl.n = user, cl.n+n
	return nil
}

// releaseQuota gives back what cl holds.
func (s *App) releaseQuota(cl *claim) {
	if cl == nil || cl.n == 0 {
		return
	}
	s.quota.mu.Lock()
	s.releaseQuotaLocked(cl)
	s.quota.mu.Unlock()
}

// releaseQuotaLocked is releaseQuota with quota.mu held.
func (s *App) releaseQuotaLocked(cl *claim) {
	if cl == nil || cl.n == 0 {
		return
	}
	if s.quota.held[cl.user] -= cl.n; s.quota.held[cl.user] == 0 {
		delete(s.quota.held, cl.user)
	}
	cl.n = 0
}

// checkQuota refuses, before any work, a model of n bytes at key that
// would take c's user past max-model-bytes-per-user (own: the claim of
// the upload that brought it, or nil). The store checks again
// (storeModel).
func (s *App) checkQuota(c *Client, key string, n int64, own *claim) error {
	user, limit, ok := s.quotaUser(c)
	if !ok {
		return nil
	}
	s.quota.mu.Lock()
	defer s.quota.mu.Unlock()
	return s.overQuotaLocked(user, key, limit, n, own)
}

// checkUploadStart decides, on the length header of an upload's first
// chunk, whether the upload may go on: the upload policy and another
// user's model at the key (the store checks again when it runs). Each
// chunk is then claimed against max-model-bytes-per-user as its length
// arrives (Upload.Admit).
func (s *App) checkUploadStart(c *Client, key []byte) error {
	if err := s.mayUpload(c); err != nil {
		return err
	}
	if allow := s.allowFor(c); allow != nil {
		if v, ok := s.Keys.Get(string(key)); ok {
			if err := allow(v); err != nil {
				return err
			}
		}
	}
	return nil
}
