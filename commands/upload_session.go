package commands

import (
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/enclaveai/enclaveai/modelstore"
)

// Resumable uploads. AI.MODELSTORE's chunks are one command: a connection
// lost at 90% of a 1.3 GB model loses it all. AI.UPLOAD keeps an upload on
// the server between commands and across connections:
//
//	AI.UPLOAD BEGIN size          -> id (a UUID the server makes)
//	AI.UPLOAD APPEND id offset BLOB chunk [chunk ...] -> bytes held
//	AI.UPLOAD STATUS id           -> [size, bytes held, idle seconds, receiving]
//	AI.UPLOAD ABORT id            -> OK
//	AI.MODELSTORE key ONNX CPU [...] UPLOAD id   stores it; the upload ends
//
// BEGIN makes one ModelBuffer of the announced size (a mapping whose pages
// are committed only as they are written) and refuses a size that
// maxmemory could not hold now, but reserves nothing: an upload holds
// against maxmemory the bytes it holds, as they arrive, and gives them back
// when it ends (stored, aborted or expired). An APPEND reserves its chunks
// on their length headers, as AI.MODELSTORE's are; what it commits stays
// reserved, the rest is given back. An upload that announced a size and
// sent nothing held that size against every other upload: one client's
// max-upload-sessions of them took all of maxmemory from the others, for
// good, since it could begin them again as they expired.
//
// An APPEND's chunks are read by the front end straight into the buffer
// after the bytes already held (one copy, as for AI.MODELSTORE), but they
// count (ModelBuffer.Filled: hashed, written to the log's model file) only
// once the whole command has arrived and run: an APPEND cut off mid-chunk
// leaves the upload at its previous length, which STATUS tells the client
// to resume from (receiving is 1 while an APPEND's bytes arrive: until the
// server sees a cut-off connection close, the upload stays busy). An APPEND whose offset is not that length is refused
// before its bytes are read, so a retried chunk is never stored twice.
//
// An upload belongs to the user who began it (everyone, without users),
// is dropped after upload-session-timeout seconds without an APPEND that adds bytes, at most
// max-upload-sessions are held per user (in all, without users), and the
// uploads a user holds count against max-model-bytes-per-user: BEGIN
// claims the announced size (policy.go), which the upload holds until it
// is stored (handed back as the model enters the keyspace), refused,
// aborted or expired. Uploads are not persisted: after a restart
// the client starts again (STATUS answers that the upload is unknown).

var (
	errNoUpload       = Reply("ERR no such upload (finished, aborted, expired, or the server restarted)")
	errUploadBusy     = Reply("ERR the upload is receiving on another connection")
	errUploadFull     = Reply("ERR the chunks pass the upload's announced size")
	errUploadSessions = Reply("ERR too many uploads in progress (max-upload-sessions)")
	errUploadSize     = Reply("ERR upload size must be a positive integer")
)

// uploadSession is one resumable upload.
type uploadSession struct {
	id    string
	owner string // the user who began it; "" without users
	size  int64  // announced at BEGIN, claimed against the user's quota
	buf   *modelstore.ModelBuffer
	claim claim // the size claimed (policy.go); a store takes it
	// held is the bytes the upload holds, the end of the last APPEND that
	// completed, and holds against maxmemory (uploading) until a store's
	// model blob takes them over (handOverUpload: 0 then). busy is set
	// while an APPEND's bytes arrive.
	held int
	busy bool
	// last is when an APPEND last added bytes (or BEGIN), marked what it
	// held then: an APPEND of nothing does not keep an upload, and the
	// memory it reserves, from expiring.
	last   time.Time
	marked int
}

// uploads are the resumable uploads in progress. Its lock is a leaf: no
// other lock is taken under it (docs/LOCKS.md).
type uploads struct {
	mu sync.Mutex
	m  map[string]*uploadSession
}

// get returns upload id if c may use it.
func (s *App) getUpload(c *Client, id string) (*uploadSession, error) {
	owner := s.ownerOf(c) // before up.mu, a leaf: it takes Client.mu
	s.up.mu.Lock()
	defer s.up.mu.Unlock()
	u := s.up.m[id]
	if u == nil || u.owner != owner {
		return nil, errNoUpload
	}
	return u, nil
}

// ownerOf is the owner recorded on what c stores (a value, an upload): ""
// (the default user) without users, which costs nothing on the hot path.
func (s *App) ownerOf(c *Client) string {
	if !s.Opts.UsersEnabled() {
		return ""
	}
	return c.User()
}

// beginAppend is StartUpload for AI.UPLOAD APPEND id offset: on the first
// chunk's length header, it checks that c may append to id at offset and
// marks the upload busy until End.
func (s *App) beginAppend(c *Client, id string, off int64) (*uploadSession, error) {
	owner := s.ownerOf(c)
	s.up.mu.Lock()
	defer s.up.mu.Unlock()
	u, err := s.idleUploadLocked(owner, id)
	if err != nil {
		return nil, err
	}
	if off != int64(u.held) {
		return nil, errorf("ERR the upload holds %d bytes: append at offset %d", u.held, u.held)
	}
	u.busy = true
	return u, nil
}

// endAppend ends an APPEND whose bytes the front end read into the
// upload's buffer: bytes the command did not commit are dropped. It
// returns the bytes the upload holds.
func (s *App) endAppend(u *uploadSession) int {
	s.up.mu.Lock()
	defer s.up.mu.Unlock()
	if u.buf.Len() > u.held {
		u.buf.Truncate(u.held) // never Filled: always succeeds
	}
	u.busy = false
	if u.held > u.marked {
		u.last, u.marked = time.Now(), u.held
	}
	return u.held
}

// idleUploadLocked is upload id if owner (ownerOf the client, read
// before up.mu) may use it and no APPEND is receiving on it; up.mu is held.
func (s *App) idleUploadLocked(owner, id string) (*uploadSession, error) {
	u := s.up.m[id]
	if u == nil || u.owner != owner {
		return nil, errNoUpload
	}
	if u.busy {
		return nil, errUploadBusy
	}
	return u, nil
}

// takeUpload removes upload id, complete, for AI.MODELSTORE ... UPLOAD id.
// The caller owns it and must dropUpload it once the model is stored or
// refused.
func (s *App) takeUpload(c *Client, id string) (*uploadSession, error) {
	owner := s.ownerOf(c)
	s.up.mu.Lock()
	defer s.up.mu.Unlock()
	u, err := s.idleUploadLocked(owner, id)
	if err != nil {
		return nil, err
	}
	if int64(u.held) != u.size {
		return nil, errorf("ERR the upload holds %d of its %d bytes", u.held, u.size)
	}
	delete(s.up.m, id)
	u.buf.Seal()
	return u, nil
}

// dropUpload ends u, which no APPEND is receiving on, freeing its bytes,
// their reservation and its claim (if a store has not taken it).
func (s *App) dropUpload(u *uploadSession) {
	u.buf.Unref()
	s.uploading.Add(-int64(u.held))
	s.releaseQuota(&u.claim)
}

// handOverUpload gives back what u, taken for a store (takeUpload), holds
// against maxmemory once the model's blob holds its bytes
// (compileModel): the registry counts them from then on.
func (s *App) handOverUpload(u *uploadSession) {
	s.uploading.Add(-int64(u.held))
	u.held = 0
}

// expireUploads drops the uploads idle for longer than
// upload-session-timeout (from Tick).
func (s *App) expireUploads(now time.Time) {
	limit := time.Duration(s.Opts.UploadSessionTimeout.Load()) * time.Second
	var gone []*uploadSession
	s.up.mu.Lock()
	for id, u := range s.up.m {
		if !u.busy && now.Sub(u.last) > limit {
			delete(s.up.m, id)
			gone = append(gone, u)
		}
	}
	s.up.mu.Unlock()
	for _, u := range gone {
		s.Log.Info("resumable upload expired", "upload", u.id, "bytes", u.held, "size", u.size)
		s.dropUpload(u)
	}
}

// uploadCmd is AI.UPLOAD BEGIN size | APPEND id offset BLOB chunk ... |
// STATUS id | ABORT id.
type uploadCmd struct {
	sub    string // "BEGIN", "APPEND", "STATUS" or "ABORT"
	id     string
	size   int64    // BEGIN
	offset int64    // APPEND
	chunks [][]byte // APPEND
	// upload is the buffer the front end read APPEND's chunks into.
	upload *modelstore.ModelBuffer
}

// uploadPayloadArg is AI.UPLOAD's Payload: APPEND's chunks.
func uploadPayloadArg(prev [][]byte, i int) bool {
	return i >= 5 && isWord(prev[1], "APPEND") && isWord(prev[4], "BLOB")
}

func parseUpload(a Args) (Runner, error) {
	c := uploadCmd{}
	switch {
	case a.Match("BEGIN") && a.Remaining() == 1:
		c.sub = "BEGIN"
		n, ok := parseInt(a.Next())
		if !ok || n < 1 {
			return nil, errUploadSize
		}
		c.size = n
	case a.Match("APPEND") && a.Remaining() >= 4:
		c.sub, c.id = "APPEND", a.NextString()
		n, ok := parseInt(a.Next())
		if !ok || n < 0 {
			return nil, errNotInteger
		}
		c.offset = n
		if !a.Match("BLOB") {
			return nil, errExpectedBlob
		}
		for a.More() {
			c.chunks = append(c.chunks, a.Keep(a.Pos()))
			a.Next()
		}
		c.upload = a.Upload()
	case (a.Match("STATUS") || a.Match("ABORT")) && a.Remaining() == 1:
		c.sub = strings.ToUpper(string(a.V[1]))
		c.id = a.NextString()
	default:
		return nil, errSyntax
	}
	return c, nil
}

// Run implements Runner.
func (c uploadCmd) Run(x *Ctx) error {
	switch c.sub {
	case "BEGIN":
		return c.begin(x)
	case "APPEND":
		return c.append(x)
	case "STATUS":
		u, err := x.getUpload(x.C, c.id)
		if err != nil {
			return err
		}
		x.up.mu.Lock()
		held, idle, busy := u.held, int64(time.Since(u.last).Seconds()), u.busy
		x.up.mu.Unlock()
		x.W.Array(4)
		x.W.Int(u.size)
		x.W.Int(int64(held))
		x.W.Int(idle)
		if busy {
			x.W.Int(1)
		} else {
			x.W.Int(0)
		}
		return nil
	default: // ABORT
		owner := x.ownerOf(x.C)
		x.up.mu.Lock()
		u, err := x.idleUploadLocked(owner, c.id)
		if err == nil {
			delete(x.up.m, c.id)
		}
		x.up.mu.Unlock()
		if err != nil {
			return err
		}
		x.dropUpload(u)
		x.W.OK()
		return nil
	}
}

// begin makes the upload, its buffer and its claim.
func (c uploadCmd) begin(x *Ctx) error {
	if err := x.mayUpload(x.C); err != nil {
		return err
	}
	if c.size > x.Opts.MaxModelSize.Load() {
		return errModelTooBig
	}
	owner := x.ownerOf(x.C)
	x.up.mu.Lock()
	count := x.up.countLocked(owner)
	x.up.mu.Unlock()
	if count >= x.Opts.MaxUploadSessions.Load() {
		return errUploadSessions
	}
	// The user's quota counts the uploads it holds, as models to come:
	// the size is claimed now, and the store takes the claim.
	var cl claim
	if err := x.claimQuota(x.C, &cl, "", c.size); err != nil {
		return err
	}
	// A model that maxmemory could not hold now is refused before a byte
	// is sent; the room is reserved as the bytes arrive (append).
	if err := x.Keys.CheckMemory(c.size); err != nil {
		x.releaseQuota(&cl)
		return err
	}
	buf, err := modelstore.NewModelBuffer(c.size, c.size)
	if err != nil {
		x.releaseQuota(&cl)
		return err
	}
	x.tapUpload(buf)
	u := &uploadSession{id: uuid.NewString(), owner: owner, size: c.size, buf: buf, claim: cl, last: time.Now()}
	x.up.mu.Lock()
	if x.up.countLocked(owner) >= x.Opts.MaxUploadSessions.Load() {
		x.up.mu.Unlock()
		x.dropUpload(u)
		return errUploadSessions
	}
	x.up.m[u.id] = u
	x.up.mu.Unlock()
	x.W.BulkString(u.id)
	return nil
}

// countLocked is how many uploads owner holds: every upload when users
// are not configured (owner ""). up.mu is held.
func (up *uploads) countLocked(owner string) (count int64) {
	for _, u := range up.m {
		if u.owner == owner {
			count++
		}
	}
	return count
}

// append commits the chunks: in place when the front end read them into
// the upload's buffer (ingest), else copied there (a command that did not
// come through the front end's payload path).
func (c uploadCmd) append(x *Ctx) error {
	var n int64
	for _, ch := range c.chunks {
		n += int64(len(ch))
	}
	var u *uploadSession
	var err error
	if c.upload != nil {
		// The front end checked the offset and marked u busy (StartUpload);
		// its End, after this command, clears that.
		if u, err = x.getUpload(x.C, c.id); err != nil {
			return err
		}
		if n > 0 && (u.buf != c.upload || !u.buf.HoldsFrom(u.held, c.chunks)) {
			return errUploadFull
		}
	} else {
		if u, err = x.beginAppend(x.C, c.id, c.offset); err != nil {
			return err
		}
		defer x.endAppend(u)
		if int64(u.held)+n > u.size {
			return errUploadFull
		}
		// Reserved as the front end reserves the chunks it reads; the
		// upload keeps it once they count (below).
		if err := x.reserveUpload(n); err != nil {
			return err
		}
		for _, ch := range c.chunks {
			dst, err := u.buf.Extend(int64(len(ch)))
			if err != nil {
				x.uploading.Add(-n)
				return errUploadFull
			}
			copy(dst, ch)
		}
	}
	// Busy: no other command touches u's buffer or held meanwhile. Filled
	// may wait for the hashing goroutine, so it runs outside the lock.
	u.buf.Filled(int(n))
	x.up.mu.Lock()
	u.held += int(n)
	held := u.held
	x.up.mu.Unlock()
	x.W.Int(int64(held))
	return nil
}
