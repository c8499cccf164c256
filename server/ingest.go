package server

import (
	"math"

	"github.com/enclaveai/enclaveai/commands"
	"github.com/enclaveai/enclaveai/modelstore"
)

// directMin: an upload whose first chunk is at least this large is read
// into a ModelBuffer; smaller models keep the ordinary path (an allocation
// per chunk, joined once), which costs less than a mapping.
const directMin = 1 << 20

// ingest is a connection's Sink for the payload of model uploads
// (AI.MODELSTORE / AI.MODELSET BLOB chunks, per Spec.Payload). As each
// chunk's length header arrives, before any of its bytes, it asks the
// command layer whether the upload may go on at all (CheckUploadStart: the
// upload policy, the key's owner, max-model-bytes-per-user), then for room
// (max-model-size; maxmemory for a model read into a
// buffer, whose memory is taken before it could be found to duplicate
// one already held), then gives the
// reader the chunk's final place: the next stretch of one contiguous
// ModelBuffer for the whole model, or an allocation of the chunk's size
// when the first chunk is small. Either way the chunk is read once, from
// the socket into that memory, and bytes given to a chunk are never counted
// against client-query-buffer-limit, which bounds the other arguments.
//
// The buffer belongs to the connection until the command is dispatched
// (take), and is freed if the command never gets there (drop): a refused
// chunk, a protocol error, a disconnect mid-upload.
type ingest struct {
	cmds   *commands.Server
	client *commands.Client
	spec   *commands.Spec

	buf      *modelstore.ModelBuffer
	first    int   // index of the first chunk; 0 until it is seen
	total    int64 // chunk bytes so far
	budget   int64 // bytes the upload may total (max-model-bytes-per-user)
	reserved int64 // bytes reserved with ReserveUpload
}

// limits attaches the ingest to the limits of a command that carries a
// payload, and resets it for that command.
func (g *ingest) limits(spec *commands.Spec, l Limits) Limits {
	if spec == nil || spec.Payload == nil {
		return l
	}
	g.spec, g.first, g.total, g.budget = spec, 0, 0, math.MaxInt64
	l.Sink, l.Filled = g.sink, g.filled
	return l
}

func (g *ingest) sink(a SinkArg) ([]byte, error) {
	if !g.spec.Payload(a.Prev, a.Index) {
		return nil, nil
	}
	if g.first == 0 && len(a.Prev) > 1 {
		budget, err := g.cmds.CheckUploadStart(g.client, a.Prev[1])
		if err != nil {
			return nil, err
		}
		g.budget = budget
	}
	if err := g.cmds.CheckUploadSize(g.total + a.Size); err != nil {
		return nil, err
	}
	if err := commands.CheckUploadBudget(g.total+a.Size, g.budget); err != nil {
		return nil, err
	}
	direct := g.buf != nil || (g.first == 0 && a.Size >= directMin)
	if direct {
		if err := g.cmds.ReserveUpload(a.Size); err != nil {
			return nil, err
		}
		g.reserved += a.Size
	}
	g.total += a.Size
	if g.first == 0 {
		g.first = a.Index
		if direct {
			// Sized for the largest model allowed; the chunks still to come
			// are a guess at the size, for when only that much can be had.
			limit := g.cmds.Opts.MaxModelSize.Load()
			expect := limit
			if left := int64(a.Count - a.Index); left <= limit/a.Size {
				expect = a.Size * left
			}
			buf, err := modelstore.NewModelBuffer(limit, expect)
			if err != nil {
				return nil, err
			}
			g.buf = buf
		}
	}
	if g.buf == nil {
		return make([]byte, a.Size), nil
	}
	return g.buf.Extend(a.Size)
}

func (g *ingest) filled(n int) {
	if g.buf != nil {
		g.buf.Filled(n)
	}
}

// take hands the command's buffer (nil if none) to the caller, sealed.
func (g *ingest) take() *modelstore.ModelBuffer {
	b := g.buf
	g.buf = nil
	if b != nil {
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
	if g.reserved != 0 {
		g.cmds.ReleaseUpload(g.reserved)
		g.reserved = 0
	}
}
