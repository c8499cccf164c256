package commands

import (
	"github.com/enclaveai/enclaveai/modelstore"
)

// Uploads: the BLOB chunks of AI.MODELSTORE and AI.MODELSET are the only
// arguments that may be larger than client-query-buffer-limit. The network
// front end reads them (Spec.Payload tells which arguments they are) into
// memory of its choosing, a modelstore.ModelBuffer for a large model, and
// asks an Upload (Admit, and for a large model Reserve) before each one's
// bytes arrive, so that max-model-size, the user's quota
// (max-model-bytes-per-user: each chunk is claimed, policy.go) and
// maxmemory refuse an upload before anything is allocated. The command
// then finds the buffer with Args.Upload and hands it to the model registry
// without copying it; the front end drops its own reference when the
// command is over, which frees a buffer that nothing kept (a parse error, a
// refused or duplicate model).

// modelPayloadArg is the Payload of AI.MODELSTORE and AI.MODELSET: the
// arguments after the first BLOB word that follows the device, TAG's value
// excepted, are chunks. It mirrors parseModelStore on every command that
// parses; on those that do not, the upload is dropped anyway.
func modelPayloadArg(prev [][]byte, i int) bool {
	for j := 4; j < i; j++ {
		if j == 5 && isWord(prev[4], "TAG") {
			continue
		}
		if isWord(prev[j], "BLOB") {
			return true
		}
	}
	return false
}

// Upload is the command layer's side of one command's payload while the
// front end reads it, the whole interface between the two (server/ingest.go):
// StartUpload on the first chunk's length header, Admit on each chunk's,
// Reserve and NewBuffer for what goes into a model buffer, End when the
// command is over, then DispatchUpload.
type Upload struct {
	app *App
	c   *Client
	// key is an AI.MODELSTORE's key, whose model the quota does not count
	// (the upload replaces it); quota is whether max-model-bytes-per-user
	// applies, claim what the chunks claimed against it.
	key      string
	quota    bool
	claim    claim
	total    int64 // chunk bytes admitted
	reserved int64 // bytes reserved against maxmemory
	// sess is the resumable upload an AI.UPLOAD APPEND goes to
	// (upload_session.go), whose buffer exists already; off is the bytes
	// it held when the APPEND began, room what it may still take (its
	// announced size less off).
	sess *uploadSession
	off  int64
	room int64
}

// StartUpload decides, on the length header of an upload's first chunk and
// before any of its bytes, whether c may upload at all: prev is the
// command's arguments before that chunk (prev[0] the name), spec the
// command's. For every command, the user's right to run it (checkAdmin);
// for AI.MODELSTORE, the upload policy and the key's owner; for AI.UPLOAD
// APPEND, that the upload is c's, idle, and holds exactly the offset's
// bytes (Buffer is then where the chunks go).
func (s *App) StartUpload(c *Client, spec *Spec, prev [][]byte) (*Upload, error) {
	// A command c may not run at all is refused before any of its bytes
	// are held: Dispatch refuses it only once the whole payload is read,
	// and CLUSTERX RESTORE's may be max-model-size (4 GB) on every
	// connection of a user without +@admin.
	if err := s.checkAdmin(c, spec, prev); err != nil {
		return nil, err
	}
	u := &Upload{app: s, c: c}
	if isWord(prev[0], "ai.upload") {
		off, ok := parseInt(prev[3])
		if !ok || off < 0 {
			return nil, errNotInteger
		}
		sess, err := s.beginAppend(c, string(prev[2]), off)
		if err != nil {
			return nil, err
		}
		u.sess, u.off, u.room = sess, off, sess.size-off
		return u, nil
	}
	if isWord(prev[0], "clusterx") {
		// CLUSTERX RESTORE: a key on the move between nodes (migrate.go),
		// an admin command (checked above); max-model-size and maxmemory
		// still bound it.
		return u, nil
	}
	if len(prev) > 1 {
		if err := s.checkUploadStart(c, prev[1]); err != nil {
			return nil, err
		}
		u.key, u.quota = string(prev[1]), true
		c.payload = u
	}
	return u, nil
}

// Buffer is the resumable upload's buffer that an AI.UPLOAD APPEND's
// chunks go into, after the bytes it holds, with a reference for the
// caller; nil for other commands. Chunks read into it count only once the
// command has run (ModelBuffer.Filled is the command's): the caller must
// not report them.
func (u *Upload) Buffer() *modelstore.ModelBuffer {
	if u.sess == nil {
		return nil
	}
	u.sess.buf.Ref()
	return u.sess.buf
}

// Admit accounts for the next chunk, of n bytes, on its length header:
// refused when the chunks would total more than max-model-size (for a
// resumable upload, its announced size), or when they would take the
// user past max-model-bytes-per-user, next to its models and every claim
// of its other uploads; else the chunk is claimed (End gives it back,
// unless the model was stored).
func (u *Upload) Admit(n int64) error {
	if u.sess != nil {
		if u.total+n > u.room {
			return errUploadFull
		}
		u.total += n
		return nil
	}
	if u.total+n > u.app.Opts.MaxModelSize.Load() {
		return errModelTooBig
	}
	if u.quota {
		if err := u.app.claimQuota(u.c, &u.claim, u.key, n); err != nil {
			return err
		}
	}
	u.total += n
	return nil
}

// Reserve accounts for n payload bytes read into a model buffer before
// they are read (reserveUpload); End gives the room back.
//
// Unlike the check a small model gets once parsed, this one cannot know
// that the upload will turn out to duplicate a model already held (which
// adds no memory): a large one needs the room while it arrives.
//
// An AI.UPLOAD APPEND's chunks are reserved so too: the resumable upload
// keeps what the command commits (End), and gives it back when it ends.
func (u *Upload) Reserve(n int64) error {
	if err := u.app.reserveUpload(n); err != nil {
		return err
	}
	u.reserved += n
	return nil
}

// reserveUpload accounts for n bytes of an upload against maxmemory, if
// they fit next to what the keyspace holds and every upload in flight or
// held (the keyspace's budget leaves them out: heldApart).
func (s *App) reserveUpload(n int64) error {
	if err := s.Keys.CheckMemory(n); err != nil {
		return err
	}
	s.uploading.Add(n)
	return nil
}

// heldApart is the memory held for commands outside the keyspace that
// maxmemory bounds with it, and used_memory shows: uploads in flight and
// resumable uploads (uploading), and the commands transactions hold
// queued (queuedMem).
func (s *App) heldApart() int64 { return s.uploading.Load() + s.queuedMem.Load() }

// handOver gives back what the upload reserved against maxmemory once a
// model's blob holds its bytes (compileModel): the registry counts them
// from then on, and they would count twice until End.
func (u *Upload) handOver() {
	u.app.uploading.Add(-u.reserved)
	u.reserved = 0
}

// NewBuffer is a model buffer for the upload (modelstore.NewModelBuffer),
// whose model file the append-only log writes as it fills.
func (u *Upload) NewBuffer(limit, expect int64) (*modelstore.ModelBuffer, error) {
	buf, err := modelstore.NewModelBuffer(limit, expect)
	if err != nil {
		return nil, err
	}
	u.app.tapUpload(buf)
	return buf, nil
}

// Reserved is what the upload holds against maxmemory.
func (u *Upload) Reserved() int64 { return u.reserved }

// End gives back what the upload reserved, but for the chunks an AI.UPLOAD
// APPEND committed, which its resumable upload now holds, and what its
// chunks still claim: all of it for a command refused, cut off (the
// connection closed) or queued in MULTI, nothing once the model is stored
// (the store hands the claim back); the command is over.
func (u *Upload) End() {
	if u.c.payload == u {
		u.c.payload = nil
	}
	u.app.releaseQuota(&u.claim)
	if u.sess != nil {
		u.reserved -= int64(u.app.endAppend(u.sess)) - u.off
		u.sess = nil
	}
	u.app.uploading.Add(-u.reserved)
	u.reserved = 0
}

// DispatchUpload is Dispatch for a command whose payload the front end read
// into up (nil if none), and whose table entry it already looked up (spec:
// Commands().Lookup(argv[0]), or nil to look it up here). The front end
// keeps its reference to up and drops it after the call: a command that
// keeps the model takes its own.
func (s *App) DispatchUpload(c *Client, spec *Spec, argv [][]byte, owned Ownership, up *modelstore.ModelBuffer) {
	c.upload = up
	defer func() { c.upload = nil }()
	s.dispatch(c, spec, argv, owned)
}

// Upload is the buffer the front end read this command's payload into, or
// nil. Its bytes are only those of the payload arguments when the command
// parses as the front end expected: check with ModelBuffer.Holds.
func (a *Args) Upload() *modelstore.ModelBuffer { return a.upload }
