package worker

// The control protocol between the server and a worker: one message per
// SOCK_SEQPACKET datagram, little-endian, a header of op (1 byte) and
// request id (8 bytes), then the op's fields. File descriptors travel
// beside a message (SCM_RIGHTS): a model's memfd with opCompile, a payload
// memfd with a run or its reply when the tensors' bytes are larger than
// inlineMax (else they follow the fields in the message itself).
//
//	opCompile  sid u64, optimize u8, intra u32, inter u32, size u64, hook u8 [+ model fd]
//	opRun      poll u32, sid u64, tensors, payload (on a lane, lane.go)
//	opCancel   (the id of a run in flight)
//	opClose    sid u64
//	opReply    status u8: 0 ok + fields, 1 error: kind u8, message str
//	opReady    (from the worker, once, before it reads a request)
//
// A close is answered (an empty reply) once the session is freed. A
// compile's reply carries the inputs, outputs, weights mode and ONNX
// Runtime's version (INFO's ai_onnxruntime_version); a run's
// its outputs. Tensors are dtype u8, present u8, rank u32, dims i64...,
// offset u64 and length u64 of their bytes in the payload; the payload is
// either inline (a u8 1, then the bytes) or in the attached memfd (a u8 2
// and its size u64).

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/enclaveai/enclaveai/modelstore"
)

const (
	opCompile byte = iota + 1
	opRun
	opCancel
	opClose
	opReply
	opLane
	opReady
)

// inlineMax: tensor payloads up to this size travel in the message, larger
// ones in a memfd. A memfd costs its creation, a mapping on each side and
// a page fault for each of its pages on each side (11 µs a fault on the VM
// of docs/BENCHMARKS.md): a batch of 32 rows of the bench's MLP (100,352
// bytes in) took 1.2 ms a run through a worker in a memfd, 0.40 ms inline,
// against 0.26 ms in process (`go test -bench Run ./worker`). So the
// limit holds a full batch of a 784-float row, BATCHSIZE 32. The message
// must fit the socket's send buffer (seqpacketPair).
const inlineMax = 128 << 10

// maxMessage bounds a message with an inline payload (fields and all).
const maxMessage = inlineMax + 64<<10

// enc builds a message.
type enc struct{ b []byte }

func (e *enc) u8(v byte)    { e.b = append(e.b, v) }
func (e *enc) u32(v uint32) { e.b = binary.LittleEndian.AppendUint32(e.b, v) }
func (e *enc) u64(v uint64) { e.b = binary.LittleEndian.AppendUint64(e.b, v) }
func (e *enc) str(s string) { e.u32(uint32(len(s))); e.b = append(e.b, s...) }

// headSize is the size of a message's head: its op and id.
const headSize = 1 + 8

func (e *enc) head(op byte, id uint64) {
	e.u8(op)
	e.u64(id)
}

// dec reads a message; the first malformed read sets err and every later
// read returns zero values.
type dec struct {
	b   []byte
	err error
}

var errShort = errors.New("worker protocol: truncated message")

// take is the next n bytes. The first error sticks: a later read does not
// replace it with errShort.
func (d *dec) take(n int) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || n > len(d.b) {
		d.err = errShort
		return nil
	}
	s := d.b[:n]
	d.b = d.b[n:]
	return s
}

func (d *dec) u8() byte {
	if s := d.take(1); s != nil {
		return s[0]
	}
	return 0
}

func (d *dec) u32() uint32 {
	if s := d.take(4); s != nil {
		return binary.LittleEndian.Uint32(s)
	}
	return 0
}

func (d *dec) u64() uint64 {
	if s := d.take(8); s != nil {
		return binary.LittleEndian.Uint64(s)
	}
	return 0
}

func (d *dec) str() string { return string(d.take(int(d.u32()))) }

// maxRank bounds a tensor's rank in a message: the most dimensions a
// stored tensor may have (persistence.MaxRank, which AI.TENSORSET
// enforces). It was 64, and a tensor of rank 65 to 255, which a client may
// store, failed a run with "internal error"; a run's output of a higher
// rank is answered modelstore.ErrRank.
const maxRank = 255

// tensorsSize is the payload the tensors need.
func tensorsSize(ts []*modelstore.Tensor) int {
	n := 0
	for _, t := range ts {
		if t != nil {
			n += len(t.Data)
		}
	}
	return n
}

// putTensors writes the tensors' descriptions into e and their bytes into
// payload (tensorsSize of them, in order).
func putTensors(e *enc, ts []*modelstore.Tensor, payload []byte) {
	putTensorRefs(e, ts)
	off := 0
	for _, t := range ts {
		if t != nil {
			off += copy(payload[off:], t.Data)
		}
	}
}

// putInline writes the tensors' descriptions, the inline placement and
// their bytes into e: a message carrying its payload, which takes no
// buffer of its own on the way (a transformer's 64 KB input or output).
func putInline(e *enc, ts []*modelstore.Tensor) {
	e.b = slices.Grow(e.b, payloadSize(ts))
	putTensorRefs(e, ts)
	e.u8(payloadInline)
	for _, t := range ts {
		if t != nil {
			e.b = append(e.b, t.Data...)
		}
	}
}

// payloadSize is how many bytes putPayload appends for ts: their
// descriptions, the placement, and their bytes when they go inline. A
// message sized with it is built in one allocation, not grown as it is
// written (the run's request and reply, issue 9).
func payloadSize(ts []*modelstore.Tensor) int {
	n := 4 + 1 // the count; the placement
	for _, t := range ts {
		n += 2 // dtype, present
		if t != nil {
			n += 4 + 8*len(t.Shape) + 8 + 8 // rank, dims, offset, length
		}
	}
	if size := tensorsSize(ts); size <= inlineMax {
		return n + size
	}
	return n + 8 // the memfd's size
}

// putTensorRefs writes the tensors' descriptions, each with the offset of
// its bytes in the payload (tensorsSize of them, in order).
func putTensorRefs(e *enc, ts []*modelstore.Tensor) {
	e.u32(uint32(len(ts)))
	off := 0
	for _, t := range ts {
		if t == nil {
			e.u8(0)
			e.u8(0)
			continue
		}
		e.u8(byte(t.DType))
		e.u8(1)
		e.u32(uint32(len(t.Shape)))
		for _, d := range t.Shape {
			e.u64(uint64(d))
		}
		e.u64(uint64(off))
		e.u64(uint64(len(t.Data)))
		off += len(t.Data)
	}
}

// tensorRef is a tensor read from a message, its bytes not yet located.
type tensorRef struct {
	t        *modelstore.Tensor
	off, len uint64
}

func getTensors(d *dec) []tensorRef {
	n := d.u32()
	if d.err != nil || n > 1<<16 {
		d.err = errShort
		return nil
	}
	refs := make([]tensorRef, n)
	for i := range refs {
		dt := modelstore.DType(d.u8())
		if d.u8() == 0 {
			continue
		}
		rank := d.u32()
		if rank > maxRank {
			d.err = modelstore.ErrRank
			return nil
		}
		shape := make([]int64, rank)
		for k := range shape {
			shape[k] = int64(d.u64())
		}
		refs[i] = tensorRef{t: &modelstore.Tensor{DType: dt, Shape: shape}, off: d.u64(), len: d.u64()}
	}
	return refs
}

// locate points (copy false) or copies (copy true) each tensor's bytes
// in payload.
func locate(refs []tensorRef, payload []byte, copyOut bool) ([]*modelstore.Tensor, error) {
	out := make([]*modelstore.Tensor, len(refs))
	for i, r := range refs {
		if r.t == nil {
			continue
		}
		if r.off > uint64(len(payload)) || r.len > uint64(len(payload))-r.off {
			return nil, errShort
		}
		data := payload[r.off : r.off+r.len : r.off+r.len]
		if copyOut {
			data = append(make([]byte, 0, len(data)), data...)
		}
		r.t.Data = data
		out[i] = r.t
	}
	return out, nil
}

func putIO(e *enc, ios []modelstore.IOInfo) {
	e.u32(uint32(len(ios)))
	for _, io := range ios {
		e.str(io.Name)
		e.u8(byte(io.DType))
		e.str(io.ElemType)
		if io.Shape == nil {
			e.u8(0)
			continue
		}
		e.u8(1)
		e.u32(uint32(len(io.Shape)))
		for _, d := range io.Shape {
			e.u64(uint64(d))
		}
	}
}

func getIO(d *dec) []modelstore.IOInfo {
	n := d.u32()
	if d.err != nil || n > 1<<20 {
		d.err = errShort
		return nil
	}
	ios := make([]modelstore.IOInfo, n)
	for i := range ios {
		ios[i].Name = d.str()
		ios[i].DType = modelstore.DType(d.u8())
		ios[i].ElemType = d.str()
		if d.u8() == 0 {
			continue
		}
		rank := d.u32()
		if rank > maxRank {
			d.err = errShort
			return nil
		}
		ios[i].Shape = make([]int64, rank)
		for k := range ios[i].Shape {
			ios[i].Shape[k] = int64(d.u64())
		}
	}
	return ios
}

// Errors cross the boundary as a kind and their text: ONNX Runtime's own
// errors, the store's sentinels (so that the command layer maps them as it
// does in-process), or anything else.
const (
	kindOther byte = iota
	kindORT
	kindSentinel // + index in sentinels
)

// sentinels are the modelstore errors a session may return, wrapped or
// not. Append only: the index travels in messages between a server and
// workers of the same binary, so order only has to agree within one build.
var sentinels = []error{
	modelstore.ErrSessionClosed, modelstore.ErrInputCount, modelstore.ErrUnsupportedDType,
	modelstore.ErrUnsupportedShape, modelstore.ErrDataLength, modelstore.ErrStringElements,
	modelstore.ErrNullInString, modelstore.ErrModelEmpty, modelstore.ErrModelMalformed,
	modelstore.ErrModelTooDeep, modelstore.ErrModelExternalData, modelstore.ErrModelTensorSize,
	modelstore.ErrRuntimeNotInitialized, modelstore.ErrModelUnsafe,
	context.Canceled, // a run cancelled before it started (lane.go)
}

func putError(e *enc, err error) {
	e.u8(1)
	var ortErr *modelstore.ORTError
	switch {
	case errors.As(err, &ortErr):
		e.u8(kindORT)
		e.str(ortErr.Msg)
		return
	}
	for i, s := range sentinels {
		if errors.Is(err, s) {
			e.u8(kindSentinel + byte(i))
			e.str(err.Error())
			return
		}
	}
	e.u8(kindOther)
	e.str(err.Error())
}

// remoteError is a worker's error with its text and, when it wrapped one,
// the sentinel it wrapped (errors.Is sees it, as in-process).
type remoteError struct {
	msg      string
	sentinel error
}

func (e *remoteError) Error() string { return e.msg }
func (e *remoteError) Unwrap() error { return e.sentinel }

func getError(d *dec) error {
	kind := d.u8()
	msg := d.str()
	if d.err != nil {
		return d.err
	}
	switch {
	case kind == kindORT:
		return &modelstore.ORTError{Msg: msg}
	case kind >= kindSentinel && int(kind-kindSentinel) < len(sentinels):
		return &remoteError{msg: msg, sentinel: sentinels[kind-kindSentinel]}
	}
	return &remoteError{msg: msg}
}

// Payload placement, after the tensors.
const (
	payloadInline byte = 1
	payloadShm    byte = 2
)

func checkSize(n uint64) error {
	if n > math.MaxInt32*uint64(64) {
		return fmt.Errorf("worker protocol: payload of %d bytes", n)
	}
	return nil
}
