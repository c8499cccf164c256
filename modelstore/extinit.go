package modelstore

// Shared weights: ONNX Runtime normally parses a model's initializers out
// of the model bytes into memory of its own, so a stored model is held
// twice (our bytes, which AI.MODELGET and snapshots return, and ORT's
// tensors) and creating the session copies every weight. Instead, the large
// initializers of the main graph are handed to ORT where they already lie
// in the stored bytes:
//
//  1. planSharedWeights finds them (raw_data of at least sharedMinBytes)
//     and writes a small copy of the model in which each one's raw_data is
//     replaced by an external-data reference. The reference is never
//     followed: it only tells ORT's loader that the data comes from
//     elsewhere, so the TensorProto passes its size checks without bytes.
//  2. Each one becomes an OrtValue over its bytes in place
//     (CreateTensorWithDataAsOrtValue) that is given to the session options
//     with AddInitializer: ORT then uses that value as the initializer and
//     never reads the reference. (AddExternalInitializers, the other
//     candidate, copies the data into the graph; measured, and so do ORT's
//     in-memory external files.)
//  3. Prepacking is turned off for the session ("session.disable_prepacking"):
//     ORT would otherwise repack MatMul and Conv weights into a second,
//     kernel-friendly copy. Large models are memory-bound at small batch
//     sizes, where repacking gains little.
//
// The OrtValues and the memory they point into must outlive the session:
// the Session keeps them (sharedWeights) and lets go of them after ORT has
// destroyed it. The memory is either a ModelBuffer (a reference is held) or
// Go memory (pinned, as cgo requires of Go memory C keeps).
//
// Anything else stays ORT's: small initializers, those in subgraphs and
// functions, sparse ones, strings, and those ORT derives by constant
// folding. A model whose session cannot be created this way is compiled the
// usual way, and its Session says WeightsCopied: so are Conv models at the
// highest optimization level, whose weights ORT rewrites into its NCHWc
// layout (a copy of its own in any case), which needs them in the graph.

import (
	"encoding/binary"
	"runtime"
	"strconv"
)

// sharedMinBytes: initializers at least this large are shared. Smaller
// ones cost little to copy, and sharing needs prepacking off.
const sharedMinBytes = 1 << 20

// sharedMinTotal: a model is compiled with shared weights only when it has
// at least this many bytes of them. Below it a second copy is cheap, while
// prepacking pays: without it a 1024x4608 MatMul ran 1.3x (batch 1) to
// 2.6x (batch 8) slower here, and as fast from batch 256 on. A variable so
// that tests can share smaller models.
var sharedMinTotal int64 = 64 << 20

// sharedLocation is the external-data location written into the small
// model. ORT never opens it: AddInitializer supplies the data first (ORT
// refuses absolute paths here, or this would name one that cannot exist).
const sharedLocation = "enclaveai-shared-weights"

// WeightsMode says how a session holds the model's large initializers.
type WeightsMode uint8

const (
	// WeightsCopied: ONNX Runtime holds its own copy (as usual).
	WeightsCopied WeightsMode = iota
	// WeightsShared: ONNX Runtime reads them in the stored model bytes.
	WeightsShared
)

// String is the mode as AI.MODELINFO shows it: "copied" or "shared".
func (m WeightsMode) String() string {
	if m == WeightsShared {
		return "shared"
	}
	return "copied"
}

// sharedInit is one initializer to share: its bytes are
// model[off : off+size].
type sharedInit struct {
	name  string
	dims  []int64
	dtype uint64
	off   int
	size  int
}

// sharePlan is what planSharedWeights found.
type sharePlan struct {
	graph []byte // the model with the shared raw_data left out
	inits []sharedInit
	bytes int64 // total shared bytes
}

// shareableType reports whether ORT can wrap raw data of ONNX type t as a
// tensor in place, and the element size that the data's alignment is
// checked against.
func shareableType(t uint64) (size int, ok bool) {
	switch t {
	case onnxUint8, onnxInt8, onnxBool:
		return 1, true
	case onnxUint16, onnxInt16, onnxFloat16, onnxBfloat16:
		return 2, true
	case onnxFloat, onnxInt32, onnxUint32:
		return 4, true
	case onnxDouble, onnxInt64, onnxUint64:
		return 8, true
	}
	return 0, false
}

// unalignedOK: the processor loads misaligned elements correctly, and ORT's
// CPU kernels use unaligned vector loads, so weights at any offset can be
// shared (TestSharedWeightsMisaligned runs MatMul, Gemm and Conv on such
// weights). Elsewhere only aligned initializers are shared. Protobuf puts
// raw_data wherever the preceding fields end, so on amd64 three float
// tensors out of four start misaligned.
var unalignedOK = runtime.GOARCH == "amd64" || runtime.GOARCH == "arm64"

// planSharedWeights finds the main graph's initializers worth sharing and
// writes the small model ORT loads instead. It returns nil when there is
// nothing (or too little) to share. model must already have passed
// CheckModelBlob.
func planSharedWeights(model []byte) (*sharePlan, error) {
	p := &sharePlan{}
	var out []byte
	m := newFields(model, 0)
	for start := 0; m.next(); start = m.pos {
		if m.num != fModelGraph || m.wire != wireBytes {
			out = append(out, model[start:m.pos]...)
			continue
		}
		g, err := p.rewriteGraph(model, m.data, m.dpos)
		if err != nil {
			return nil, err
		}
		out = appendBytesField(out, fModelGraph, g)
	}
	if m.err != nil {
		return nil, m.err
	}
	if p.bytes < sharedMinTotal {
		return nil, nil
	}
	p.graph = out
	return p, nil
}

// rewriteGraph copies a GraphProto, dropping the raw_data of the
// initializers it shares.
func (p *sharePlan) rewriteGraph(model, graph []byte, base int) ([]byte, error) {
	var out []byte
	g := newFields(graph, base)
	for start := 0; g.next(); start = g.pos {
		field := graph[start:g.pos]
		if g.num != fGraphInitializer || g.wire != wireBytes || len(g.data) < sharedMinBytes {
			out = append(out, field...)
			continue
		}
		t, ok, err := p.rewriteTensor(model, g.data, g.dpos)
		if err != nil {
			return nil, err
		}
		if !ok {
			out = append(out, field...)
			continue
		}
		out = appendBytesField(out, fGraphInitializer, t)
	}
	return out, g.err
}

// rewriteTensor returns the TensorProto without its raw_data and with an
// external-data reference instead, if it is to be shared.
func (p *sharePlan) rewriteTensor(model, tensor []byte, base int) ([]byte, bool, error) {
	in := sharedInit{off: -1}
	var fields []byte // every field but raw_data
	t := newFields(tensor, base)
	for start := 0; t.next(); start = t.pos {
		switch {
		case t.num == fTensorRawData && t.wire == wireBytes:
			in.off, in.size = t.dpos, len(t.data)
			continue
		case t.num == fTensorName && t.wire == wireBytes:
			in.name = string(t.data)
		case t.num == fTensorDataType && t.wire == wireVarint:
			in.dtype = t.val
		case t.num == fTensorDims && t.wire == wireVarint:
			in.dims = append(in.dims, int64(t.val))
		case t.num == fTensorDims && t.wire == wireBytes: // packed
			for i := 0; i < len(t.data); {
				v, n := readVarint(t.data, i)
				if n == 0 {
					return nil, false, ErrModelMalformed
				}
				in.dims = append(in.dims, int64(v))
				i += n
			}
		case t.num == fTensorSegment:
			return nil, false, nil // a part of a tensor: ORT assembles those
		}
		fields = append(fields, tensor[start:t.pos]...)
	}
	if t.err != nil {
		return nil, false, t.err
	}
	size, ok := shareableType(in.dtype)
	if !ok || in.off < 0 || in.size < sharedMinBytes || in.name == "" {
		return nil, false, nil
	}
	if !unalignedOK && in.off%size != 0 {
		return nil, false, nil // the offset's alignment is that of the data: buffers start aligned
	}
	for _, kv := range [...][2]string{
		{"location", sharedLocation},
		{"offset", strconv.Itoa(in.off)},
		{"length", strconv.Itoa(in.size)},
	} {
		var entry []byte
		entry = appendBytesField(entry, 1, []byte(kv[0])) // StringStringEntryProto.key
		entry = appendBytesField(entry, 2, []byte(kv[1])) // .value
		fields = appendBytesField(fields, fTensorExternalData, entry)
	}
	fields = binary.AppendUvarint(fields, fTensorDataLocation<<3|wireVarint)
	fields = binary.AppendUvarint(fields, dataLocationExt)
	p.inits = append(p.inits, in)
	p.bytes += int64(in.size)
	return fields, true, nil
}

// fTensorSegment is TensorProto.segment.
const fTensorSegment = 3

func appendBytesField(b []byte, num uint64, payload []byte) []byte {
	b = binary.AppendUvarint(b, num<<3|wireBytes)
	b = binary.AppendUvarint(b, uint64(len(payload)))
	return append(b, payload...)
}
