package commands

import (
	"math"

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
//     counted. It walks the keyspace once per upload (uploads are rare and
//     heavy; nothing on the hot path pays for it). Two uploads of one user
//     in flight at once are each checked against what is stored, so they
//     may pass the limit by at most one model.
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

// uploadBudget is how many bytes an upload onto key may have under
// max-model-bytes-per-user: math.MaxInt64 without the limit.
func (s *App) uploadBudget(c *Client, key string) int64 {
	limit := s.Opts.MaxModelBytesPerUser.Load()
	if limit <= 0 || c.internal {
		return math.MaxInt64
	}
	user := c.User()
	var used int64
	for _, it := range s.Keys.Items() {
		m, ok := it.Value.(*modelstore.Model)
		if !ok || it.Key == key {
			continue
		}
		if owner, _ := ownerOf(m); owner == user {
			used += int64(len(m.Blob.Data))
		}
	}
	return limit - used
}

// checkUploadStart decides, on the length header of an upload's first
// chunk, whether the upload may go on: the upload policy, another user's
// model at the key (the store checks again when it runs), and the bytes
// the whole upload may total under max-model-bytes-per-user, which the
// front end checks as each chunk's length arrives.
func (s *App) checkUploadStart(c *Client, key []byte) (budget int64, err error) {
	if err := s.mayUpload(c); err != nil {
		return 0, err
	}
	if allow := s.allowFor(c); allow != nil {
		if v, ok := s.Keys.Get(string(key)); ok {
			if err := allow(v); err != nil {
				return 0, err
			}
		}
	}
	return s.uploadBudget(c, string(key)), nil
}

// checkUploadBudget refuses a chunk that takes an upload past its budget.
func checkUploadBudget(total, budget int64) error {
	if total > budget {
		return errUserModelBytes
	}
	return nil
}
