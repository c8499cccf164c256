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

// checkMessage walks one message outside any function body. depth is its
// nesting level (the model is 1).
func checkMessage(b []byte, base int, kind msgKind, depth int) error {
	return walkMessage(b, base, kind, depth, false)
}

// walkMessage is checkMessage; inFunction is true within a FunctionProto,
// whose nodes may take an attribute's value from the caller
// (ref_attr_name).
func walkMessage(b []byte, base int, kind msgKind, depth int, inFunction bool) error {
	if depth > MaxModelDepth {
		return fmt.Errorf("%w (at byte %d)", ErrModelTooDeep, base)
	}
	if kind == msgTensor {
		return checkTensor(b, base)
	}
	inFunction = inFunction || kind == msgFunction
	f := newFields(b, base)
	for f.next() {
		if f.wire != wireBytes {
			continue
		}
		child := childKind(kind, f.num)
		if child == msgAttribute && kind == msgNode {
			if why := checkAttribute(f.data, inFunction); why != "" {
				return attributeError(b, f.data, why)
			}
		}
		if child != msgNone {
			if err := walkMessage(f.data, f.dpos, child, depth+1, inFunction); err != nil {
				return err
			}
		}
	}
	return f.err
}

// AttributeProto fields and types that checkAttribute reads (onnx.proto).
const (
	fAttrTP           = 14 // .tp
	fAttrSparseTensor = 22 // .sparse_tensor
	attrSparseTensor  = 11
	attrTypeProto     = 13
)

// checkAttribute says why a node's attribute is refused, or "" when it is
// not. ref_attr_name names an attribute of the function whose body holds
// the node; outside a function body it means nothing, yet the sanitizer's
// rules skip an attribute that has one (its value is the caller's) while
// gonnx and ONNX Runtime's kernels read the value the attribute carries:
// Conv strides [0] beside an empty ref_attr_name passed every rule and
// divided by zero (review, 2026-12-07). And an attribute of type TENSOR,
// GRAPH, SPARSE_TENSOR or TYPE_PROTO carries the message of its type:
// gonnx's Constant and ConstantOfShape dereference a missing t.
func checkAttribute(b []byte, inFunction bool) string {
	var typ uint64
	var ref, hasT, hasG, hasSparse, hasTP bool
	f := newFields(b, 0)
	for f.next() {
		switch {
		case f.num == fAttrType && f.wire == wireVarint:
			typ = f.val
		case f.num == fAttrRef && f.wire == wireBytes:
			ref = true
		case f.num == fAttrT && f.wire == wireBytes:
			hasT = true
		case f.num == fAttrG && f.wire == wireBytes:
			hasG = true
		case f.num == fAttrSparseTensor && f.wire == wireBytes:
			hasSparse = true
		case f.num == fAttrTP && f.wire == wireBytes:
			hasTP = true
		}
	}
	if f.err != nil {
		return "" // the walk reports it
	}
	switch {
	case ref && !inFunction:
		return "has ref_attr_name, which only a node of a function body may have"
	case ref:
		return "" // the caller's value
	case typ == attrTensor && !hasT:
		return "is of type TENSOR but carries no tensor (t)"
	case typ == attrGraph && !hasG:
		return "is of type GRAPH but carries no graph (g)"
	case typ == attrSparseTensor && !hasSparse:
		return "is of type SPARSE_TENSOR but carries no sparse_tensor"
	case typ == attrTypeProto && !hasTP:
		return "is of type TYPE_PROTO but carries no tp"
	}
	return ""
}

// attributeError refuses a node's attribute (ErrModelUnsafe), naming the
// node, its operator and the attribute (this path may allocate).
func attributeError(node, attr []byte, why string) error {
	var name, op, an string
	f := newFields(node, 0)
	for f.next() {
		switch {
		case f.num == fNodeName && f.wire == wireBytes:
			name = string(f.data)
		case f.num == fNodeOpType && f.wire == wireBytes:
			op = string(f.data)
		}
	}
	a := newFields(attr, 0)
	for a.next() {
		if a.num == fAttrName && a.wire == wireBytes {
			an = string(a.data)
		}
	}
	cut := func(s string) string {
		if len(s) > 80 {
			return s[:80] + "..."
		}
		return s
	}
	return fmt.Errorf("%w: node %q (%s): attribute %q %s", ErrModelUnsafe, cut(name), cut(op), cut(an), why)
}

// TensorProto fields.
const (
	fTensorDims         = 1
	fTensorDataType     = 2
	fTensorStringData   = 6
	fTensorRawData      = 9
	fTensorExternalData = 13
	fTensorDataLocation = 14
	dataLocationExt     = 1 // TensorProto.DataLocation.EXTERNAL
)

// checkTensor refuses external data, and a tensor whose values do not
// match its dims and type: a raw_data of the wrong length
// (ErrModelTensorSize), dims that are negative or whose element count
// passes 2^63 (gorgonia's TotalSize wraps silently: [3, 0x5555555555555556]
// counts 2), and values carried in the typed fields (float_data,
// int32_data, string_data, int64_data, double_data, uint64_data) of
// another count than the dims need, in a field of another type, in more
// than one field, or not at all (ErrModelUnsafe): gonnx and gorgonia
// allocate the dims' element count for a tensor without data, and a
// 77-byte model asked for 64 GiB that way (review, 2026-12-07). A
// TensorProto holds no further messages the walker needs (Segment and the
// external_data entries are leaves), so it adds no depth.
func checkTensor(b []byte, base int) error {
	var (
		dataType, location uint64
		elems              uint64 = 1 // the product of the dims
		nonZero            uint64 = 1 // the product of the dims other than 0
		badDims            bool       // a negative dimension, or the product passes 2^63
		hasRaw, external   bool
		rawLen             int
		counts             [fTensorUint64Data + 1]uint64 // values in each typed field, by field number
	)
	mulDim := func(d uint64) {
		if int64(d) < 0 {
			badDims = true
			return
		}
		elems *= d // exact while nonZero does not overflow
		if d == 0 {
			return
		}
		hi, lo := bits.Mul64(nonZero, d)
		if hi != 0 || int64(lo) < 0 {
			badDims = true
		}
		nonZero = lo
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
		case fTensorFloatData, fTensorInt32Data, fTensorStringData, fTensorInt64Data, fTensorDoubleData, fTensorUint64Data:
			n, err := valueCount(f.num, f.wire, f.data, f.dpos)
			if err != nil {
				return err
			}
			counts[f.num] += n
		}
	}
	if f.err != nil {
		return f.err
	}
	if external || location == dataLocationExt {
		return ErrModelExternalData
	}
	if badDims {
		return tensorSizeError(b, dataType, rawLen, 0, true)
	}
	field, per, den := valueField(dataType)
	first, second, carried := 0, 0, 0 // the typed fields that hold values
	for num, n := range counts {
		if n > 0 {
			carried++
			if first == 0 {
				first = num
			} else if second == 0 {
				second = num
			}
		}
	}
	if hasRaw {
		if carried > 0 {
			return tensorDataError(b, "carries both raw_data and %s", fieldName(first))
		}
		want, known := rawDataSize(dataType, elems)
		if !known {
			return nil // STRING or an unknown type: the engine decides
		}
		if want != uint64(rawLen) {
			return tensorSizeError(b, dataType, rawLen, want, false)
		}
		return nil
	}
	switch {
	case carried > 1:
		return tensorDataError(b, "carries values in both %s and %s", fieldName(first), fieldName(second))
	case carried == 0 && elems > 0:
		return tensorDataError(b, "has %d elements but carries no values", elems)
	case carried == 0:
		return nil
	case field == 0: // an unknown type: the engines refuse it, or take one value per element
		if got := counts[first]; got != elems {
			return tensorDataError(b, "has %d elements but carries %d values in %s", elems, got, fieldName(first))
		}
	case first != field:
		return tensorDataError(b, "carries its values in %s, but %s keeps them in %s", fieldName(first), onnxTypeName(dataType), fieldName(field))
	default:
		want := (elems*per + den - 1) / den // elems < 2^63, per <= 2
		if got := counts[field]; got != want {
			return tensorDataError(b, "needs %d values in %s for its %d elements, but carries %d", want, fieldName(field), elems, got)
		}
	}
	return nil
}

// valueField is the TensorProto field that holds the values of ONNX type
// t when they are not in raw_data, and how many entries n elements take
// there: n * per / den, rounded up (two 4-bit values share an int32, a
// complex number takes two floats). field is 0 for an unknown type.
func valueField(t uint64) (field int, per, den uint64) {
	switch t {
	case onnxFloat:
		return fTensorFloatData, 1, 1
	case onnxComplex64:
		return fTensorFloatData, 2, 1
	case onnxUint8, onnxInt8, onnxUint16, onnxInt16, onnxInt32, onnxBool, onnxFloat16, onnxBfloat16,
		onnxFloat8E4M3FN, onnxFloat8E4M3FNUZ, onnxFloat8E5M2, onnxFloat8E5M2FNUZ, onnxFloat8E8M0:
		return fTensorInt32Data, 1, 1
	case onnxUint4, onnxInt4, onnxFloat4E2M1:
		return fTensorInt32Data, 1, 2
	case onnxString:
		return fTensorStringData, 1, 1
	case onnxInt64:
		return fTensorInt64Data, 1, 1
	case onnxDouble:
		return fTensorDoubleData, 1, 1
	case onnxComplex128:
		return fTensorDoubleData, 2, 1
	case onnxUint32, onnxUint64:
		return fTensorUint64Data, 1, 1
	}
	return 0, 1, 1
}

// valueCount is how many values one occurrence of a typed field holds:
// packed or not, varints (int32_data, int64_data, uint64_data), fixed32
// (float_data) or fixed64 (double_data), or one string.
func valueCount(num uint64, wire uint8, data []byte, pos int) (uint64, error) {
	if wire != wireBytes {
		switch {
		case num == fTensorFloatData && wire == wireFixed32, num == fTensorDoubleData && wire == wireFixed64,
			num != fTensorFloatData && num != fTensorDoubleData && num != fTensorStringData && wire == wireVarint:
			return 1, nil
		}
		return 0, nil // another wire type: protobuf keeps it as an unknown field
	}
	if num == fTensorStringData {
		return 1, nil
	}
	size := 0
	switch num {
	case fTensorFloatData:
		size = 4
	case fTensorDoubleData:
		size = 8
	}
	if size > 0 {
		if len(data)%size != 0 {
			return 0, fmt.Errorf("%w (packed values of %d bytes cut at byte %d)", ErrModelMalformed, size, pos+len(data))
		}
		return uint64(len(data) / size), nil
	}
	var n uint64
	for _, c := range data { // a varint ends at a byte below 0x80
		if c < 0x80 {
			n++
		}
	}
	if len(data) > 0 && data[len(data)-1] >= 0x80 {
		return 0, fmt.Errorf("%w (truncated packed varints at byte %d)", ErrModelMalformed, pos+len(data))
	}
	return n, nil
}

func fieldName(num int) string {
	switch num {
	case fTensorFloatData:
		return "float_data"
	case fTensorInt32Data:
		return "int32_data"
	case fTensorStringData:
		return "string_data"
	case fTensorInt64Data:
		return "int64_data"
	case fTensorDoubleData:
		return "double_data"
	case fTensorUint64Data:
		return "uint64_data"
	}
	return fmt.Sprintf("field %d", num)
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

// tensorDataError refuses a tensor whose values do not match its dims
// and type (ErrModelUnsafe), naming it (this path may allocate).
func tensorDataError(b []byte, format string, args ...any) error {
	name, dims := tensorNameDims(b)
	return fmt.Errorf("%w: tensor %q of dims %v %s", ErrModelUnsafe, name, dims, fmt.Sprintf(format, args...))
}

// tensorSizeError builds the ErrModelTensorSize error, decoding the tensor
// again for its name and dims (this path may allocate).
func tensorSizeError(b []byte, dataType uint64, rawLen int, want uint64, badDims bool) error {
	name, dims := tensorNameDims(b)
	if badDims {
		return fmt.Errorf("%w: tensor %q has invalid dims %v (a negative one, or more than 2^63 elements)", ErrModelTensorSize, name, dims)
	}
	return fmt.Errorf("%w: tensor %q has %d bytes of raw_data, but dims %v of %s need %d",
		ErrModelTensorSize, name, rawLen, dims, onnxTypeName(dataType), want)
}

// tensorNameDims decodes a tensor's name and dims for an error, both cut
// short when long.
func tensorNameDims(b []byte) (string, []int64) {
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
	return string(name), dims
}
