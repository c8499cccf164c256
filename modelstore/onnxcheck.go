package modelstore

import (
	"fmt"
	"math/bits"
)

// MaxModelDepth is how deeply the messages of a model may nest. Each level
// of subgraph (a Loop or If body) costs three (graph, node, attribute), so
// this allows about twenty nested control-flow operators; protobuf's own
// parser stops at 100.
const MaxModelDepth = 64

// CheckModelBlob walks an ONNX ModelProto in protobuf wire format and
// refuses, before ONNX Runtime sees it, a model that is empty, malformed or
// truncated (ErrModelEmpty, ErrModelMalformed), nested more than
// MaxModelDepth messages deep (ErrModelTooDeep), that has a tensor stored
// as external data (ErrModelExternalData: the runtime would open files named
// by the client), or a tensor whose raw_data length disagrees with its dims
// and type (ErrModelTensorSize, wrapped with the tensor's name).
//
// It visits every tensor ONNX can hold: graph initializers and sparse
// initializers, tensor attributes (Constant values), subgraphs in node
// attributes (Loop, If, Scan bodies) at any depth, model-local functions
// and training graphs. Unknown fields are skipped as protobuf does, so
// models from newer ONNX versions pass. It is O(len(b)), recursive to at
// most MaxModelDepth frames, and allocates only to report an error.
func CheckModelBlob(b []byte) error {
	if len(b) == 0 {
		return ErrModelEmpty
	}
	return checkMessage(b, 0, msgModel, 1)
}

// msgKind names the ONNX messages the walker descends into.
type msgKind uint8

const (
	msgNone msgKind = iota
	msgModel
	msgGraph
	msgNode
	msgAttribute
	msgTensor
	msgSparseTensor
	msgFunction
	msgTrainingInfo
	msgValueInfo
	msgType
	msgTypeNested // TypeProto.Sequence, .Map, .Optional: hold a TypeProto
)

// childKind says which message field num of a kind message holds, or
// msgNone for fields that hold no tensors and cannot nest (skipped whole).
func childKind(kind msgKind, num uint64) msgKind {
	switch kind {
	case msgModel:
		switch num {
		case 7: // graph
			return msgGraph
		case 20: // training_info
			return msgTrainingInfo
		case 25: // functions
			return msgFunction
		}
	case msgGraph:
		switch num {
		case 1: // node
			return msgNode
		case 5: // initializer
			return msgTensor
		case 15: // sparse_initializer
			return msgSparseTensor
		case 11, 12, 13: // input, output, value_info
			return msgValueInfo
		}
	case msgNode:
		if num == 5 { // attribute
			return msgAttribute
		}
	case msgAttribute:
		switch num {
		case 5, 10: // t, tensors
			return msgTensor
		case 6, 11: // g, graphs
			return msgGraph
		case 22, 23: // sparse_tensor, sparse_tensors
			return msgSparseTensor
		case 14, 15: // tp, type_protos
			return msgType
		}
	case msgSparseTensor:
		if num == 1 || num == 2 { // values, indices
			return msgTensor
		}
	case msgFunction:
		switch num {
		case 7: // node
			return msgNode
		case 11: // attribute_proto (ONNX 1.13+): default attribute values
			return msgAttribute
		case 12: // value_info (ONNX 1.16+)
			return msgValueInfo
		}
	case msgTrainingInfo:
		if num == 1 || num == 2 { // initialization, algorithm
			return msgGraph
		}
	case msgValueInfo:
		if num == 2 { // type
			return msgType
		}
	case msgType:
		switch num {
		case 4, 5, 9: // sequence_type, map_type, optional_type
			return msgTypeNested
		}
	case msgTypeNested:
		switch num {
		case 1, 2: // Sequence/Optional.elem_type, Map.value_type
			return msgType
		}
	}
	return msgNone
}

// checkMessage walks one message. depth is its nesting level (the model is 1).
func checkMessage(b []byte, base int, kind msgKind, depth int) error {
	if depth > MaxModelDepth {
		return fmt.Errorf("%w (at byte %d)", ErrModelTooDeep, base)
	}
	if kind == msgTensor {
		return checkTensor(b, base)
	}
	f := newFields(b, base)
	for f.next() {
		if f.wire != wireBytes {
			continue
		}
		if child := childKind(kind, f.num); child != msgNone {
			if err := checkMessage(f.data, f.dpos, child, depth+1); err != nil {
				return err
			}
		}
	}
	return f.err
}

// TensorProto fields.
const (
	fTensorDims         = 1
	fTensorDataType     = 2
	fTensorRawData      = 9
	fTensorExternalData = 13
	fTensorDataLocation = 14
	dataLocationExt     = 1 // TensorProto.DataLocation.EXTERNAL
)

// checkTensor refuses external data and a raw_data of the wrong length.
// A TensorProto holds no further messages the walker needs (Segment and
// the external_data entries are leaves), so it adds no depth.
func checkTensor(b []byte, base int) error {
	var (
		dataType, location uint64
		elems              uint64 = 1
		badDims            bool   // a negative dimension, or the product overflows
		hasRaw, external   bool
		rawLen             int
	)
	mulDim := func(d uint64) {
		if int64(d) < 0 {
			badDims = true
			return
		}
		hi, lo := bits.Mul64(elems, d)
		if hi != 0 {
			badDims = true
		}
		elems = lo
	}
	f := newFields(b, base)
	for f.next() {
		switch f.num {
		case fTensorDims:
			switch f.wire {
			case wireVarint:
				mulDim(f.val)
			case wireBytes: // packed
				for i := 0; i < len(f.data); {
					v, n := readVarint(f.data, i)
					if n == 0 {
						return fmt.Errorf("%w (truncated packed dims at byte %d)", ErrModelMalformed, f.dpos+i)
					}
					mulDim(v)
					i += n
				}
			}
		case fTensorDataType:
			if f.wire == wireVarint {
				dataType = f.val
			}
		case fTensorRawData:
			if f.wire == wireBytes {
				hasRaw, rawLen = true, len(f.data)
			}
		case fTensorExternalData:
			if f.wire == wireBytes {
				external = true
			}
		case fTensorDataLocation:
			if f.wire == wireVarint {
				location = f.val
			}
		}
	}
	if f.err != nil {
		return f.err
	}
	if external || location == dataLocationExt {
		return ErrModelExternalData
	}
	if !hasRaw {
		return nil
	}
	want, known := rawDataSize(dataType, elems)
	if !known {
		return nil // STRING or an unknown type: ONNX Runtime decides
	}
	if badDims || want != uint64(rawLen) {
		return tensorSizeError(b, dataType, rawLen, want, badDims)
	}
	return nil
}

// rawDataSize is the raw_data length n elements of ONNX type t need; known
// is false for STRING (which has no raw form) and unknown types.
func rawDataSize(t, n uint64) (size uint64, known bool) {
	var num, den uint64 = 1, 1 // bytes per element = num/den
	switch t {
	case onnxUint8, onnxInt8, onnxBool, onnxFloat8E4M3FN, onnxFloat8E4M3FNUZ,
		onnxFloat8E5M2, onnxFloat8E5M2FNUZ, onnxFloat8E8M0:
	case onnxUint16, onnxInt16, onnxFloat16, onnxBfloat16:
		num = 2
	case onnxFloat, onnxInt32, onnxUint32:
		num = 4
	case onnxDouble, onnxInt64, onnxUint64, onnxComplex64:
		num = 8
	case onnxComplex128:
		num = 16
	case onnxUint4, onnxInt4, onnxFloat4E2M1: // two per byte, rounded up
		den = 2
	default:
		return 0, false
	}
	hi, lo := bits.Mul64(n, num)
	if hi != 0 {
		return ^uint64(0), true // cannot match any real length
	}
	return (lo + den - 1) / den, true
}

// tensorSizeError builds the ErrModelTensorSize error, decoding the tensor
// again for its name and dims (this path may allocate).
func tensorSizeError(b []byte, dataType uint64, rawLen int, want uint64, badDims bool) error {
	var name []byte
	var dims []int64
	f := newFields(b, 0)
	for f.next() {
		switch {
		case f.num == fTensorName && f.wire == wireBytes:
			name = f.data
		case f.num == fTensorDims && f.wire == wireVarint:
			dims = append(dims, int64(f.val))
		case f.num == fTensorDims && f.wire == wireBytes:
			for i := 0; i < len(f.data); {
				v, n := readVarint(f.data, i)
				if n == 0 {
					break
				}
				dims = append(dims, int64(v))
				i += n
			}
		}
	}
	if len(name) > 80 {
		name = append(name[:80:80], "..."...)
	}
	if len(dims) > 16 {
		dims = dims[:16]
	}
	if badDims {
		return fmt.Errorf("%w: tensor %q has invalid dims %v", ErrModelTensorSize, name, dims)
	}
	return fmt.Errorf("%w: tensor %q has %d bytes of raw_data, but dims %v of %s need %d",
		ErrModelTensorSize, name, rawLen, dims, onnxTypeName(dataType), want)
}
