package commands

import "github.com/enclaveai/enclaveai/modelstore"

// Models belong to users. When `user` directives configure named users
// (config.User), a model belongs to the user whose client stored it
// (ModelMeta.Owner), and only that user's clients may read it
// (AI.MODELGET, AI.MODELINFO, AI.INFO), run it (AI.MODELEXECUTE and
// AI.MODELRUN, a DAG op), replace or delete it (AI.MODELSTORE, AI.MODELSET,
// AI.MODELDEL), or change its key (DEL, UNLINK, RENAME from or onto it,
// EXPIRE and PERSIST, FLUSHALL and FLUSHDB while it exists); AI._MODELSCAN
// lists only the caller's models, and max-models counts each user's models
// apart (evictModels). Key names stay visible to everyone
// (KEYS, SCAN, EXISTS, TYPE, TTL), as Redis shows them whatever the ACL.
// Where the check guards a write it runs under the keyspace lock
// (modelstore.Allow), so no other client's write slips in between. Models
// stored before users were configured belong to the default user. Without
// users every client is the default user and nothing is checked.

const errNoPermKey Reply = "NOPERM this user has no permissions to access one of the keys used as arguments"

// ownerOf is the user a model belongs to.
func ownerOf(m *modelstore.Model) string {
	if m.Owner == "" {
		return "default"
	}
	return m.Owner
}

// allow is the check of this client's access to values in the keyspace:
// nil without users.
func (x *Ctx) allow() modelstore.Allow { return x.Server.allowFor(x.C) }

func (s *Server) allowFor(c *Client) modelstore.Allow {
	if !s.Opts.UsersEnabled() {
		return nil
	}
	user := c.User()
	return func(v modelstore.Value) error {
		if m, ok := v.(*modelstore.Model); ok && ownerOf(m) != user {
			return errNoPermKey
		}
		return nil
	}
}

// mayUse checks a model the client is about to read or run.
func (x *Ctx) mayUse(m *modelstore.Model) error {
	if allow := x.allow(); allow != nil {
		return allow(m)
	}
	return nil
}

// CheckUploadKey refuses, on the length header of an upload's first chunk,
// a model upload onto a key that holds another user's model, so that none
// of its bytes are read; the store checks again when it runs.
func (s *Server) CheckUploadKey(c *Client, key []byte) error {
	allow := s.allowFor(c)
	if allow == nil {
		return nil
	}
	if v, ok := s.Keys.Get(string(key)); ok {
		return allow(v)
	}
	return nil
}
