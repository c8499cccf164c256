package server

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"slices"
	"strconv"

	"github.com/enclaveai/enclaveai/commands"
	"github.com/enclaveai/enclaveai/config"
	"github.com/enclaveai/enclaveai/modelstore"
)

// Limits bound what one command may make the server allocate. They are
// checked against each RESP length header before the bytes it announces
// are read, so a refused command costs no memory.
type Limits struct {
	// The command layer's bounds: MaxArgs (multibulk length), MaxBulk (one
	// argument, proto-max-bulk-len), MaxQuery (all arguments of one
	// command, client-query-buffer-limit), Unauth.
	commands.Limits
	// MaxSkip bounds what is read and dropped of a command a Sink refused.
	MaxSkip int64
	// Sink, when set, is asked for the destination of each argument after
	// the name, once its length is known and before its bytes are read: the
	// reader fills the slice it returns directly from the socket (no
	// intermediate copy), and the argument is that memory (Owned). nil
	// lets the reader allocate as usual. Arguments read into a Sink's memory
	// count towards neither MaxBulk nor MaxQuery: the Sink bounds them
	// itself. An error
	// refuses the command: the rest of it is skipped without being stored
	// and ReadCommand returns a RefusedError, unless the error is a
	// ProtocolError, which is returned as is (the connection closes).
	Sink func(a SinkArg) ([]byte, error)
	// Filled, when set, is told as the bytes of arguments a Sink provided
	// arrive, sinkStep bytes at most at a time, so that its owner can work
	// on them (hash them) while the rest is still coming.
	Filled func(n int)
}

// SinkArg is an argument whose length header has been read.
type SinkArg struct {
	Prev  [][]byte // the arguments before it; valid during the call only
	Index int      // its position (the name is 0)
	Count int      // the command's number of arguments
	Size  int64    // its length
}

// ProtocolError is a malformed or refused request. The connection replies
// `-ERR Protocol error: <msg>` and closes, as Redis does.
type ProtocolError struct{ Msg string }

// Error returns the reply's text after "ERR ".
func (e *ProtocolError) Error() string { return "Protocol error: " + e.Msg }

// RefusedError is a well-formed command refused while it was read (by a
// Sink). The reader has skipped the rest of the command; the connection
// replies with the error and keeps serving. With Close set the rest was
// too large to skip (over MaxSkip): the connection replies, then closes.
type RefusedError struct {
	Err   error
	Close bool
}

// Error returns the refusal's own text.
func (e *RefusedError) Error() string { return e.Err.Error() }

// Unwrap returns Err, for errors.Is and errors.As.
func (e *RefusedError) Unwrap() error { return e.Err }

const (
	inlineMax = 64 << 10 // longest inline command or header line
	// smallArg: arguments below this size are copied into a per-connection
	// arena reused by every command; larger ones are read into memory of
	// their own (modelstore.BlobBuffer: up to 64 KiB a recycled buffer),
	// which a handler (a tensor blob) may keep without copying it again.
	smallArg = 512
	// sinkStep: a Sink's memory is filled (and Filled told) this much at a
	// time at most.
	sinkStep = 1 << 20
	// arenaIdleMax: a larger arena is dropped when the client has sent
	// nothing more, rather than kept for its next command.
	arenaIdleMax = 16 << 10
	// argCost is what each argument costs the reader beyond its bytes,
	// counted against MaxQuery (an upload's chunks included): its entry in
	// Args (a 24-byte slice header) and in owned, at the peak of a doubling
	// of both, when the old and the new arrays are live. Without it,
	// 20 million empty BLOB chunks (120 MB on the wire) took the server to
	// 1.74 GB, past every limit.
	argCost = 80
	// argsKeepMax: a longer argument list is dropped after its command.
	argsKeepMax = 4096
)

// Command is one parsed request. Args alias reader memory that is reused by
// the next command, except those for which Owned reports true.
type Command struct {
	Args  [][]byte
	owned []argMemory
}

// argMemory is whose memory an argument is.
type argMemory uint8

const (
	argShared argMemory = iota // the reader's, reused by the next command
	argOwned                   // an allocation of its own
	argPooled                  // its own, from modelstore.BlobBuffer
)

// Owned reports whether Args[i] has its own allocation that the handler may
// keep after the command returns.
func (c *Command) Owned(i int) bool { return i < len(c.owned) && c.owned[i] != argShared }

// Pooled reports whether Args[i] is a buffer of modelstore.BlobBuffer's
// that nothing else holds, which a tensor may take and recycle
// (modelstore/tensorbuf.go).
func (c *Command) Pooled(i int) bool { return i < len(c.owned) && c.owned[i] == argPooled }

// Reader reads RESP2 multibulk and inline commands with limits.
type Reader struct {
	in    *inBuf
	arena []byte
	cmd   Command
	// OnRefuse, when set, is called when a Sink refuses a command, before
	// the rest of it is skipped (the connection bounds the time that takes).
	OnRefuse func()
}

// NewReader wraps r. A connection with a descriptor (a TCP or Unix
// socket) holds an input buffer only while it has unparsed bytes
// (inbuf.go).
func NewReader(r io.Reader) *Reader { return newReader(r, nil) }

// newReader is NewReader telling count the size of each read.
func newReader(r io.Reader, count func(int)) *Reader {
	return &Reader{in: newInBuf(r, count)}
}

// Close ends what the reader holds of a socket while it reads (fdSource's
// poll, which holds the descriptor's read lock). Call it before anything
// else reads the connection, and before the connection is abandoned. The
// reader may read again after it.
func (r *Reader) Close() { r.in.close() }

// Buffered reports how many bytes are already read and not yet parsed; the
// connection flushes replies when it is 0 (pipelining).
func (r *Reader) Buffered() int { return r.in.Buffered() }

// ReportBuffer has report told, before and after each read into the
// input buffer, the bytes of input read and not yet parsed and the room
// left after them, and (0, 0) when the connection gives its buffer back
// (CLIENT LIST's qbuf and qbuf-free). A command's arguments already
// parsed are not in the buffer: a client that stops in the middle of one
// holds only the part not yet parsed.
func (r *Reader) ReportBuffer(report func(used, free int)) { r.in.report = report }

// BeforeWait has f called when the reader is about to wait for more of the
// connection's input (over TLS, before every read: whether one will wait
// cannot be told). The connection writes the replies it holds then: a
// client may wait for them before it sends the rest of a command, as a TCP
// stack that holds back a short segment until what it sent before is
// acknowledged does, and the acknowledgement waits for a reply to ride on.
func (r *Reader) BeforeWait(f func()) { r.in.setWaiting(f) }

// readLine returns one CRLF- or LF-terminated line without its terminator,
// or a ProtocolError saying tooBig when the line is longer than the buffer.
// The slice is valid until the next read.
func (r *Reader) readLine(tooBig string) ([]byte, error) {
	line, err := r.in.ReadSlice('\n')
	if err == bufio.ErrBufferFull {
		return nil, &ProtocolError{tooBig}
	}
	if err != nil {
		return nil, err
	}
	line = line[:len(line)-1]
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	return line, nil
}

// ReadCommand reads the next command. pre bounds the command before its
// name is known; classify, given the name, returns the limits for the rest.
// Empty commands (blank inline lines, *0) are skipped.
func (r *Reader) ReadCommand(pre Limits, classify func(name []byte) Limits) (*Command, error) {
	defer r.in.settle() // all parsed: the buffer goes back to the pool
	for {
		if len(r.arena) > 4<<20 || (cap(r.arena) > arenaIdleMax && r.in.Buffered() == 0) {
			// Do not keep a big arena alive after one large command, nor
			// a middling one while the client may stay idle.
			r.arena = nil
		}
		r.arena = r.arena[:0]
		if cap(r.cmd.Args) > argsKeepMax {
			// Nor the argument list of a command of millions of them.
			r.cmd.Args, r.cmd.owned = nil, nil
		}
		r.cmd.Args = r.cmd.Args[:0]
		r.cmd.owned = r.cmd.owned[:0]
		b, err := r.in.Peek(1)
		if err != nil {
			return nil, err
		}
		if b[0] != '*' {
			if err := r.readInline(); err != nil {
				return nil, err
			}
		} else if err := r.readMultibulk(pre, classify); err != nil {
			return nil, err
		}
		if len(r.cmd.Args) > 0 {
			return &r.cmd, nil
		}
	}
}

func (r *Reader) readInline() error {
	line, err := r.readLine("too big inline request")
	if err != nil {
		return err
	}
	fields, err := config.SplitArgs(string(line))
	if err != nil {
		return &ProtocolError{"unbalanced quotes in request"}
	}
	for _, f := range fields {
		start := len(r.arena)
		r.arena = append(r.arena, f...)
		r.cmd.Args = append(r.cmd.Args, r.arena[start:len(r.arena):len(r.arena)])
		r.cmd.owned = append(r.cmd.owned, argShared)
	}
	return nil
}

// parseLen parses a length header as Redis's string2ll does: an optional
// '-' and digits, no '+', no leading zero (so "*01" and "$+4" are refused).
func parseLen(line []byte) (int64, bool) {
	// The usual header, up to 18 digits without a sign, cannot overflow:
	// parsed here (strconv was 3% of a pipelined TENSORGET's CPU).
	if len(line) > 0 && len(line) <= 18 && line[0] > '0' && line[0] <= '9' {
		var n int64
		for _, c := range line {
			if c < '0' || c > '9' {
				return 0, false
			}
			n = n*10 + int64(c-'0')
		}
		return n, true
	}
	return parseLenSlow(line)
}

// parseLenSlow is parseLen for any header, through strconv.
func parseLenSlow(line []byte) (int64, bool) {
	digits := line
	if len(digits) > 0 && digits[0] == '-' {
		digits = digits[1:]
	}
	if len(digits) == 0 || len(line) > 20 || digits[0] < '0' || digits[0] > '9' || (digits[0] == '0' && len(line) > 1) {
		return 0, false
	}
	n, err := strconv.ParseInt(string(line), 10, 64)
	return n, err == nil
}

func (r *Reader) readMultibulk(lim Limits, classify func([]byte) Limits) error {
	line, err := r.readLine("too big mbulk count string")
	if err != nil {
		return err
	}
	n, ok := parseLen(line[1:])
	if !ok || n > 1<<30 {
		return &ProtocolError{"invalid multibulk length"}
	}
	if n <= 0 {
		return nil
	}
	if n > lim.MaxArgs {
		return lim.refused("multibulk length")
	}
	if n*argCost > lim.MaxQuery {
		return &ProtocolError{"command exceeds client-query-buffer-limit"}
	}
	var total, skipped int64
	var refused error
	for i := 0; int64(i) < n; i++ {
		line, err := r.readLine("too big bulk count string")
		if err != nil {
			return err
		}
		if len(line) == 0 || line[0] != '$' {
			got := byte(' ')
			if len(line) > 0 {
				got = line[0]
			}
			return &ProtocolError{"expected '$', got '" + string(got) + "'"}
		}
		size, ok := parseLen(line[1:])
		if !ok || size < 0 {
			return &ProtocolError{"invalid bulk length"}
		}
		// A Sink's argument (a model chunk) is bounded by the Sink, not
		// by proto-max-bulk-len: it is read into memory the Sink chose.
		var dst []byte
		payload := false
		if lim.Sink != nil && refused == nil {
			dst, err = lim.Sink(SinkArg{Prev: r.cmd.Args, Index: i, Count: int(n), Size: size})
			payload = dst != nil
			if err != nil {
				if IsProtocol(err) {
					return err
				}
				refused, dst, payload = err, nil, true
				if r.OnRefuse != nil {
					r.OnRefuse()
				}
			}
		}
		if refused == nil && !payload && size > lim.MaxBulk {
			return lim.refused("bulk length")
		}
		total += argCost
		if dst == nil && refused == nil {
			total += size
		}
		if total > lim.MaxQuery {
			return &ProtocolError{"command exceeds client-query-buffer-limit"}
		}
		switch {
		case refused != nil:
			// The rest of a refused command is read and dropped, so that
			// the client, still sending it, gets to read the error; but
			// only as much as the Sink would have accepted.
			skipped += size
			if skipped > lim.MaxSkip {
				return &RefusedError{Err: refused, Close: true}
			}
			if err := r.discard(size); err != nil {
				return err
			}
			r.cmd.Args = append(r.cmd.Args, nil)
			r.cmd.owned = append(r.cmd.owned, argShared)
		case dst != nil:
			if err := r.readSink(dst[:size], lim.Filled); err != nil {
				return err
			}
			r.cmd.Args = append(r.cmd.Args, dst[:size:size])
			r.cmd.owned = append(r.cmd.owned, argOwned)
		case size >= smallArg:
			// Memory that is not cleared first (5% of a pipelined
			// TENSORSET's CPU was that clearing), recycled from a tensor
			// that AI.TENSORSET replaced when one of its size is free.
			dst = modelstore.BlobBuffer(int(size))
			mem := argOwned
			if modelstore.PooledSize(int(size)) {
				mem = argPooled
			}
			var err error
			if mem == argOwned { // fresh memory the bytes commit as they arrive (gc.go)
				announced.Add(size)
				_, err = io.ReadFull(r.in, dst)
				announced.Add(-size)
			} else {
				_, err = io.ReadFull(r.in, dst)
			}
			if err != nil {
				return err
			}
			r.cmd.Args = append(r.cmd.Args, dst)
			r.cmd.owned = append(r.cmd.owned, mem)
		default:
			start := len(r.arena)
			r.arena = slices.Grow(r.arena, int(size))[:start+int(size)]
			if _, err := io.ReadFull(r.in, r.arena[start:]); err != nil {
				return err
			}
			r.cmd.Args = append(r.cmd.Args, r.arena[start:len(r.arena):len(r.arena)])
			r.cmd.owned = append(r.cmd.owned, argShared)
		}
		if err := r.readCRLF(); err != nil {
			return err
		}
		if i == 0 && classify != nil {
			lim = classify(r.cmd.Args[0])
			if n > lim.MaxArgs {
				return lim.refused("multibulk length")
			}
			if n*argCost > lim.MaxQuery {
				return &ProtocolError{"command exceeds client-query-buffer-limit"}
			}
		}
	}
	if refused != nil {
		return &RefusedError{Err: refused}
	}
	return nil
}

// readSink fills a Sink's memory, telling filled (if set) as it goes. The
// input buffer copies only what it already buffered: the rest is read
// from the connection straight into p.
func (r *Reader) readSink(p []byte, filled func(int)) error {
	for len(p) > 0 {
		k := min(len(p), sinkStep)
		if _, err := io.ReadFull(r.in, p[:k]); err != nil {
			return err
		}
		if filled != nil {
			filled(k)
		}
		p = p[k:]
	}
	return nil
}

// discard drops n bytes of input.
func (r *Reader) discard(n int64) error { return r.in.skip(n) }

// refused is the protocol error for a length over a limit.
func (l *Limits) refused(what string) error {
	if l.Unauth {
		return &ProtocolError{"unauthenticated " + what}
	}
	return &ProtocolError{"invalid " + what}
}

var crlf = []byte("\r\n")

func (r *Reader) readCRLF() error {
	b, err := r.in.Peek(2)
	if err != nil {
		return err
	}
	if !bytes.Equal(b, crlf) {
		return &ProtocolError{"invalid bulk terminator"}
	}
	r.in.Discard(2)
	return nil
}

// IsProtocol reports whether err is a ProtocolError.
func IsProtocol(err error) bool {
	var pe *ProtocolError
	return errors.As(err, &pe)
}
