package commands

import (
	"bytes"
	"strconv"
	"strings"

	"github.com/enclaveai/enclaveai/modelstore"
)

// Args is a command's raw arguments (Args.V[0] is the name) with a cursor
// for the small parsing helpers below. Arguments alias connection memory
// that the next command reuses: Keep returns one that may be retained.
type Args struct {
	V      [][]byte
	pos    int
	owned  Ownership
	upload *modelstore.ModelBuffer // see Upload
	// scratch, when set, is the connection's memory for the parsed forms
	// of the commands sent most (AI.TENSORSET, AI.TENSORGET,
	// AI.MODELEXECUTE): Dispatch runs the command and drops it before the
	// connection's next one, so they need no allocation of their own. A
	// parse result that outlives the command (MULTI's queue) is parsed
	// from Args without it (Detach).
	scratch *scratch
}

// scratchKeys is how many AI.MODELEXECUTE keys, inputs and outputs
// together, the scratch holds; a command naming more allocates its lists.
const scratchKeys = 8

// scratch holds one parsed command of each hot kind (Args.scratch).
type scratch struct {
	tensorSet tensorSetCmd
	tensorGet tensorGetCmd
	modelExec modelExecCmd
	keys      [scratchKeys]string // modelExec's inputs and outputs
}

// Ownership reports which of a command's arguments have an allocation of
// their own (the front end's read Command). An interface rather than a
// func: a method value made for each command was a heap allocation each.
type Ownership interface{ Owned(i int) bool }

// OwnedFunc is a func as an Ownership.
type OwnedFunc func(i int) bool

// Owned calls f.
func (f OwnedFunc) Owned(i int) bool { return f(i) }

// Pooled is what an Ownership also reports when it knows which arguments
// are buffers of modelstore.BlobBuffer's that nothing else holds (the
// front end's read Command).
type Pooled interface{ Pooled(i int) bool }

// allOwned: every argument has its own allocation.
type allOwned struct{}

func (allOwned) Owned(int) bool { return true }

// NewArgs wraps raw arguments; owned (may be nil) reports which arguments
// have their own allocation.
func NewArgs(v [][]byte, owned Ownership) Args {
	return Args{V: v, pos: 1, owned: owned}
}

// Name is the command name as the client typed it.
func (a *Args) Name() string { return string(a.V[0]) }

// Len is the number of arguments after the name.
func (a *Args) Len() int { return len(a.V) - 1 }

// More reports whether arguments remain after the cursor.
func (a *Args) More() bool { return a.pos < len(a.V) }

// Remaining is the number of arguments after the cursor.
func (a *Args) Remaining() int { return len(a.V) - a.pos }

// Pos is the cursor's index into V.
func (a *Args) Pos() int { return a.pos }

// Next returns the argument at the cursor and advances; nil at the end.
func (a *Args) Next() []byte {
	if a.pos >= len(a.V) {
		return nil
	}
	a.pos++
	return a.V[a.pos-1]
}

// Peek returns the argument at the cursor without advancing.
func (a *Args) Peek() []byte {
	if a.pos >= len(a.V) {
		return nil
	}
	return a.V[a.pos]
}

// NextString returns the next argument as a string.
func (a *Args) NextString() string { return string(a.Next()) }

// Match advances past the next argument if it equals word case-insensitively.
func (a *Args) Match(word string) bool {
	if a.pos < len(a.V) && isWord(a.V[a.pos], word) {
		a.pos++
		return true
	}
	return false
}

// Keep returns argument i in memory the caller may retain: the argument
// itself if it owns its allocation, else a copy.
func (a *Args) Keep(i int) []byte {
	if a.owned != nil && a.owned.Owned(i) {
		return a.V[i]
	}
	return bytes.Clone(a.V[i])
}

// KeepBuffer is Keep for an argument a tensor may take as its data: it
// also reports whether the argument is a buffer of
// modelstore.BlobBuffer's that nothing else holds, which the tensor may
// then recycle (modelstore.NewTensorFromBuffer). Call it once per
// argument: two tensors must never take one buffer.
func (a *Args) KeepBuffer(i int) ([]byte, bool) {
	if p, ok := a.owned.(Pooled); ok && p.Pooled(i) {
		return a.V[i], true
	}
	return a.Keep(i), false
}

// Rest returns the arguments from the cursor on and moves to the end.
func (a *Args) Rest() [][]byte {
	r := a.V[a.pos:]
	a.pos = len(a.V)
	return r
}

// Detach makes the Args safe to keep past the command (commands queued by
// MULTI): arguments in the connection's buffer are copied, those with an
// allocation of their own are kept as they are. An upload's chunks are of
// the latter kind, in its ModelBuffer, which the caller must then keep
// referenced for as long as the Args live. The result has no scratch: what
// is parsed from it has an allocation of its own.
func (a Args) Detach() Args {
	v := make([][]byte, len(a.V))
	for i, b := range a.V {
		if a.owned != nil && a.owned.Owned(i) {
			v[i] = b
		} else {
			v[i] = bytes.Clone(b)
		}
	}
	return Args{V: v, pos: a.pos, owned: allOwned{}, upload: a.upload}
}

// isWord compares case-insensitively without allocating.
func isWord(b []byte, word string) bool {
	return len(b) == len(word) && strings.EqualFold(string(b), word)
}

// parseInt parses a base-10 int64 as Redis's string2ll does (no spaces, no
// '+', no leading zero: "010" and "-0" are not integers).
func parseInt(b []byte) (int64, bool) {
	d := b
	if len(d) > 0 && d[0] == '-' {
		d = d[1:]
	}
	if len(d) == 0 || len(b) > 20 || d[0] < '0' || d[0] > '9' || (d[0] == '0' && len(b) > 1) {
		return 0, false
	}
	n, err := strconv.ParseInt(string(b), 10, 64)
	return n, err == nil
}

// countedList parses `n item...` in a DAG's header: the count at the
// cursor and n items. errCount is returned for a non-integer count or one
// below 1 (RedisAI's: LOAD 0 is refused), errShort when fewer than n items follow before the first `|>`
// (RedisAI's: LOAD 2 x |> ... is short, not a key named |>).
func (a *Args) countedList(errCount, errShort error) ([][]byte, error) {
	n, ok := parseInt(a.Next())
	if !ok || n <= 0 {
		return nil, errCount
	}
	if int64(a.Remaining()) < n {
		return nil, errShort
	}
	items := a.V[a.pos : a.pos+int(n)]
	for _, it := range items {
		if isWord(it, "|>") {
			return nil, errShort
		}
	}
	a.pos += int(n)
	return items, nil
}
