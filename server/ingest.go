package server

import (
	"log/slog"
	"time"

	"github.com/enclaveai/enclaveai/commands"
	"github.com/enclaveai/enclaveai/modelstore"
)

// directMin: an upload is read into a ModelBuffer once its chunks total
// this much; smaller models keep the ordinary path (an allocation per
// chunk, joined once), which costs less than a mapping.
const directMin = 1 << 20

// ingest is a connection's Sink for the payload of model uploads
// (AI.MODELSTORE / AI.MODELSET BLOB chunks, per Spec.Payload). As each
// chunk's length header arrives, before any of its bytes, it asks the
// command layer's Upload (commands/upload.go) whether the upload may go on
// at all (StartUpload: the user's right to the command, the upload policy,
// the key's owner), whether the chunk is admitted (Admit: max-model-size,
// max-model-bytes-per-user), and for a model read into a buffer, for room
// (Reserve: maxmemory, whose memory is taken before it could be found to
// duplicate one already held);
// then it gives the reader the chunk's final place: the next stretch of one
// contiguous ModelBuffer for the whole model, or an allocation of the
// chunk's size while the chunks so far total less than directMin. The
// chunk that brings the total to directMin moves the few small ones before
// it into a new buffer, so that a model sent in many small chunks (redis-py
// users send 1,000,000 bytes at a time) is not joined in a second copy
// either. A chunk is bounded by max-model-size alone, never by
// proto-max-bulk-len; its bytes are never counted against
// client-query-buffer-limit, which bounds the other arguments.
//
// The buffer belongs to the connection until the command is dispatched
// (take), and is freed if the command never gets there (drop): a refused
// chunk, a protocol error, a disconnect mid-upload.
type ingest struct {
	cmds   *commands.App
	client *commands.Client
	spec   *commands.Spec

	up    *commands.Upload // the command layer's side; nil until the first chunk
	buf   *modelstore.ModelBuffer
	first int   // index of the first chunk; 0 until it is seen
	total int64 // chunk bytes so far
	// resumed: buf is a resumable upload's (AI.UPLOAD APPEND), which the
	// command itself reports Filled and which is never sealed here.
	resumed bool

	// Progress, logged every log-progress-bytes of chunk bytes received.
	log   *slog.Logger
	key   string
	start time.Time
	seen  int64 // chunk bytes received
	next  int64 // seen at which the next progress line is due
}

// limits attaches the ingest to the limits of a command that carries a
// payload, and resets it for that command.
func (g *ingest) limits(spec *commands.Spec, l Limits) Limits {
	if spec == nil || spec.Payload == nil {
		return l
	}
	g.spec, g.first, g.total, g.resumed = spec, 0, 0, false
	g.key, g.seen, g.next = "", 0, 0
	l.Sink, l.Filled = g.sink, g.filled
	// A refused upload is skipped (the client then reads why) up to twice
	// the largest model: more closes the connection after the reply.
	l.MaxSkip = 2 * g.cmds.Opts.MaxModelSize.Load()
	return l
}

func (g *ingest) sink(a SinkArg) ([]byte, error) {
	if !g.spec.Payload(a.Prev, a.Index) {
		return nil, nil
	}
	if g.first == 0 {
		if len(a.Prev) > 1 {
			g.key = string(a.Prev[1])
		}
		up, err := g.cmds.StartUpload(g.client, g.spec, a.Prev)
		if err != nil {
			return nil, err
		}
		g.up = up
		// A resumable upload's chunks go after the bytes it holds, and
		// count once the command has run (commands/upload_session.go).
		g.buf = up.Buffer()
		g.resumed = g.buf != nil
		g.first = a.Index
		g.start = time.Now()
		g.next = g.cmds.Opts.LogProgressBytes.Load()
	}
	if err := g.up.Admit(a.Size); err != nil {
		return nil, err
	}
	if g.buf == nil && g.total+a.Size >= directMin {
		if err := g.direct(a); err != nil {
			return nil, err
		}
	}
	g.total += a.Size
	if g.buf == nil {
		return make([]byte, a.Size), nil
	}
	if err := g.up.Reserve(a.Size); err != nil {
		return nil, err
	}
	return g.buf.Extend(a.Size)
}

// direct starts the upload's ModelBuffer at chunk a, moving the chunks
// before it (less than directMin in all) into it.
func (g *ingest) direct(a SinkArg) error {
	if err := g.up.Reserve(g.total); err != nil {
		return err
	}
	// Sized for the largest model allowed; the chunks still to come are a
	// guess at the size, for when only that much can be had.
	limit := g.cmds.Opts.MaxModelSize.Load()
	expect := limit
	if left := int64(a.Count - a.Index); left <= (limit-g.total)/a.Size {
		expect = g.total + a.Size*left
	}
	buf, err := g.up.NewBuffer(limit, expect) // the log's model file is written as it fills
	if err != nil {
		return err
	}
	if g.total > 0 {
		dst, err := buf.Extend(g.total)
		if err != nil {
			buf.Unref()
			return err
		}
		off := 0
		for j := g.first; j < a.Index; j++ {
			n := copy(dst[off:], a.Prev[j])
			// The argument is now the buffer's copy (the reader's Args
			// are the same slice).
			a.Prev[j] = dst[off : off+n : off+n]
			off += n
		}
		buf.Filled(off)
	}
	g.buf = buf
	return nil
}

func (g *ingest) filled(n int) {
	if g.buf != nil && !g.resumed {
		g.buf.Filled(n)
	}
	g.seen += int64(n)
	if step := g.cmds.Opts.LogProgressBytes.Load(); step > 0 && g.next > 0 && g.seen >= g.next {
		g.next = g.seen - g.seen%step + step
		g.progress("upload progress")
	}
}

// progress logs the upload's bytes so far and its rate. Model bytes are
// never logged, nor is anything but the key, the client and the counts.
func (g *ingest) progress(msg string) {
	if g.log == nil {
		return
	}
	secs := time.Since(g.start).Seconds()
	rate := 0.0
	if secs > 0 {
		rate = float64(g.seen) / secs / 1e6
	}
	g.log.Info(msg, "client", g.client.ID, "addr", g.client.Addr, "key", g.key, "bytes", g.seen,
		"announced", g.total, "seconds", float64(int64(secs*1000))/1000, "mb_per_s", float64(int64(rate*10))/10)
}

// take hands the command's buffer (nil if none) to the caller, sealed.
func (g *ingest) take() *modelstore.ModelBuffer {
	if step := g.cmds.Opts.LogProgressBytes.Load(); step > 0 && g.seen >= step {
		g.progress("upload received")
	}
	b := g.buf
	g.buf = nil
	if b != nil && !g.resumed {
		b.Seal()
	}
	return b
}

// done ends the command: the payload accounting, and the buffer if nobody
// took it.
func (g *ingest) done() {
	if g.buf != nil {
		g.buf.Unref()
		g.buf = nil
	}
	if g.up != nil {
		g.up.End()
		g.up = nil
	}
	// The progress is this command's: the next ones log nothing of it.
	g.seen, g.next = 0, 0
}
