package commands

import (
	"strconv"
	"sync"

	"github.com/enclaveai/enclaveai/modelstore"
	"github.com/tidwall/redcon"
)

// Writer builds replies in the client's protocol (RESP2 or RESP3). It
// appends to a buffer that the connection flushes; RESP3-only types fall
// back to their RESP2 equivalents when the client speaks RESP2.
type Writer struct {
	buf   []byte
	proto int
	// held carries buf to and from replyPool (Release, Acquire), so that
	// the round trip allocates nothing.
	held *[]byte

	// stream writes straight to the connection (SetStream); streamErr is
	// its first error, after which nothing more is streamed.
	stream    func(bufs ...[]byte) error
	streamErr error
	// later holds the replies built and written only when the connection
	// sends the replies (Later), in the order of their placeholder bytes
	// in buf.
	later []laterReply
}

// laterReply is a reply to build and write at flush (Writer.Later).
type laterReply struct {
	at      int // its placeholder byte in buf
	render  func(w *Writer)
	release func() // nil: nothing to release
	// proto is the protocol when its command ran: a HELLO queued after it
	// in the same transaction changes w's before the reply is built.
	proto int
}

// NewWriter returns a RESP2 writer.
func NewWriter() *Writer { return &Writer{proto: 2} }

// Bytes returns the pending reply bytes.
func (w *Writer) Bytes() []byte { return w.buf }

// Reset drops the pending bytes, keeping the buffer if it is small, and
// the replies held for Later.
func (w *Writer) Reset() {
	w.dropLater(0)
	if cap(w.buf) > 1<<20 {
		w.buf = nil
	}
	w.buf = w.buf[:0]
}

// A connection that has sent its replies and waits for more commands
// keeps a reply buffer of at most replyKeep bytes: a larger one goes to
// replyPool (Release), where the next connection with replies to build
// takes it (Acquire), or is dropped when over replyPoolMax. The buffer
// grows to hold a pipeline's replies (64 KiB and more before the front
// end flushes): kept by every idle connection, 3,000 clients idle after
// 20 pipelined TENSORGETs of 3136 B cost 74.7 kB each, against Redis
// 7.0's 40.7 (the server's input buffer is lent the same way:
// server/inbuf.go).
const (
	replyKeep    = 4 << 10
	replyPoolMax = 256 << 10
)

var replyPool sync.Pool // of *[]byte

// Release gives an empty buffer larger than replyKeep back to the pool
// (the front end calls it before waiting for input). Pending bytes stay.
func (w *Writer) Release() {
	if len(w.buf) > 0 || cap(w.buf) <= replyKeep {
		return
	}
	if cap(w.buf) <= replyPoolMax {
		if w.held == nil {
			w.held = new([]byte)
		}
		*w.held = w.buf[:0]
		replyPool.Put(w.held)
	}
	w.buf, w.held = nil, nil
}

// Acquire takes a pooled buffer when w has none (the front end calls it
// before a command runs).
func (w *Writer) Acquire() {
	if w.buf != nil {
		return
	}
	if h, ok := replyPool.Get().(*[]byte); ok {
		w.buf, w.held = (*h)[:0], h
	}
}

// Cap is the size of the reply buffer held (0: none).
func (w *Writer) Cap() int { return cap(w.buf) }

// Len is the number of pending bytes.
func (w *Writer) Len() int { return len(w.buf) }

// truncate drops what was written after the first n bytes (replies that
// must not go out: CommitClient).
func (w *Writer) truncate(n int) {
	w.dropLater(n)
	w.buf = w.buf[:n]
}

// OK writes +OK.
func (w *Writer) OK() { w.buf = redcon.AppendOK(w.buf) }

// Simple writes a simple string.
func (w *Writer) Simple(s string) { w.buf = redcon.AppendString(w.buf, s) }

// Error writes an error reply; the text must carry its own prefix (ERR,
// WRONGTYPE, ...) when it needs one. Newlines are flattened to spaces.
func (w *Writer) Error(s string) { w.buf = redcon.AppendError(w.buf, s) }

// streamMin: BulkStream sends bulk strings at least this long straight to
// the connection.
const streamMin = 1 << 20

// SetStream gives the writer a way to write straight to the connection
// (the front end's, which counts the bytes): BulkStream uses it.
func (w *Writer) SetStream(f func(bufs ...[]byte) error) { w.stream = f }

// BulkStream writes a bulk string like Bulk, except that one of streamMin
// bytes or more goes straight to the connection when the writer has one:
// the pending bytes and the bulk header, then b itself (writev, no copy),
// then its CRLF. b need only stay valid during the call. A failed write is
// kept (StreamErr) and ends streaming; the connection is gone by then.
func (w *Writer) BulkStream(b []byte) {
	if w.stream == nil || len(b) < streamMin || len(w.later) > 0 {
		w.Bulk(b)
		return
	}
	if w.streamErr != nil {
		return
	}
	w.buf = append(w.buf, '$')
	w.buf = strconv.AppendInt(w.buf, int64(len(b)), 10)
	w.buf = append(w.buf, '\r', '\n')
	w.streamErr = w.stream(w.buf, b, crlf)
	w.Reset()
}

var crlf = []byte("\r\n")

// Spill sends the pending bytes straight to the connection, as BulkStream
// sends what precedes a large bulk string, when the writer has one and
// they hold streamMin bytes or more. A reply made of many small parts
// calls it between them, so that it never holds much more than streamMin
// in memory: AI.MODELGET of a 100 MB model under MODEL_CHUNK_SIZE 1 is
// 700 MB of chunk headers and bytes.
func (w *Writer) Spill() {
	if w.stream == nil || w.streamErr != nil || len(w.buf) < streamMin || len(w.later) > 0 {
		return
	}
	w.streamErr = w.stream(w.buf)
	w.buf = w.buf[:0] // kept for the rest of the reply (Reset drops it after)
}

// Later leaves a reply to be built by render only when the connection
// sends the replies (WriteOut), through a writer that streams: a large
// reply then leaves a megabyte at a time (BulkStream, Spill) instead of
// being built whole in the reply buffer. Commands run under the
// transaction lock, when nothing may be written to a client that may not
// read: AI.MODELGET in MULTI would otherwise copy the model into the
// buffer (7 times over under MODEL_CHUNK_SIZE 1), and AI.TENSORGET VALUES
// of a large tensor takes 2 to 5 times its bytes as text. What render
// reads must stay as it is until release is called (if not nil), which
// happens once the reply is written or dropped (Reset, truncate). It is
// built in the protocol w speaks now, whatever a later HELLO says. Without
// a stream, the reply is built at once.
func (w *Writer) Later(render func(w *Writer), release func()) {
	if w.stream == nil {
		render(w)
		if release != nil {
			release()
		}
		return
	}
	// A placeholder byte gives the reply a place in buf that Len counts,
	// so that a mark taken before it (truncate) tells it apart from one
	// taken after.
	w.later = append(w.later, laterReply{at: len(w.buf), render: render, release: release, proto: w.proto})
	w.buf = append(w.buf, 0)
}

// HasLater reports replies held for Later: the connection sends them with
// WriteOut, before the next command runs.
func (w *Writer) HasLater() bool { return len(w.later) > 0 }

// WriteOut sends every pending reply through the stream, the Later ones
// from where their bytes lie, and resets the writer. It returns the first
// failed write's error, after which nothing more is written.
func (w *Writer) WriteOut() error {
	defer w.Reset()
	if w.streamErr != nil {
		return w.streamErr
	}
	later, buf, proto := w.later, w.buf, w.proto
	w.later, w.buf = nil, nil // render builds in a buffer of its own
	defer func() { w.later, w.buf, w.proto = later, buf[:0], proto }()
	from := 0
	for i := range later {
		l := &later[i]
		if l.at > from {
			if w.streamErr = w.stream(buf[from:l.at]); w.streamErr != nil {
				return w.streamErr
			}
		}
		w.proto = l.proto
		l.render(w)
		if len(w.buf) > 0 && w.streamErr == nil {
			w.streamErr = w.stream(w.buf)
		}
		w.buf = w.buf[:0]
		if w.streamErr != nil {
			return w.streamErr
		}
		from = l.at + 1
	}
	if len(buf) > from {
		w.streamErr = w.stream(buf[from:])
	}
	return w.streamErr
}

// dropLater releases the Later replies from placeholder n on.
func (w *Writer) dropLater(n int) {
	k := len(w.later)
	for k > 0 && w.later[k-1].at >= n {
		k--
		if w.later[k].release != nil {
			w.later[k].release()
		}
		w.later[k] = laterReply{}
	}
	w.later = w.later[:k]
}

// StreamErr is the error of a failed BulkStream, if any.
func (w *Writer) StreamErr() error { return w.streamErr }

// Int writes an integer.
func (w *Writer) Int(n int64) { w.buf = redcon.AppendInt(w.buf, n) }

// Bulk writes a bulk string.
func (w *Writer) Bulk(b []byte) { w.buf = redcon.AppendBulk(w.buf, b) }

// BulkString writes a bulk string.
func (w *Writer) BulkString(s string) { w.buf = redcon.AppendBulkString(w.buf, s) }

// Null writes the null reply ($-1 in RESP2, _ in RESP3).
func (w *Writer) Null() {
	if w.proto == 3 {
		w.buf = append(w.buf, "_\r\n"...)
		return
	}
	w.buf = redcon.AppendNull(w.buf)
}

// Array writes an array header of n elements.
func (w *Writer) Array(n int) { w.buf = redcon.AppendArray(w.buf, n) }

// NullArray writes the null array (*-1 in RESP2, _ in RESP3): EXEC's reply
// when a WATCHed key changed.
func (w *Writer) NullArray() {
	if w.proto == 3 {
		w.buf = append(w.buf, "_\r\n"...)
		return
	}
	w.buf = append(w.buf, "*-1\r\n"...)
}

// Map writes a map header of n pairs (RESP2: an array of 2n elements).
func (w *Writer) Map(n int) {
	if w.proto == 3 {
		w.buf = append(w.buf, '%')
		w.buf = strconv.AppendInt(w.buf, int64(n), 10)
		w.buf = append(w.buf, '\r', '\n')
		return
	}
	w.Array(2 * n)
}

// Set writes a set header (RESP2: an array).
func (w *Writer) Set(n int) {
	if w.proto == 3 {
		w.buf = append(w.buf, '~')
		w.buf = strconv.AppendInt(w.buf, int64(n), 10)
		w.buf = append(w.buf, '\r', '\n')
		return
	}
	w.Array(n)
}

// Double writes a RESP3 double, or in RESP2 the bulk string text that
// parses back to the same value (RedisAI's float VALUES). Both spell
// infinities and NaN as Redis does: inf, -inf, nan (not Go's +Inf, NaN).
func (w *Writer) Double(f float64) {
	if w.proto == 3 {
		w.buf = append(w.buf, ',')
		w.buf = modelstore.AppendDouble(w.buf, f)
		w.buf = append(w.buf, '\r', '\n')
		return
	}
	var text [40]byte // the longest is 25 bytes
	w.buf = redcon.AppendBulk(w.buf, modelstore.AppendDouble(text[:0], f))
}

// Verbatim writes a verbatim text (RESP3 `=`, e.g. INFO), a bulk string in RESP2.
func (w *Writer) Verbatim(s string) {
	if w.proto == 3 {
		w.buf = append(w.buf, '=')
		w.buf = strconv.AppendInt(w.buf, int64(len(s)+4), 10)
		w.buf = append(w.buf, "\r\ntxt:"...)
		w.buf = append(w.buf, s...)
		w.buf = append(w.buf, '\r', '\n')
		return
	}
	w.BulkString(s)
}

// StringList writes an array of bulk strings.
func (w *Writer) StringList(items []string) {
	w.Array(len(items))
	for _, s := range items {
		w.BulkString(s)
	}
}
