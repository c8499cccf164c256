package commands

import "github.com/enclaveai/enclaveai/modelstore"

// Values belong to users. When `user` directives configure named users
// (config.User), every model and tensor belongs to the user whose client
// stored it (ModelMeta.Owner, Tensor.Owner), and only that user's clients
// may read it (AI.MODELGET, AI.MODELINFO, AI.INFO, AI.TENSORGET, a model
// input, a DAG LOAD), run it (AI.MODELEXECUTE and AI.MODELRUN, a DAG op),
// replace it (AI.MODELSTORE, AI.MODELSET, AI.TENSORSET, a model output, a
// DAG PERSIST), delete it (AI.MODELDEL, DEL, UNLINK, FLUSHALL and FLUSHDB
// while it exists) or change its key (RENAME from or onto it, EXPIRE,
// PERSIST). AI._MODELSCAN lists only the caller's models, and max-models
// counts each user's models apart (evictModels). Key names stay visible to
// everyone (KEYS, SCAN, EXISTS, TYPE, TTL), as Redis shows them whatever
// the ACL. Where the check guards a write it runs under the keyspace lock
// (modelstore.Allow), so no other client's write slips in between. Values
// stored before users were configured belong to the default user. Without
// users every client is the default user, and may use every value but
// those a named user stored while users were configured: they stay out of
// reach until that user is configured again (security review: a server
// restarted without its user directives served every tenant's values to
// anyone).

const errNoPermKey Reply = "NOPERM this user has no permissions to access one of the keys used as arguments"

// ownerOf is the user a value belongs to; ok is false for values nobody
// owns.
func ownerOf(v modelstore.Value) (owner string, ok bool) {
	switch v := v.(type) {
	case *modelstore.Model:
		owner = v.Owner
	case *modelstore.Tensor:
		owner = v.Owner
	default:
		return "", false
	}
	if owner == "" {
		owner = "default"
	}
	return owner, true
}

// stamp is the owner to record on a value this client stores: "" (the
// default user) without users, which costs nothing on the hot path.
func (x *Ctx) stamp() string { return x.ownerOf(x.C) }

// allow is the check of this client's access to values in the keyspace:
// defaultsOnly without users.
func (x *Ctx) allow() modelstore.Allow { return x.App.allowFor(x.C) }

func (s *App) allowFor(c *Client) modelstore.Allow {
	if !s.Opts.UsersEnabled() {
		return defaultsOnly
	}
	user := c.User()
	return func(v modelstore.Value) error {
		if owner, ok := ownerOf(v); ok && owner != user {
			return errNoPermKey
		}
		return nil
	}
}

// defaultsOnly is the check without users: every client is the default
// user (a package-level func, so that the hot path allocates nothing).
var defaultsOnly modelstore.Allow = func(v modelstore.Value) error {
	if owner, ok := ownerOf(v); ok && owner != "default" {
		return errNoPermKey
	}
	return nil
}

// mayUse checks a value the client is about to read or run.
func (x *Ctx) mayUse(v modelstore.Value) error {
	if allow := x.allow(); allow != nil {
		return allow(v)
	}
	return nil
}

// lookupOrNull fetches key's value for a command that answers a missing
// key with a null (OBJECT, MEMORY USAGE): nil with the null written when
// there is none, nil and an error when the client may not read it.
func (x *Ctx) lookupOrNull(key string) (modelstore.Value, error) {
	v, ok := x.Keys.Get(key)
	if !ok {
		x.W.Null()
		return nil, nil
	}
	if err := x.mayUse(v); err != nil {
		return nil, err
	}
	return v, nil
}

// getTensor fetches a tensor the client may read.
func (x *Ctx) getTensor(key string) (*modelstore.Tensor, error) {
	t, err := x.Keys.GetTensor(key)
	if err != nil {
		return nil, err
	}
	if err := x.mayUse(t); err != nil {
		return nil, err
	}
	return t, nil
}
