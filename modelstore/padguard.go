package modelstore

import "fmt"

// Pad whose output ONNX Runtime does not write. ONNX Runtime 1.24.1's CPU
// Pad fills a reflect pad by reading backwards from the edge, and a wrap
// pad before an axis by reading forwards from its end, without checking
// that the pad fits in what it reads: a reflect pad at least as large as
// what is left of its axis (its size after negative pads crop it), or a
// wrap pad before an axis larger than that, reads elements of the output
// it has not written yet, or memory before it. The output then holds the
// bytes that were there: freed tensors of other models of the engine
// worker (another tenant's, in the shared group), or the worker dies of a
// SIGSEGV. A probe of every pad from -2 to the axis' size + 2 on axes of 1
// to 4 elements, inner, outer and middle, found exactly these cases; edge
// pads, wrap pads after an axis, and reflect pads below what is left
// always gave numpy's result. Wrap pads after an axis larger than what is
// left of it are refused all the same (PyTorch's circular padding has the
// same limit). ONNX Runtime refuses an axis that negative pads crop whole,
// and a reflect pad of an axis of 1 element, itself.
//
// Where the pads and the input's dimensions they widen are known when the
// model is stored (constant pads, declared shapes) such a Pad is refused
// then. Otherwise the pads and the shape are checked at each run, in the
// graph, before the Pad: its input x is rewritten as
//
//	kept  = dims + Where(P < 0, P, 0)[0] + Where(P < 0, P, 0)[1]
//	bad   = P > 0 and P >= kept            (reflect; wrap: P > kept)
//	x'    = Reshape(x, Where(ReduceSum(Cast(bad)) > 0, [-2], Shape(x)))
//	Pad(x', pads, ...)
//
// with P the pads as [2, axes] (begins then ends) and dims Shape(x), or its
// entries at Pad's axes input (opset 18). When a pad is too large the
// Reshape to -2 fails the run, before the Pad, and Session.Run answers the
// refusal; otherwise x' is x. A model-local function's Pad (its dims are
// the caller's) and one below opset 9 (no Where) cannot be guarded and are
// refused unless known to fit. A mode that is not a constant of the node
// counts as reflect.

// padGuardPrefix starts the names of every node and value the Pad guard
// adds.
const padGuardPrefix = "__enclaveai_padguard_"

// padGuard is one Pad to guard.
type padGuard struct {
	n    *gNode
	wrap bool    // mode wrap (else reflect)
	pads []int64 // the pads attribute before opset 11, else nil (the input)
	axes string  // Pad's axes input (opset 18), or ""
	err  error   // the refusal a failed check stands for
}

// check names the guard's Reshape, which fails when a pad is too large
// (ONNX Runtime's error names it), and its output, the Pad's new input.
func (g *padGuard) check() string {
	return fmt.Sprintf("%s%d_check", padGuardPrefix, g.n.off)
}

// guardPad refuses a reflect or wrap Pad whose pads are known not to fit,
// and records a guard for one whose pads or dimensions are not known.
func (a *analysis) guardPad(n *gNode, sc *scope) error {
	mode := "reflect" // a mode from a function's caller: the worst
	if m := n.attr("mode"); m == nil {
		return nil // constant
	} else if !m.ref {
		mode = string(m.s)
	}
	if mode != "reflect" && mode != "wrap" {
		return nil // constant and edge read only what they should; ONNX Runtime refuses others
	}
	g := &padGuard{n: n, wrap: mode == "wrap"}
	reach := "reach"
	if g.wrap {
		reach = "pass"
	}
	g.err = unsafeNode(n, "%s pads %s what is left of an axis: a pad must be %s, or ONNX Runtime returns memory it never wrote", mode, reach, padLimit(g.wrap))
	var pads, axes []int64
	known := true
	if sc.opset != 0 && sc.opset < 11 {
		p := n.attr("pads")
		if p == nil {
			return nil // ONNX Runtime refuses it
		}
		g.pads, pads = p.ints, p.ints
		known = !p.ref
	} else if v := sc.lookup(n.input(1)); v != nil && v.known {
		pads = v.ints
	} else {
		known = false
	}
	if sc.opset >= 18 && n.input(3) != "" {
		g.axes = n.input(3)
		if v := sc.lookup(g.axes); v != nil && v.known {
			axes = v.ints
		} else {
			known = false
		}
	}
	var shape []int64
	if v := sc.lookup(n.input(0)); v != nil {
		shape = v.shape
	}
	if known {
		switch why, fits := padFits(pads, axes, g.axes != "", shape, g.wrap); {
		case why != "":
			return unsafeNode(n, "%s, or ONNX Runtime returns memory it never wrote", why)
		case fits:
			return nil
		}
	}
	switch {
	case n.fn != nil:
		return unsafeNode(n, "%s pads in a model-local function cannot be checked against its input's dimensions: a pad must be %s, or ONNX Runtime returns memory it never wrote", mode, padLimit(g.wrap))
	case sc.opset != 0 && sc.opset < 9:
		return unsafeNode(n, "%s pads need opset 9 or later to be checked at run against its input's dimensions: a pad must be %s, or ONNX Runtime returns memory it never wrote", mode, padLimit(g.wrap))
	case n.input(0) == "" || (g.pads == nil && n.input(1) == ""):
		return nil // ONNX Runtime refuses it
	}
	a.pads[n.off] = g
	return nil
}

// padLimit says how large a pad may be.
func padLimit(wrap bool) string {
	if wrap {
		return "at most what is left of its axis after negative pads"
	}
	return "less than what is left of its axis after negative pads"
}

// padFits checks known pads (begins then ends, of the axes given, else of
// every axis) against what is known of the input's shape: why is the
// refusal of a pad that does not fit, fits whether every pad is known to
// fit. A pad of 0 or below fits any axis; pads of a length other than the
// axes' are ONNX Runtime's to refuse. (A positive pad of an axis cropped
// whole, which ONNX Runtime refuses too, is refused here as at run.)
func padFits(pads, axes []int64, hasAxes bool, shape []int64, wrap bool) (why string, fits bool) {
	if shape == nil {
		return "", false
	}
	r := int64(len(shape))
	if !hasAxes {
		axes = make([]int64, r)
		for i := range axes {
			axes[i] = int64(i)
		}
	}
	if len(pads) != 2*len(axes) {
		return "", false
	}
	fits = true
	for i, ax := range axes {
		begin, end := pads[i], pads[i+len(axes)]
		if begin <= 0 && end <= 0 {
			continue
		}
		if ax < 0 {
			ax += r
		}
		if ax < 0 || ax >= r || shape[ax] < 0 {
			fits = false
			continue
		}
		d := shape[ax]
		kept := d + min(begin, 0) + min(end, 0)
		for _, p := range []int64{begin, end} {
			if p > kept || (p == kept && !wrap) {
				mode := "reflect"
				if wrap {
					mode = "wrap"
				}
				return fmt.Sprintf("%s pads %d and %d of axis %d (of %d elements, %d left after negative pads): a pad must be %s",
					mode, begin, end, ax, d, kept, padLimit(wrap)), false
			}
		}
	}
	return "", fits
}

// appendNodes writes the guard's nodes and the Pad with its input renamed.
func (g *padGuard) appendNodes(out []byte, _ int) []byte {
	n := g.n
	p := fmt.Sprintf("%s%d_", padGuardPrefix, n.off)
	x, pads := n.inputs[0], n.input(1)
	if g.pads != nil {
		out = appendConstInts(out, p+"pads", onnxInt64, []int64{int64(len(g.pads))}, g.pads...)
		pads = p + "pads"
	}
	out = appendNode(out, "Shape", []string{x}, p+"shape")
	dims := p + "shape"
	if g.axes != "" {
		out = appendNode(out, "Gather", []string{dims, g.axes}, p+"dims")
		dims = p + "dims"
	}
	out = appendConstInts(out, p+"rows", onnxInt64, []int64{2}, 2, -1)
	out = appendNode(out, "Reshape", []string{pads, p + "rows"}, p+"P")
	out = appendConst(out, p+"zero", onnxInt64, 0)
	out = appendConst(out, p+"one", onnxInt64, 1)
	out = appendNode(out, "Less", []string{p + "P", p + "zero"}, p+"isneg")
	out = appendNode(out, "Where", []string{p + "isneg", p + "P", p + "zero"}, p+"neg")
	out = appendNode(out, "Gather", []string{p + "neg", p + "zero"}, p+"negbegin")
	out = appendNode(out, "Gather", []string{p + "neg", p + "one"}, p+"negend")
	out = appendNode(out, "Add", []string{dims, p + "negbegin"}, p+"kept1")
	out = appendNode(out, "Add", []string{p + "kept1", p + "negend"}, p+"kept")
	out = appendNode(out, "Greater", []string{p + "P", p + "zero"}, p+"widens")
	if g.wrap {
		out = appendNode(out, "Greater", []string{p + "P", p + "kept"}, p+"past")
	} else {
		out = appendNode(out, "Less", []string{p + "P", p + "kept"}, p+"within")
		out = appendNode(out, "Not", []string{p + "within"}, p+"past")
	}
	out = appendNode(out, "And", []string{p + "widens", p + "past"}, p+"bad")
	out = appendNode(out, "Cast", []string{p + "bad"}, p+"badn", intAttr("to", onnxInt64))
	out = appendNode(out, "ReduceSum", []string{p + "badn"}, p+"count", intAttr("keepdims", 0))
	out = appendNode(out, "Greater", []string{p + "count", p + "zero"}, p+"any")
	out = appendConstInts(out, p+"never", onnxInt64, []int64{1}, -2)
	out = appendNode(out, "Where", []string{p + "any", p + "never", p + "shape"}, p+"target")
	out = appendNode(out, "Reshape", []string{x, p + "target"}, g.check())
	return appendRenamed(out, n, 0, g.check())
}
