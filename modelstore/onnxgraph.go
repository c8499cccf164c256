package modelstore

import (
	"encoding/binary"
	"fmt"
	"math"
)

// A decoded view of the parts of an ONNX model the sanitizer (sanitize.go)
// reasons about: opset imports, graphs with their nodes, attributes,
// declared value types, and the values of small constant tensors. Large
// tensor payloads are never copied: only their dims and type are kept.
//
// decodeModel assumes CheckModelBlob has accepted the bytes (nesting depth
// bounded, well-formed protobuf); it still returns errors rather than panic
// on anything else.

// ONNX message field numbers the decoder reads (onnx.proto).
const (
	fModelOpset     = 8  // ModelProto.opset_import
	fModelFunctions = 25 // ModelProto.functions
	fOpsetDomain    = 1  // OperatorSetIdProto.domain
	fOpsetVersion   = 2  // OperatorSetIdProto.version

	fGraphNode      = 1  // GraphProto.node
	fGraphValueInfo = 13 // GraphProto.value_info

	fNodeInput  = 1 // NodeProto.input
	fNodeOutput = 2 // NodeProto.output
	fNodeName   = 3 // NodeProto.name
	fNodeOpType = 4 // NodeProto.op_type
	fNodeAttr   = 5 // NodeProto.attribute
	fNodeDomain = 7 // NodeProto.domain

	fAttrName    = 1  // AttributeProto.name
	fAttrF       = 2  // .f
	fAttrI       = 3  // .i
	fAttrS       = 4  // .s
	fAttrT       = 5  // .t
	fAttrG       = 6  // .g
	fAttrFloats  = 7  // .floats
	fAttrInts    = 8  // .ints
	fAttrStrings = 9  // .strings
	fAttrGraphs  = 11 // .graphs
	fAttrType    = 20 // .type
	fAttrRef     = 21 // .ref_attr_name (in function bodies)

	fFuncInput  = 4  // FunctionProto.input
	fFuncOutput = 5  // FunctionProto.output
	fFuncNode   = 7  // FunctionProto.node
	fFuncOpset  = 9  // FunctionProto.opset_import
	fFuncDomain = 10 // FunctionProto.domain

	fTensorFloatData  = 4
	fTensorInt32Data  = 5
	fTensorInt64Data  = 7
	fTensorDoubleData = 10
	fTensorUint64Data = 11
)

// AttributeProto.AttributeType values.
const (
	attrFloat   = 1
	attrInt     = 2
	attrString  = 3
	attrTensor  = 4
	attrGraph   = 5
	attrFloats  = 6
	attrInts    = 7
	attrStrings = 8
	attrGraphs  = 10
)

// maxConstElems: constant tensors up to this many elements have their
// values decoded (shapes, repeats, divisors, Range bounds).
const maxConstElems = 4096

// gModel is a decoded ModelProto.
type gModel struct {
	opsets    map[string]int64 // domain ("" is ai.onnx) -> version
	graph     *gGraph
	functions []*gFunction
}

// gGraph is a decoded GraphProto (or a FunctionProto's body).
type gGraph struct {
	nodes []*gNode
	// decl holds what the graph declares: inputs, outputs, value_info and
	// initializers (which also give constant values).
	decl    map[string]*gValue
	inputs  []string // declared inputs, in order
	outputs []string // declared outputs, in order
	off     int      // offset of the graph message in the model
}

// gValue is what is known statically about one value.
type gValue struct {
	elem  uint64  // ONNX element type, 0 when unknown
	shape []int64 // nil: rank unknown; -1: a dimension without a value
	// known is true when the values are known (a small constant): ints for
	// integer and bool types, floats for floating types.
	known  bool
	ints   []int64
	floats []float64
}

// gNode is a decoded NodeProto.
type gNode struct {
	name, op, domain string
	inputs, outputs  []string
	attrs            []*gAttr
	off              int        // offset of the node message in the model
	raw              []byte     // the node message
	fn               *gFunction // the function whose body holds it, or nil
}

// gAttr is a decoded AttributeProto.
type gAttr struct {
	name   string
	typ    uint64
	ref    bool // ref_attr_name: the value comes from a function's caller
	i      int64
	f      float64
	s      []byte
	ints   []int64
	floats []float64
	nStrs  int
	t      *gValue
	graphs []*gGraph
}

// gFunction is a decoded model-local FunctionProto.
type gFunction struct {
	domain, name string
	opsets       map[string]int64
	body         *gGraph
}

func (n *gNode) attr(name string) *gAttr {
	for _, a := range n.attrs {
		if a.name == name {
			return a
		}
	}
	return nil
}

// input returns the i-th input name or "" when absent.
func (n *gNode) input(i int) string {
	if i < len(n.inputs) {
		return n.inputs[i]
	}
	return ""
}

func decodeModel(b []byte) (*gModel, error) {
	m := &gModel{opsets: map[string]int64{}}
	f := newFields(b, 0)
	for f.next() {
		if f.wire != wireBytes {
			continue
		}
		switch f.num {
		case fModelOpset:
			d, v, err := decodeOpset(f.data, f.dpos)
			if err != nil {
				return nil, err
			}
			m.opsets[d] = v
		case fModelGraph:
			g, err := decodeGraph(f.data, f.dpos)
			if err != nil {
				return nil, err
			}
			if m.graph == nil {
				m.graph = g
			} else { // repeated: protobuf merges
				m.graph.merge(g)
			}
		case fModelFunctions:
			fn, err := decodeFunction(f.data, f.dpos)
			if err != nil {
				return nil, err
			}
			m.functions = append(m.functions, fn)
		}
	}
	if f.err != nil {
		return nil, f.err
	}
	if m.graph == nil {
		m.graph = &gGraph{decl: map[string]*gValue{}}
	}
	return m, nil
}

func (g *gGraph) merge(o *gGraph) {
	g.nodes = append(g.nodes, o.nodes...)
	g.inputs = append(g.inputs, o.inputs...)
	g.outputs = append(g.outputs, o.outputs...)
	for k, v := range o.decl {
		g.decl[k] = v
	}
}

func decodeOpset(b []byte, base int) (string, int64, error) {
	var domain string
	var version int64
	f := newFields(b, base)
	for f.next() {
		switch {
		case f.num == fOpsetDomain && f.wire == wireBytes:
			domain = string(f.data)
		case f.num == fOpsetVersion && f.wire == wireVarint:
			version = int64(f.val)
		}
	}
	if domain == "ai.onnx" {
		domain = ""
	}
	return domain, version, f.err
}

func decodeGraph(b []byte, base int) (*gGraph, error) {
	g := &gGraph{decl: map[string]*gValue{}, off: base}
	f := newFields(b, base)
	for f.next() {
		if f.wire != wireBytes {
			continue
		}
		switch f.num {
		case fGraphNode:
			n, err := decodeNode(f.data, f.dpos)
			if err != nil {
				return nil, err
			}
			g.nodes = append(g.nodes, n)
		case fGraphInitializer:
			name, v, err := decodeTensor(f.data, f.dpos)
			if err != nil {
				return nil, err
			}
			g.decl[name] = v
		case fGraphInput, fGraphOutput, fGraphValueInfo:
			name, v, err := decodeValueInfo(f.data)
			if err != nil {
				return nil, err
			}
			if old := g.decl[name]; old == nil || !old.known {
				g.decl[name] = v // an initializer's values win over a declaration
			}
			if f.num == fGraphInput {
				g.inputs = append(g.inputs, name)
			} else if f.num == fGraphOutput {
				g.outputs = append(g.outputs, name)
			}
		}
	}
	return g, f.err
}

func decodeValueInfo(b []byte) (string, *gValue, error) {
	info, err := parseValueInfo(b)
	if err != nil {
		return "", nil, err
	}
	v := &gValue{shape: info.Shape}
	if info.IsTensor() {
		var sb []byte
		f := newFields(b, 0)
		for f.next() {
			if f.num == fValueInfoType && f.wire == wireBytes {
				sb = f.data
			}
		}
		tf := newFields(sb, 0)
		for tf.next() {
			if tf.num == fTypeTensor && tf.wire == wireBytes {
				v.elem, _, _ = parseTensorType(tf.data)
			}
		}
	}
	return info.Name, v, nil
}

func decodeNode(b []byte, base int) (*gNode, error) {
	n := &gNode{off: base, raw: b}
	f := newFields(b, base)
	for f.next() {
		if f.wire != wireBytes {
			continue
		}
		switch f.num {
		case fNodeInput:
			n.inputs = append(n.inputs, string(f.data))
		case fNodeOutput:
			n.outputs = append(n.outputs, string(f.data))
		case fNodeName:
			n.name = string(f.data)
		case fNodeOpType:
			n.op = string(f.data)
		case fNodeDomain:
			n.domain = string(f.data)
		case fNodeAttr:
			a, err := decodeAttr(f.data, f.dpos)
			if err != nil {
				return nil, err
			}
			n.attrs = append(n.attrs, a)
		}
	}
	if n.domain == "ai.onnx" {
		n.domain = ""
	}
	return n, f.err
}

func decodeAttr(b []byte, base int) (*gAttr, error) {
	a := &gAttr{}
	f := newFields(b, base)
	for f.next() {
		switch f.num {
		case fAttrName:
			if f.wire == wireBytes {
				a.name = string(f.data)
			}
		case fAttrType:
			if f.wire == wireVarint {
				a.typ = f.val
			}
		case fAttrRef:
			a.ref = true
		case fAttrI:
			if f.wire == wireVarint {
				a.i = int64(f.val)
			}
		case fAttrF:
			if f.wire == wireFixed32 {
				a.f = float64(math.Float32frombits(uint32(f.val)))
			}
		case fAttrS:
			if f.wire == wireBytes {
				a.s = f.data
			}
		case fAttrInts:
			switch f.wire {
			case wireVarint:
				a.ints = append(a.ints, int64(f.val))
			case wireBytes:
				vs, err := packedVarints(f.data, f.dpos)
				if err != nil {
					return nil, err
				}
				a.ints = append(a.ints, vs...)
			}
		case fAttrFloats:
			switch f.wire {
			case wireFixed32:
				a.floats = append(a.floats, float64(math.Float32frombits(uint32(f.val))))
			case wireBytes:
				for i := 0; i+4 <= len(f.data); i += 4 {
					a.floats = append(a.floats, float64(math.Float32frombits(binary.LittleEndian.Uint32(f.data[i:]))))
				}
			}
		case fAttrStrings:
			a.nStrs++
		case fAttrT:
			if f.wire == wireBytes {
				_, v, err := decodeTensor(f.data, f.dpos)
				if err != nil {
					return nil, err
				}
				a.t = v
			}
		case fAttrG, fAttrGraphs:
			if f.wire == wireBytes {
				g, err := decodeGraph(f.data, f.dpos)
				if err != nil {
					return nil, err
				}
				a.graphs = append(a.graphs, g)
			}
		}
	}
	return a, f.err
}

func packedVarints(b []byte, base int) ([]int64, error) {
	var out []int64
	for i := 0; i < len(b); {
		v, n := readVarint(b, i)
		if n == 0 {
			return nil, fmt.Errorf("%w (truncated packed varints at byte %d)", ErrModelMalformed, base+i)
		}
		out = append(out, int64(v))
		i += n
	}
	return out, nil
}

func decodeFunction(b []byte, base int) (*gFunction, error) {
	fn := &gFunction{opsets: map[string]int64{}, body: &gGraph{decl: map[string]*gValue{}, off: base}}
	f := newFields(b, base)
	for f.next() {
		if f.wire != wireBytes {
			continue
		}
		switch f.num {
		case 1: // name
			fn.name = string(f.data)
		case fFuncDomain:
			fn.domain = string(f.data)
		case fFuncInput:
			fn.body.inputs = append(fn.body.inputs, string(f.data))
		case fFuncOutput:
			fn.body.outputs = append(fn.body.outputs, string(f.data))
		case fFuncOpset:
			d, v, err := decodeOpset(f.data, f.dpos)
			if err != nil {
				return nil, err
			}
			fn.opsets[d] = v
		case fFuncNode:
			n, err := decodeNode(f.data, f.dpos)
			if err != nil {
				return nil, err
			}
			n.fn = fn
			fn.body.nodes = append(fn.body.nodes, n)
		}
	}
	return fn, f.err
}

// decodeTensor reads a TensorProto's name, type and dims, and its values
// when it has at most maxConstElems elements stored inline.
func decodeTensor(b []byte, base int) (string, *gValue, error) {
	var name string
	v := &gValue{shape: []int64{}}
	var raw []byte
	var hasRaw bool
	var i64, i32, u64 []int64
	var f32, f64 []float64
	f := newFields(b, base)
	for f.next() {
		switch f.num {
		case fTensorName:
			if f.wire == wireBytes {
				name = string(f.data)
			}
		case fTensorDataType:
			if f.wire == wireVarint {
				v.elem = f.val
			}
		case fTensorDims:
			switch f.wire {
			case wireVarint:
				v.shape = append(v.shape, int64(f.val))
			case wireBytes:
				ds, err := packedVarints(f.data, f.dpos)
				if err != nil {
					return "", nil, err
				}
				v.shape = append(v.shape, ds...)
			}
		case fTensorRawData:
			if f.wire == wireBytes {
				raw, hasRaw = f.data, true
			}
		case fTensorInt64Data, fTensorInt32Data, fTensorUint64Data:
			var vs []int64
			switch f.wire {
			case wireVarint:
				vs = []int64{int64(f.val)}
			case wireBytes:
				if len(f.data) > 10*maxConstElems {
					continue
				}
				var err error
				if vs, err = packedVarints(f.data, f.dpos); err != nil {
					return "", nil, err
				}
			}
			switch f.num {
			case fTensorInt64Data:
				i64 = append(i64, vs...)
			case fTensorInt32Data:
				i32 = append(i32, vs...)
			default:
				u64 = append(u64, vs...)
			}
		case fTensorFloatData:
			switch f.wire {
			case wireFixed32:
				f32 = append(f32, float64(math.Float32frombits(uint32(f.val))))
			case wireBytes:
				for i := 0; i+4 <= len(f.data) && len(f32) <= maxConstElems; i += 4 {
					f32 = append(f32, float64(math.Float32frombits(binary.LittleEndian.Uint32(f.data[i:]))))
				}
			}
		case fTensorDoubleData:
			switch f.wire {
			case wireFixed64:
				f64 = append(f64, math.Float64frombits(f.val))
			case wireBytes:
				for i := 0; i+8 <= len(f.data) && len(f64) <= maxConstElems; i += 8 {
					f64 = append(f64, math.Float64frombits(binary.LittleEndian.Uint64(f.data[i:])))
				}
			}
		}
	}
	if f.err != nil {
		return "", nil, f.err
	}
	n, ok := elemCount(v.shape)
	if !ok || n > maxConstElems {
		return name, v, nil
	}
	if hasRaw {
		v.known = decodeRaw(v, raw, int(n))
		return name, v, nil
	}
	switch v.elem {
	case onnxInt64:
		v.ints, v.known = i64, len(i64) == int(n)
	case onnxUint64, onnxUint32:
		v.ints, v.known = u64, len(u64) == int(n)
	case onnxInt32, onnxInt16, onnxInt8, onnxUint16, onnxUint8, onnxBool:
		for k, x := range i32 {
			i32[k] = int64(int32(x)) // int32_data holds sign-extended varints
		}
		v.ints, v.known = i32, len(i32) == int(n)
	case onnxFloat:
		v.floats, v.known = f32, len(f32) == int(n)
	case onnxDouble:
		v.floats, v.known = f64, len(f64) == int(n)
	}
	return name, v, nil
}

// decodeRaw decodes n little-endian elements of v's type from raw.
func decodeRaw(v *gValue, raw []byte, n int) bool {
	size, ok := shareableType(v.elem)
	if !ok || v.elem == onnxFloat16 || v.elem == onnxBfloat16 || len(raw) != n*size {
		return false
	}
	for k := 0; k < n; k++ {
		e := raw[k*size:]
		switch v.elem {
		case onnxInt8:
			v.ints = append(v.ints, int64(int8(e[0])))
		case onnxUint8, onnxBool:
			v.ints = append(v.ints, int64(e[0]))
		case onnxInt16:
			v.ints = append(v.ints, int64(int16(binary.LittleEndian.Uint16(e))))
		case onnxUint16:
			v.ints = append(v.ints, int64(binary.LittleEndian.Uint16(e)))
		case onnxInt32:
			v.ints = append(v.ints, int64(int32(binary.LittleEndian.Uint32(e))))
		case onnxUint32:
			v.ints = append(v.ints, int64(binary.LittleEndian.Uint32(e)))
		case onnxInt64, onnxUint64:
			v.ints = append(v.ints, int64(binary.LittleEndian.Uint64(e)))
		case onnxFloat:
			v.floats = append(v.floats, float64(math.Float32frombits(binary.LittleEndian.Uint32(e))))
		case onnxDouble:
			v.floats = append(v.floats, math.Float64frombits(binary.LittleEndian.Uint64(e)))
		}
	}
	return true
}

// elemCount is the product of dims; ok is false for a negative dim or
// overflow past 2^62.
func elemCount(dims []int64) (int64, bool) {
	n := int64(1)
	for _, d := range dims {
		if d < 0 {
			return 0, false
		}
		if d != 0 && n > (1<<62)/d {
			return 0, false
		}
		n *= d
	}
	return n, true
}
