package modelstore

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Integer division that cannot trap. ONNX leaves integer Div and Mod by
// zero undefined, and x86 traps (SIGFPE) on a zero divisor and on
// INT_MIN / -1, in ONNX Runtime's kernels and in its constant folding at
// session creation alike. Every integer Div and Mod is rewritten so that
// its divisor is guarded:
//
//	bad  = Equal(b, 0)                              (unsigned types)
//	bad  = Or(Equal(b, 0), And(Equal(a, MIN), Equal(b, -1)))   (signed)
//	b'   = Where(bad, 1, b)
//	Div(a, b') / Mod(a, b')
//
// so x / 0 = x, x mod 0 = 0, MIN / -1 = MIN (the two's complement wrap of
// -MIN) and MIN mod -1 = 0, deterministically, in batched and unbatched
// runs alike; on every other input the results are ONNX Runtime's own.
// Int32 and int64 are guarded in their own type; the other integer types
// are widened to int64 for the test (Equal and Where have no kernels for
// them) and the guarded divisor cast back. Floating-point division is left
// alone (IEEE gives inf or NaN).
//
// The rewrite works on the graph protobuf only: nodes are added before
// each guarded division and its divisor input renamed; tensors are copied
// as they are. For a model whose large weights are shared (extinit.go) it
// runs on the small graph that references them in place, so a huge model
// is not copied. AI.MODELGET still returns the bytes the client stored.

// divGuard is one division to guard: the node and its element type.
type divGuard struct {
	elem uint64
	n    *gNode
}

// GuardPrefix starts the names of every node and value the rewrite adds:
// an engine that refuses a node names the division rather than its guard.
const GuardPrefix = "__enclaveai_divguard_"

// guardDivision decides whether n (a Div or Mod) needs a guard.
func (a *analysis) guardDivision(n *gNode, sc *scope) error {
	elem := uint64(0)
	for i := 0; i < 2 && elem == 0; i++ {
		if v := sc.lookup(n.input(i)); v != nil {
			elem = v.elem
		}
	}
	switch elem {
	case onnxFloat, onnxDouble, onnxFloat16, onnxBfloat16:
		return nil
	case onnxInt8, onnxInt16, onnxInt32, onnxInt64, onnxUint8, onnxUint16, onnxUint32, onnxUint64:
	case 0:
		if n.fn != nil {
			return unsafeNode(n, "its element type cannot be known in a model-local function, so an integer division there cannot be guarded against a zero divisor")
		}
		return unsafeNode(n, "the element type of its inputs cannot be inferred, so an integer division by zero cannot be ruled out (declare the inputs' types in value_info)")
	default:
		return nil // ONNX Runtime has no such kernel: it refuses the model itself
	}
	if n.fn != nil {
		return unsafeNode(n, "integer division in a model-local function cannot be guarded against a zero divisor")
	}
	if len(n.inputs) < 2 || n.inputs[0] == "" || n.inputs[1] == "" {
		return nil // ONNX Runtime refuses the node
	}
	if sc.opset != 0 && sc.opset < 9 {
		return unsafeNode(n, "integer division needs opset 9 or later to be guarded against a zero divisor")
	}
	if v := sc.lookup(n.inputs[1]); v != nil && v.known && safeDivisors(v.ints, elem) {
		return nil // a constant divisor with no zero and no -1: nothing can trap
	}
	a.guards[n.off] = &divGuard{elem: elem, n: n}
	return nil
}

// safeDivisors reports whether constant divisors can never trap.
func safeDivisors(vs []int64, elem uint64) bool {
	for _, v := range vs {
		if v == 0 || (v == -1 && signedType(elem)) {
			return false
		}
	}
	return len(vs) > 0
}

func signedType(elem uint64) bool {
	switch elem {
	case onnxInt8, onnxInt16, onnxInt32, onnxInt64:
		return true
	}
	return false
}

// minOf is the smallest value of a signed ONNX integer type.
func minOf(elem uint64) int64 {
	switch elem {
	case onnxInt8:
		return math.MinInt8
	case onnxInt16:
		return math.MinInt16
	case onnxInt32:
		return math.MinInt32
	}
	return math.MinInt64
}

// guard is what a rewrite writes in place of one node of a graph: nodes
// before it, then the node with an input renamed. k numbers the guards of
// one rewrite from 1.
type guard interface {
	appendNodes(out []byte, k int) []byte
}

// rewriteGuards copies model, writing each guard (by the offset of the
// node it replaces) in place of its node.
func rewriteGuards(model []byte, guards map[int]guard) ([]byte, error) {
	w := &guardWriter{guards: guards}
	out, _, err := w.message(model, 0, msgModel)
	if err != nil {
		return nil, err
	}
	if w.done != len(guards) {
		return nil, fmt.Errorf("%w (rewrote %d of %d guarded nodes)", ErrModelMalformed, w.done, len(guards))
	}
	return out, nil
}

type guardWriter struct {
	guards map[int]guard
	done   int
}

// message copies one message of the given kind, rewriting what it holds;
// changed is false (and out nil) when nothing in it changed.
func (w *guardWriter) message(b []byte, base int, kind msgKind) (out []byte, changed bool, err error) {
	f := newFields(b, base)
	for start := 0; f.next(); start = f.pos {
		raw := b[start:f.pos]
		if f.wire != wireBytes {
			if changed {
				out = append(out, raw...)
			}
			continue
		}
		child := childKind(kind, f.num)
		if kind == msgGraph && f.num == fGraphNode {
			if g := w.guards[f.dpos]; g != nil {
				if !changed {
					out, changed = append(out, b[:start]...), true
				}
				w.done++
				out = g.appendNodes(out, w.done)
				continue
			}
		}
		if child != msgGraph && child != msgNode && child != msgAttribute && child != msgFunction {
			if changed {
				out = append(out, raw...)
			}
			continue
		}
		sub, subChanged, err := w.message(f.data, f.dpos, child)
		if err != nil {
			return nil, false, err
		}
		if !subChanged {
			if changed {
				out = append(out, raw...)
			}
			continue
		}
		if !changed {
			out, changed = append(out, b[:start]...), true
		}
		out = appendBytesField(out, f.num, sub)
	}
	if f.err != nil {
		return nil, false, f.err
	}
	return out, changed, nil
}

// appendNodes writes the guard's nodes and the division with its divisor
// renamed, as NodeProto fields of a graph.
func (g *divGuard) appendNodes(out []byte, k int) []byte {
	n := g.n
	p := fmt.Sprintf("%s%d_", GuardPrefix, k)
	a, b := n.inputs[0], n.inputs[1]
	wide := g.elem != onnxInt32 && g.elem != onnxInt64
	t := g.elem
	if wide {
		t = onnxInt64
		out = appendNode(out, "Cast", []string{b}, p+"b", intAttr("to", onnxInt64))
		b = p + "b"
		if signedType(g.elem) {
			out = appendNode(out, "Cast", []string{a}, p+"a", intAttr("to", onnxInt64))
			a = p + "a"
		}
	}
	out = appendConst(out, p+"zero", t, 0)
	out = appendConst(out, p+"one", t, 1)
	out = appendNode(out, "Equal", []string{b, p + "zero"}, p+"bad")
	if signedType(g.elem) {
		out = appendConst(out, p+"min", t, minOf(g.elem))
		out = appendConst(out, p+"minus1", t, -1)
		out = appendNode(out, "Equal", []string{a, p + "min"}, p+"amin")
		out = appendNode(out, "Equal", []string{b, p + "minus1"}, p+"bm1")
		out = appendNode(out, "And", []string{p + "amin", p + "bm1"}, p+"ovf")
		out = appendNode(out, "Or", []string{p + "bad", p + "ovf"}, p+"bad2")
		out = appendNode(out, "Where", []string{p + "bad2", p + "one", b}, p+"safe")
	} else {
		out = appendNode(out, "Where", []string{p + "bad", p + "one", b}, p+"safe")
	}
	safe := p + "safe"
	if wide {
		out = appendNode(out, "Cast", []string{safe}, p+"safe_t", intAttr("to", int64(g.elem)))
		safe = p + "safe_t"
	}
	// The division itself, with input 1 renamed.
	return appendRenamed(out, n, 1, safe)
}

// appendRenamed writes node n as a NodeProto field of a graph with its
// input i named name and every other field kept.
func appendRenamed(out []byte, n *gNode, i int, name string) []byte {
	var node []byte
	inputs := 0
	f := newFields(n.raw, 0)
	for start := 0; f.next(); start = f.pos {
		if f.num == fNodeInput && f.wire == wireBytes {
			inputs++
			if inputs == i+1 {
				node = appendBytesField(node, fNodeInput, []byte(name))
				continue
			}
		}
		node = append(node, n.raw[start:f.pos]...)
	}
	return appendBytesField(out, fGraphNode, node)
}

// appendNode writes a NodeProto field (of a graph) with one output.
func appendNode(out []byte, op string, inputs []string, output string, attrs ...[]byte) []byte {
	var node []byte
	for _, in := range inputs {
		node = appendBytesField(node, fNodeInput, []byte(in))
	}
	node = appendBytesField(node, fNodeOutput, []byte(output))
	node = appendBytesField(node, fNodeName, []byte(output))
	node = appendBytesField(node, fNodeOpType, []byte(op))
	for _, a := range attrs {
		node = appendBytesField(node, fNodeAttr, a)
	}
	return appendBytesField(out, fGraphNode, node)
}

// intAttr is an INT AttributeProto.
func intAttr(name string, v int64) []byte {
	a := appendBytesField(nil, fAttrName, []byte(name))
	a = binary.AppendUvarint(a, fAttrI<<3|wireVarint)
	a = binary.AppendUvarint(a, uint64(v))
	a = binary.AppendUvarint(a, fAttrType<<3|wireVarint)
	return binary.AppendUvarint(a, attrInt)
}

// appendConst writes a Constant node whose value is a scalar of type t
// (int32 or int64).
func appendConst(out []byte, name string, t uint64, v int64) []byte {
	return appendConstInts(out, name, t, nil, v)
}

// appendConstInts writes a Constant node whose value is a tensor of type t
// (int32 or int64) of the given dims (nil: a scalar) holding vs.
func appendConstInts(out []byte, name string, t uint64, dims []int64, vs ...int64) []byte {
	var tensor []byte
	for _, d := range dims {
		tensor = binary.AppendUvarint(tensor, fTensorDims<<3|wireVarint)
		tensor = binary.AppendUvarint(tensor, uint64(d))
	}
	tensor = binary.AppendUvarint(tensor, fTensorDataType<<3|wireVarint)
	tensor = binary.AppendUvarint(tensor, t)
	field := uint64(fTensorInt64Data)
	if t == onnxInt32 {
		field = fTensorInt32Data
	}
	for _, v := range vs {
		tensor = binary.AppendUvarint(tensor, field<<3|wireVarint)
		tensor = binary.AppendUvarint(tensor, uint64(v))
	}
	a := appendBytesField(nil, fAttrName, []byte("value"))
	a = appendBytesField(a, fAttrT, tensor)
	a = binary.AppendUvarint(a, fAttrType<<3|wireVarint)
	a = binary.AppendUvarint(a, attrTensor)
	return appendNode(out, "Constant", nil, name, a)
}
