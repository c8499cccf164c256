package modelstore

// Element-type inference, enough for the sanitizer to tell an integer Div
// from a floating one and to know small constants: each node's outputs get
// the type ONNX's type constraints give them. Unknown operators (other
// domains) leave their outputs unknown.

// inferNode records in sc what it can infer of n's outputs. Declarations
// (value_info) win unless inference knows the values too.
func inferNode(n *gNode, sc *scope) {
	for i, out := range n.outputs {
		if out == "" {
			continue
		}
		v := inferOutput(n, i, sc)
		if v == nil {
			continue
		}
		if old := sc.vals[out]; old == nil || old.elem == 0 || (v.known && !old.known && v.elem == old.elem) {
			if old != nil && v.shape == nil {
				v.shape = old.shape
			}
			sc.vals[out] = v
		}
	}
}

func inferOutput(n *gNode, i int, sc *scope) *gValue {
	in := func(k int) *gValue {
		if name := n.input(k); name != "" {
			return sc.lookup(name)
		}
		return nil
	}
	elemOf := func(k int) *gValue {
		if v := in(k); v != nil && v.elem != 0 {
			return &gValue{elem: v.elem}
		}
		return nil
	}
	typ := func(t uint64) *gValue { return &gValue{elem: t} }
	attrType := func(name string, def uint64) *gValue {
		if a := n.attr(name); a != nil && !a.ref {
			return typ(uint64(a.i))
		}
		if def == 0 {
			return nil
		}
		return typ(def)
	}
	if n.domain != "" {
		return nil
	}
	switch n.op {
	case "Constant":
		for _, a := range n.attrs {
			switch a.name {
			case "value":
				return a.t
			case "value_int":
				return &gValue{elem: onnxInt64, shape: []int64{}, known: true, ints: []int64{a.i}}
			case "value_ints":
				return &gValue{elem: onnxInt64, shape: []int64{int64(len(a.ints))}, known: true, ints: a.ints}
			case "value_float":
				return &gValue{elem: onnxFloat, shape: []int64{}, known: true, floats: []float64{a.f}}
			case "value_floats":
				return &gValue{elem: onnxFloat, shape: []int64{int64(len(a.floats))}, known: true, floats: a.floats}
			case "value_string", "value_strings":
				return typ(onnxString)
			}
		}
		return nil
	case "Cast":
		return attrType("to", 0)
	case "CastLike":
		return elemOf(1)
	case "Shape", "Size", "NonZero", "ArgMax", "ArgMin", "NonMaxSuppression":
		return typ(onnxInt64)
	case "Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "Not", "And", "Or", "Xor", "IsNaN", "IsInf":
		return typ(onnxBool)
	case "ConstantOfShape":
		if a := n.attr("value"); a != nil && a.t != nil {
			return typ(a.t.elem)
		}
		return typ(onnxFloat)
	case "Where":
		return elemOf(1)
	case "TopK", "Unique", "MaxPool":
		if i == 0 {
			return elemOf(0)
		}
		return typ(onnxInt64)
	case "EyeLike", "RandomNormalLike", "RandomUniformLike", "Bernoulli":
		if v := attrType("dtype", 0); v != nil {
			return v
		}
		return elemOf(0)
	case "RandomNormal", "RandomUniform":
		return attrType("dtype", onnxFloat)
	case "Multinomial":
		return attrType("dtype", onnxInt32)
	case "QuantizeLinear":
		if v := elemOf(2); v != nil {
			return v
		}
		return typ(onnxUint8)
	case "DequantizeLinear":
		return elemOf(1)
	case "DynamicQuantizeLinear":
		if i == 1 {
			return typ(onnxFloat)
		}
		return typ(onnxUint8)
	case "MatMulInteger", "ConvInteger":
		return typ(onnxInt32)
	case "QLinearMatMul", "QLinearConv":
		return elemOf(7)
	case "OneHot":
		return elemOf(2)
	case "StringNormalizer", "RegexFullMatch":
		return typ(onnxString)
	case "Loop", "Scan", "If":
		attr := "body"
		skip := 0
		if n.op == "Loop" {
			skip = 1 // body output 0 is the condition
		}
		if n.op == "If" {
			attr = "then_branch"
		}
		a := n.attr(attr)
		if a == nil || len(a.graphs) == 0 {
			return nil
		}
		g := a.graphs[0]
		if k := i + skip; k < len(g.outputs) {
			if v := g.decl[g.outputs[k]]; v != nil && v.elem != 0 {
				return typ(v.elem)
			}
		}
		return nil
	case "SequenceAt", "SequenceConstruct", "SequenceEmpty", "SequenceInsert", "SequenceErase",
		"SequenceLength", "SplitToSequence", "ConcatFromSequence", "Optional", "OptionalGetElement",
		"OptionalHasElement":
		if n.op == "SequenceLength" {
			return typ(onnxInt64)
		}
		if n.op == "OptionalHasElement" {
			return typ(onnxBool)
		}
		return nil
	}
	// Everything else in ai.onnx has outputs of its first input's type
	// (Add, Gather, Reshape, Slice, Concat, Range, Div, MatMul, ...).
	for k := range n.inputs {
		if v := elemOf(k); v != nil {
			return v
		}
	}
	return nil
}
