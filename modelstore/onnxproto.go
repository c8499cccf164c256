package modelstore

import (
	"fmt"
	"strings"
)

// A minimal reader of the protobuf wire format, enough to walk an ONNX
// ModelProto without generated code: CheckModelBlob uses it to refuse unsafe
// models before ONNX Runtime parses them, and readGraphIO to learn a model's
// inputs and outputs without compiling it twice.
//
// Field numbers come from onnx.proto (ONNX 1.12 as installed with
// python3-onnx, plus the later additions noted where used).

// Wire types.
const (
	wireVarint  = 0
	wireFixed64 = 1
	wireBytes   = 2
	wireStart   = 3 // groups: never used by ONNX
	wireEnd     = 4
	wireFixed32 = 5
)

// maxFieldNumber is protobuf's largest field number (2^29 - 1).
const maxFieldNumber = 1<<29 - 1

// pbFields iterates over the fields of one encoded message. After next
// returns false, err tells whether the message ended cleanly.
type pbFields struct {
	b    []byte
	pos  int
	base int // offset of b[0] in the whole blob, for error messages

	num  uint64 // current field number
	wire uint8  // current wire type
	val  uint64 // value of a varint, fixed32 or fixed64 field
	data []byte // payload of a length-delimited field
	dpos int    // offset of data[0] in the whole blob
	err  error
}

func newFields(b []byte, base int) pbFields { return pbFields{b: b, base: base} }

// readVarint decodes a base-128 varint at b[i:]. n is 0 when the varint is
// truncated or longer than ten bytes.
func readVarint(b []byte, i int) (v uint64, n int) {
	for shift := uint(0); shift < 70; shift += 7 {
		if i+n >= len(b) {
			return 0, 0
		}
		c := b[i+n]
		n++
		v |= uint64(c&0x7f) << shift
		if c < 0x80 {
			return v, n
		}
	}
	return 0, 0
}

func (it *pbFields) fail(what string, at int) bool {
	it.err = fmt.Errorf("%w (%s at byte %d)", ErrModelMalformed, what, it.base+at)
	return false
}

// next advances to the next field. It returns false at the end of the
// message or on malformed data (then err is set).
func (it *pbFields) next() bool {
	if it.err != nil || it.pos >= len(it.b) {
		return false
	}
	start := it.pos
	tag, n := readVarint(it.b, it.pos)
	if n == 0 {
		return it.fail("truncated field tag", start)
	}
	it.pos += n
	it.num, it.wire = tag>>3, uint8(tag&7)
	if it.num == 0 || it.num > maxFieldNumber {
		return it.fail(fmt.Sprintf("invalid field number %d", it.num), start)
	}
	switch it.wire {
	case wireVarint:
		v, n := readVarint(it.b, it.pos)
		if n == 0 {
			return it.fail(fmt.Sprintf("truncated varint in field %d", it.num), it.pos)
		}
		it.val = v
		it.pos += n
	case wireFixed64, wireFixed32:
		size := 8
		if it.wire == wireFixed32 {
			size = 4
		}
		if len(it.b)-it.pos < size {
			return it.fail(fmt.Sprintf("truncated fixed-size field %d", it.num), it.pos)
		}
		it.val = 0
		for i := size - 1; i >= 0; i-- {
			it.val = it.val<<8 | uint64(it.b[it.pos+i])
		}
		it.pos += size
	case wireBytes:
		l, n := readVarint(it.b, it.pos)
		if n == 0 {
			return it.fail(fmt.Sprintf("truncated length of field %d", it.num), it.pos)
		}
		it.pos += n
		if l > uint64(len(it.b)-it.pos) {
			return it.fail(fmt.Sprintf("field %d is longer than its message", it.num), start)
		}
		it.data = it.b[it.pos : it.pos+int(l)]
		it.dpos = it.base + it.pos
		it.pos += int(l)
	case wireStart, wireEnd:
		return it.fail(fmt.Sprintf("group in field %d", it.num), start)
	default:
		return it.fail(fmt.Sprintf("invalid wire type %d in field %d", it.wire, it.num), start)
	}
	return true
}

// ONNX TensorProto.DataType values. ONNX Runtime's
// ONNXTensorElementDataType uses the same numbers.
const (
	onnxUndefined  = 0
	onnxFloat      = 1
	onnxUint8      = 2
	onnxInt8       = 3
	onnxUint16     = 4
	onnxInt16      = 5
	onnxInt32      = 6
	onnxInt64      = 7
	onnxString     = 8
	onnxBool       = 9
	onnxFloat16    = 10
	onnxDouble     = 11
	onnxUint32     = 12
	onnxUint64     = 13
	onnxComplex64  = 14
	onnxComplex128 = 15
	onnxBfloat16   = 16
	// ONNX 1.14 and later.
	onnxFloat8E4M3FN   = 17
	onnxFloat8E4M3FNUZ = 18
	onnxFloat8E5M2     = 19
	onnxFloat8E5M2FNUZ = 20
	onnxUint4          = 21
	onnxInt4           = 22
	onnxFloat4E2M1     = 23
	onnxFloat8E8M0     = 24
)

// onnxTypeNames are the element type names ONNX Runtime uses in type
// strings such as "tensor(float)".
var onnxTypeNames = [...]string{
	onnxUndefined: "undefined", onnxFloat: "float", onnxUint8: "uint8", onnxInt8: "int8",
	onnxUint16: "uint16", onnxInt16: "int16", onnxInt32: "int32", onnxInt64: "int64",
	onnxString: "string", onnxBool: "bool", onnxFloat16: "float16", onnxDouble: "double",
	onnxUint32: "uint32", onnxUint64: "uint64", onnxComplex64: "complex64",
	onnxComplex128: "complex128", onnxBfloat16: "bfloat16",
	onnxFloat8E4M3FN: "float8e4m3fn", onnxFloat8E4M3FNUZ: "float8e4m3fnuz",
	onnxFloat8E5M2: "float8e5m2", onnxFloat8E5M2FNUZ: "float8e5m2fnuz",
	onnxUint4: "uint4", onnxInt4: "int4", onnxFloat4E2M1: "float4e2m1",
	onnxFloat8E8M0: "float8e8m0",
}

func onnxTypeName(t uint64) string {
	if t < uint64(len(onnxTypeNames)) {
		return onnxTypeNames[t]
	}
	return fmt.Sprintf("type%d", t)
}

// onnxToDType maps an ONNX element type to the DType that holds it, or
// DTypeInvalid.
func onnxToDType(t uint64) DType {
	switch t {
	case onnxFloat:
		return Float
	case onnxDouble:
		return Double
	case onnxInt8:
		return Int8
	case onnxInt16:
		return Int16
	case onnxInt32:
		return Int32
	case onnxInt64:
		return Int64
	case onnxUint8:
		return Uint8
	case onnxUint16:
		return Uint16
	case onnxBool:
		return Bool
	case onnxString:
		return String
	case onnxUint32:
		return Uint32
	case onnxUint64:
		return Uint64
	}
	return DTypeInvalid
}

// dtypeToONNX is the inverse of onnxToDType; 0 for DTypeInvalid.
func dtypeToONNX(d DType) uint64 {
	switch d {
	case Float:
		return onnxFloat
	case Double:
		return onnxDouble
	case Int8:
		return onnxInt8
	case Int16:
		return onnxInt16
	case Int32:
		return onnxInt32
	case Int64:
		return onnxInt64
	case Uint8:
		return onnxUint8
	case Uint16:
		return onnxUint16
	case Bool:
		return onnxBool
	case String:
		return onnxString
	case Uint32:
		return onnxUint32
	case Uint64:
		return onnxUint64
	}
	return onnxUndefined
}

// Field numbers readGraphIO needs.
const (
	fModelGraph        = 7  // ModelProto.graph
	fGraphInitializer  = 5  // GraphProto.initializer
	fGraphSparseInit   = 15 // GraphProto.sparse_initializer
	fGraphInput        = 11 // GraphProto.input
	fGraphOutput       = 12 // GraphProto.output
	fTensorName        = 8  // TensorProto.name
	fSparseValues      = 1  // SparseTensorProto.values
	fValueInfoName     = 1  // ValueInfoProto.name
	fValueInfoType     = 2  // ValueInfoProto.type
	fTypeTensor        = 1  // TypeProto.tensor_type
	fTypeSequence      = 4  // TypeProto.sequence_type
	fTypeMap           = 5  // TypeProto.map_type
	fTypeSparseTensor  = 8  // TypeProto.sparse_tensor_type
	fTypeOptional      = 9  // TypeProto.optional_type
	fTensorTypeElem    = 1  // TypeProto.Tensor.elem_type (also SparseTensor)
	fTensorTypeShape   = 2  // TypeProto.Tensor.shape
	fShapeDim          = 1  // TensorShapeProto.dim
	fDimValue          = 1  // TensorShapeProto.Dimension.dim_value
	fSeqElem           = 1  // TypeProto.Sequence.elem_type
	fMapKey            = 1  // TypeProto.Map.key_type
	fMapValue          = 2  // TypeProto.Map.value_type
	fOptionalElem      = 1  // TypeProto.Optional.elem_type
	maxTypeProtoDepth  = 32 // nested seq/map/optional types
	maxIOInfoShapeDims = 1 << 16
)

// readGraphIO lists the main graph's inputs (graph inputs that are not
// initializers, in graph order, as ONNX Runtime reports them) and outputs.
// A repeated occurrence of ModelProto.graph is merged as protobuf does:
// repeated fields concatenate.
func readGraphIO(model []byte) (inputs, outputs []IOInfo, err error) {
	var ins, outs [][]byte
	var inits map[string]bool
	addInit := func(name []byte) {
		if inits == nil {
			inits = make(map[string]bool)
		}
		inits[string(name)] = true
	}
	m := newFields(model, 0)
	for m.next() {
		if m.num != fModelGraph || m.wire != wireBytes {
			continue
		}
		g := newFields(m.data, m.dpos)
		for g.next() {
			if g.wire != wireBytes {
				continue
			}
			switch g.num {
			case fGraphInput:
				ins = append(ins, g.data)
			case fGraphOutput:
				outs = append(outs, g.data)
			case fGraphInitializer:
				name, err := tensorName(g.data, g.dpos)
				if err != nil {
					return nil, nil, err
				}
				addInit(name)
			case fGraphSparseInit:
				s := newFields(g.data, g.dpos)
				for s.next() {
					if s.num == fSparseValues && s.wire == wireBytes {
						name, err := tensorName(s.data, s.dpos)
						if err != nil {
							return nil, nil, err
						}
						addInit(name)
					}
				}
				if s.err != nil {
					return nil, nil, s.err
				}
			}
		}
		if g.err != nil {
			return nil, nil, g.err
		}
	}
	if m.err != nil {
		return nil, nil, m.err
	}
	for _, b := range ins {
		info, err := parseValueInfo(b)
		if err != nil {
			return nil, nil, err
		}
		if !inits[info.Name] {
			inputs = append(inputs, info)
		}
	}
	for _, b := range outs {
		info, err := parseValueInfo(b)
		if err != nil {
			return nil, nil, err
		}
		outputs = append(outputs, info)
	}
	return inputs, outputs, nil
}

func tensorName(b []byte, base int) ([]byte, error) {
	var name []byte
	t := newFields(b, base)
	for t.next() {
		if t.num == fTensorName && t.wire == wireBytes {
			name = t.data
		}
	}
	return name, t.err
}

// parseValueInfo decodes a ValueInfoProto. Offsets in its errors are
// relative to the ValueInfoProto (they only occur for data CheckModelBlob
// would have refused).
func parseValueInfo(b []byte) (IOInfo, error) {
	var info IOInfo
	var typ []byte
	f := newFields(b, 0)
	for f.next() {
		if f.wire != wireBytes {
			continue
		}
		switch f.num {
		case fValueInfoName:
			info.Name = string(f.data)
		case fValueInfoType:
			typ = f.data
		}
	}
	if f.err != nil {
		return IOInfo{}, f.err
	}
	var sb strings.Builder
	elem, shape, isTensor, err := parseType(typ, &sb, 0)
	if err != nil {
		return IOInfo{}, err
	}
	info.ElemType = sb.String()
	if isTensor {
		info.DType = onnxToDType(elem)
		info.Shape = shape
	}
	return info, nil
}

// parseType writes the ONNX Runtime spelling of a TypeProto into sb
// ("tensor(float)", "seq(tensor(int64))", "map(string,tensor(float))",
// "optional(...)", "sparse_tensor(float)"). For a dense tensor it also
// returns the element type and shape (nil when the rank is unknown, -1 for
// a dimension without a value).
func parseType(b []byte, sb *strings.Builder, depth int) (elem uint64, shape []int64, isTensor bool, err error) {
	if depth > maxTypeProtoDepth {
		return 0, nil, false, fmt.Errorf("%w: type nested more than %d levels deep", ErrModelTooDeep, maxTypeProtoDepth)
	}
	var which uint64
	var body []byte
	f := newFields(b, 0)
	for f.next() {
		if f.wire == wireBytes {
			switch f.num {
			case fTypeTensor, fTypeSequence, fTypeMap, fTypeSparseTensor, fTypeOptional:
				which, body = f.num, f.data // a oneof: the last one wins
			}
		}
	}
	if f.err != nil {
		return 0, nil, false, f.err
	}
	switch which {
	case fTypeTensor, fTypeSparseTensor:
		elem, shape, err = parseTensorType(body)
		if err != nil {
			return 0, nil, false, err
		}
		if which == fTypeTensor {
			sb.WriteString("tensor(")
		} else {
			sb.WriteString("sparse_tensor(")
		}
		sb.WriteString(onnxTypeName(elem))
		sb.WriteByte(')')
		return elem, shape, which == fTypeTensor, nil
	case fTypeSequence, fTypeOptional:
		var inner []byte
		f := newFields(body, 0)
		for f.next() {
			if f.num == fSeqElem && f.wire == wireBytes { // fOptionalElem is also 1
				inner = f.data
			}
		}
		if f.err != nil {
			return 0, nil, false, f.err
		}
		if which == fTypeSequence {
			sb.WriteString("seq(")
		} else {
			sb.WriteString("optional(")
		}
		if _, _, _, err := parseType(inner, sb, depth+1); err != nil {
			return 0, nil, false, err
		}
		sb.WriteByte(')')
	case fTypeMap:
		var key uint64
		var value []byte
		f := newFields(body, 0)
		for f.next() {
			switch {
			case f.num == fMapKey && f.wire == wireVarint:
				key = f.val
			case f.num == fMapValue && f.wire == wireBytes:
				value = f.data
			}
		}
		if f.err != nil {
			return 0, nil, false, f.err
		}
		sb.WriteString("map(")
		sb.WriteString(onnxTypeName(key))
		sb.WriteByte(',')
		if _, _, _, err := parseType(value, sb, depth+1); err != nil {
			return 0, nil, false, err
		}
		sb.WriteByte(')')
	}
	return 0, nil, false, nil
}

func parseTensorType(b []byte) (elem uint64, shape []int64, err error) {
	f := newFields(b, 0)
	for f.next() {
		switch {
		case f.num == fTensorTypeElem && f.wire == wireVarint:
			elem = f.val
		case f.num == fTensorTypeShape && f.wire == wireBytes:
			if shape == nil {
				shape = []int64{} // a present shape with no dims is a scalar
			}
			s := newFields(f.data, 0)
			for s.next() {
				if s.num != fShapeDim || s.wire != wireBytes {
					continue
				}
				if len(shape) >= maxIOInfoShapeDims {
					return 0, nil, fmt.Errorf("%w (a shape has more than %d dimensions)", ErrModelMalformed, maxIOInfoShapeDims)
				}
				dim := int64(-1)
				d := newFields(s.data, 0)
				for d.next() {
					switch {
					case d.num == fDimValue && d.wire == wireVarint:
						dim = int64(d.val)
					case d.num == 2 && d.wire == wireBytes: // dim_param: symbolic
						dim = -1
					}
				}
				if d.err != nil {
					return 0, nil, d.err
				}
				shape = append(shape, dim)
			}
			if s.err != nil {
				return 0, nil, s.err
			}
		}
	}
	return elem, shape, f.err
}
