package modelstore

import (
	"errors"
	"fmt"
	"math"
	"strings"
)

// The model sanitizer: ONNX Runtime trusts a model's attributes and shapes,
// and many operators crash the process (SIGFPE, SIGSEGV, abort) on values
// the ONNX specification forbids or that ORT mishandles: a Conv with
// strides 0, an integer Div by zero folded while the session is created.
// SanitizeModel walks every node of a model (the main graph, Loop/If/Scan
// bodies at any depth, model-local functions) against the rules table
// below and refuses the first node that breaks one, naming the node, the
// operator and the attribute. It also rewrites integer Div and Mod so that
// they cannot trap (divguard.go).
//
// Adding a rule is one row in rules plus a regression case: the crash hunt
// (fuzzmodels/hunt.py, `make fuzz-models`) finds the classes, and
// fuzzmodels/regressions.py keeps one model per class under
// modelstore/testdata/crash (docs/MODEL_VALIDATION.md).

// ErrModelUnsafe: a model the sanitizer refuses; wrapped with the node,
// operator and attribute at fault.
var ErrModelUnsafe = errors.New("model refused")

// MaxStaticElements bounds the element count of a tensor whose shape is
// known when the model is stored (ConstantOfShape, Expand, Tile, Range,
// Reshape with constant shapes): 2^31 elements (8 GiB of float), more than
// any model this server can hold in memory needs.
const MaxStaticElements = 1 << 31

// maxRank bounds axes and per-dimension lists where the rank is not known
// statically: ONNX sets no limit, but no real model comes near 64
// dimensions, and huge values overflow ORT's index arithmetic.
const maxRank = 64

// SanitizeModel checks model (CheckModelBlob first) against the sanitizer's
// rules. It returns a refusal wrapping ErrModelUnsafe (or CheckModelBlob's
// error), or the model rewritten so that integer division cannot trap, or
// nil when the model needs no rewrite. It is a pure function of its input:
// safe to call in the server before a model reaches an engine process.
// The guards of Pad (padguard.go) are ONNX Runtime's alone: NewSession
// adds them.
func SanitizeModel(model []byte) ([]byte, error) {
	if err := CheckModelBlob(model); err != nil {
		return nil, err
	}
	out, _, err := sanitizeChecked(model, false)
	return out, err
}

// CheckModel is SanitizeModel without the rewrite: CheckModelBlob, then
// the rules. The server runs it before a model reaches an engine, so a
// refused model costs no engine process a session attempt.
func CheckModel(model []byte) error {
	if err := CheckModelBlob(model); err != nil {
		return err
	}
	_, err := analyze(model)
	return err
}

// sanitizeChecked is SanitizeModel for bytes CheckModelBlob accepted (or
// the share plan's graph, whose large initializers are references). With
// pads it guards the Pad nodes too, and padErrs maps the name of each
// guard's check node to the refusal its failure stands for.
func sanitizeChecked(model []byte, pads bool) (out []byte, padErrs map[string]error, err error) {
	a, err := analyze(model)
	if err != nil {
		return nil, nil, err
	}
	guards := a.guards
	if pads && len(a.pads) > 0 {
		guards = make(map[int]guard, len(a.guards)+len(a.pads))
		padErrs = make(map[string]error, len(a.pads))
		for off, g := range a.guards {
			guards[off] = g
		}
		for off, g := range a.pads {
			guards[off] = g
			padErrs[g.check()] = g.err
		}
	}
	if len(guards) == 0 {
		return nil, nil, nil
	}
	out, err = rewriteGuards(model, guards)
	return out, padErrs, err
}

// analyze checks every node of the model against the rules and finds the
// divisions and Pads to guard.
func analyze(model []byte) (*analysis, error) {
	m, err := decodeModel(model)
	if err != nil {
		return nil, err
	}
	a := &analysis{guards: map[int]guard{}, pads: map[int]*padGuard{}}
	if err := a.graph(m.graph, nil, m.opsets); err != nil {
		return nil, err
	}
	for _, fn := range m.functions {
		opsets := fn.opsets
		if len(opsets) == 0 {
			opsets = m.opsets
		}
		if err := a.graph(fn.body, nil, opsets); err != nil {
			return nil, err
		}
	}
	return a, nil
}

// analysis carries what a walk of the model learns.
type analysis struct {
	guards map[int]guard     // by node offset: integer divisions to guard
	pads   map[int]*padGuard // by node offset: Pads to guard (padguard.go)
}

// scope resolves value names in a graph and the graphs around it.
type scope struct {
	vals   map[string]*gValue
	parent *scope
	opset  int64 // ai.onnx
}

func (s *scope) lookup(name string) *gValue {
	for ; s != nil; s = s.parent {
		if v := s.vals[name]; v != nil {
			return v
		}
	}
	return nil
}

// graph infers what it can of g's values, then checks every node and the
// subgraphs of its attributes.
func (a *analysis) graph(g *gGraph, parent *scope, opsets map[string]int64) error {
	sc := inferGraph(g, parent, opsets[""])
	for _, n := range g.nodes {
		if err := a.node(n, sc, opsets); err != nil {
			return err
		}
		for _, at := range n.attrs {
			for _, sub := range at.graphs {
				if err := a.graph(sub, sc, opsets); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// inferGraph is the scope of g's values: its declarations and what
// inference finds from them.
func inferGraph(g *gGraph, parent *scope, opset int64) *scope {
	sc := &scope{vals: make(map[string]*gValue, len(g.decl)+len(g.nodes)), parent: parent, opset: opset}
	for k, v := range g.decl {
		sc.vals[k] = v
	}
	// Nodes are topologically sorted in a valid model; a second pass
	// catches what an unsorted one defines late.
	for pass := 0; pass < 2; pass++ {
		for _, n := range g.nodes {
			inferNode(n, sc)
		}
	}
	return sc
}

// ElemTypes gives the element type of the values of model's main graph
// that its declarations (inputs, outputs, initializers, value_info) give
// or that the sanitizer's inference finds from them (onnxinfer.go): an
// engine can refuse, when the model is stored, an operator it cannot run
// on a type. A value whose type is unknown, or has no DType, is absent.
// model must have passed CheckModelBlob.
func ElemTypes(model []byte) (map[string]DType, error) {
	m, err := decodeModel(model)
	if err != nil {
		return nil, err
	}
	sc := inferGraph(m.graph, nil, m.opsets[""])
	out := make(map[string]DType, len(sc.vals))
	for name, v := range sc.vals {
		if dt := onnxToDType(v.elem); dt != DTypeInvalid {
			out[name] = dt
		}
	}
	return out, nil
}

// unsafeNode builds a refusal.
func unsafeNode(n *gNode, format string, args ...any) error {
	name := n.name
	if len(name) > 80 {
		name = name[:80] + "..."
	}
	op := n.op
	if n.domain != "" {
		op = n.domain + "." + op
	}
	return fmt.Errorf("%w: node %q (%s): %s", ErrModelUnsafe, name, op, fmt.Sprintf(format, args...))
}

// node checks one node against the rules and records its division guard.
func (a *analysis) node(n *gNode, sc *scope, opsets map[string]int64) error {
	c := &ruleCtx{n: n, sc: sc}
	for i := range rules {
		r := &rules[i]
		if !r.matches(n) {
			continue
		}
		var at *gAttr
		if r.attr != "" {
			if at = n.attr(r.attr); at == nil || at.ref {
				continue
			}
		}
		if why := r.check(c, at); why != "" {
			if r.attr != "" {
				return unsafeNode(n, "attribute %s %s", r.attr, why)
			}
			return unsafeNode(n, "%s", why)
		}
	}
	switch {
	case n.domain == "" && (n.op == "Div" || n.op == "Mod"):
		return a.guardDivision(n, sc)
	case n.domain == "" && n.op == "Pad":
		return a.guardPad(n, sc)
	}
	return nil
}

// rule is one row of the table: for the operators in ops (space-separated
// op types; "ai.onnx.ml:" prefixes the ML domain's), check the attribute
// attr when the node has it (attr "" checks the node itself). check returns
// "" when the node passes, else the reason it is refused.
type rule struct {
	ops   string
	attr  string
	check func(c *ruleCtx, a *gAttr) string
}

func (r *rule) matches(n *gNode) bool {
	var want string
	switch n.domain {
	case "":
		want = n.op
	case "ai.onnx.ml":
		want = "ai.onnx.ml:" + n.op
	default:
		return false
	}
	for _, op := range strings.Fields(r.ops) {
		if op == want {
			return true
		}
	}
	return false
}

// ruleCtx gives a rule what is known about its node.
type ruleCtx struct {
	n  *gNode
	sc *scope
}

// in is what is known of the node's i-th input (nil: nothing, or absent).
func (c *ruleCtx) in(i int) *gValue {
	name := c.n.input(i)
	if name == "" {
		return nil
	}
	return c.sc.lookup(name)
}

// rank of input i, or -1 when unknown.
func (c *ruleCtx) rank(i int) int {
	if v := c.in(i); v != nil && v.shape != nil {
		return len(v.shape)
	}
	return -1
}

// dim d of input i (negative d counts from the end), or -1 when unknown.
func (c *ruleCtx) dim(i, d int) int64 {
	v := c.in(i)
	if v == nil || v.shape == nil {
		return -1
	}
	if d < 0 {
		d += len(v.shape)
	}
	if d < 0 || d >= len(v.shape) {
		return -1
	}
	return v.shape[d]
}

// kernelRank is the number of spatial dimensions of a convolution or
// pooling node: from kernel_shape, else from the weight's or the input's
// rank; -1 when unknown.
func (c *ruleCtx) kernelRank() int {
	if ks := c.n.attr("kernel_shape"); ks != nil && !ks.ref {
		return len(ks.ints)
	}
	w := 1
	switch c.n.op {
	case "QLinearConv":
		w = 3
	case "MaxPool", "AveragePool", "LpPool", "MaxUnpool", "GlobalAveragePool":
		w = 0
	}
	if r := c.rank(w); r >= 2 {
		return r - 2
	}
	if r := c.rank(0); r >= 2 {
		return r - 2
	}
	return -1
}

// Checks the rules use.

func allAtLeast(min int64) func(*ruleCtx, *gAttr) string {
	return func(_ *ruleCtx, a *gAttr) string {
		for _, v := range a.ints {
			if v < min {
				return fmt.Sprintf("must be >= %d, got %s", min, intList(a.ints))
			}
		}
		return ""
	}
}

func intAtLeast(min int64) func(*ruleCtx, *gAttr) string {
	return func(_ *ruleCtx, a *gAttr) string {
		if a.i < min {
			return fmt.Sprintf("must be >= %d, got %d", min, a.i)
		}
		return ""
	}
}

func intIn(vals ...int64) func(*ruleCtx, *gAttr) string {
	return func(_ *ruleCtx, a *gAttr) string {
		for _, v := range vals {
			if a.i == v {
				return ""
			}
		}
		return fmt.Sprintf("must be one of %s, got %d", intList(vals), a.i)
	}
}

func intBetween(min, max int64) func(*ruleCtx, *gAttr) string {
	return func(_ *ruleCtx, a *gAttr) string {
		if a.i < min || a.i > max {
			return fmt.Sprintf("must be between %d and %d, got %d", min, max, a.i)
		}
		return ""
	}
}

// floatsFinite refuses NaN and infinities.
func floatsFinite(_ *ruleCtx, a *gAttr) string {
	for _, v := range append([]float64{a.f}, a.floats...) {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return "must be finite"
		}
	}
	return ""
}

// lenKernel: a per-spatial-dimension list has one entry per dimension.
func lenKernel(times int) func(*ruleCtx, *gAttr) string {
	return func(c *ruleCtx, a *gAttr) string {
		k := c.kernelRank()
		if k < 0 {
			if len(a.ints) > times*maxRank {
				return fmt.Sprintf("has %d entries", len(a.ints))
			}
			return ""
		}
		if len(a.ints) != times*k {
			return fmt.Sprintf("has %d entries, but the kernel has %d spatial dimensions (want %d)", len(a.ints), k, times*k)
		}
		return ""
	}
}

// axisIn: an axis attribute lies in [-r, r) for the rank r of input i
// plus extra (Unsqueeze-like operators add dimensions); where the rank is
// not known, |axis| stays below maxRank.
func axisIn(i, extra int) func(*ruleCtx, *gAttr) string {
	return func(c *ruleCtx, a *gAttr) string {
		r := c.rank(i)
		axes := a.ints
		if a.typ == attrInt || len(axes) == 0 {
			axes = []int64{a.i}
		}
		for _, ax := range axes {
			if r < 0 {
				if ax < -maxRank || ax >= maxRank {
					return fmt.Sprintf("is %d, beyond any rank", ax)
				}
				continue
			}
			n := int64(r + extra)
			if ax < -n || ax >= n {
				return fmt.Sprintf("is %d, outside [%d, %d) for an input of rank %d", ax, -n, n, r)
			}
		}
		return ""
	}
}

// convGroup: group divides the input channels and the weight's output
// channels where their shapes are known.
func convGroup(c *ruleCtx, a *gAttr) string {
	if a.i < 1 {
		return fmt.Sprintf("must be >= 1, got %d", a.i)
	}
	x, w := 0, 1
	if c.n.op == "QLinearConv" {
		x, w = 0, 3
	}
	if ch := c.dim(x, 1); ch > 0 && ch%a.i != 0 {
		return fmt.Sprintf("is %d, which does not divide the %d input channels", a.i, ch)
	}
	if c.n.op != "ConvTranspose" {
		if m := c.dim(w, 0); m > 0 && m%a.i != 0 {
			return fmt.Sprintf("is %d, which does not divide the weight's %d output channels", a.i, m)
		}
		if ch, wc := c.dim(x, 1), c.dim(w, 1); ch > 0 && wc > 0 && ch != wc*a.i {
			return fmt.Sprintf("is %d, but the input has %d channels and the weight %d per group", a.i, ch, wc)
		}
	}
	return ""
}

// sameRank: the inputs named by index have equal ranks where known.
func sameRank(is ...int) func(*ruleCtx, *gAttr) string {
	return func(c *ruleCtx, _ *gAttr) string {
		r0 := -1
		for _, i := range is {
			r := c.rank(i)
			if r < 0 {
				continue
			}
			if r0 >= 0 && r != r0 {
				return fmt.Sprintf("input %d has rank %d, but input %d has rank %d", i, r, is[0], r0)
			}
			r0 = r
		}
		return ""
	}
}

// minRank: input i has at least min dimensions where its rank is known.
func minRank(i, min int) func(*ruleCtx, *gAttr) string {
	return func(c *ruleCtx, _ *gAttr) string {
		if r := c.rank(i); r >= 0 && r < min {
			return fmt.Sprintf("input %d has rank %d, fewer than %d", i, r, min)
		}
		return ""
	}
}

func intList(v []int64) string {
	if len(v) > 8 {
		return fmt.Sprint(v[:8]) + "..."
	}
	return fmt.Sprint(v)
}

// Operator groups of the table.
const (
	convOps    = "Conv ConvTranspose ConvInteger QLinearConv"
	poolOps    = "MaxPool AveragePool LpPool MaxUnpool"
	spatialOps = convOps + " " + poolOps
)

// rules is the sanitizer's table: one row per operator and attribute
// rule. Rows marked "hunt" come from crashes the crash hunt found in ONNX
// Runtime 1.24.1 (docs/MODEL_VALIDATION.md lists them with their signal).
var rules = []rule{
	// Convolution and pooling: the ONNX specification's constraints.
	{spatialOps + " Col2Im", "strides", allAtLeast(1)},
	{spatialOps + " Col2Im", "dilations", allAtLeast(1)},
	{spatialOps, "kernel_shape", allAtLeast(1)},
	{spatialOps + " Col2Im", "pads", allAtLeast(0)},
	{spatialOps + " Col2Im", "strides", allInRangeInts(1, 1<<31)},   // huge values overflow ORT's size arithmetic
	{spatialOps + " Col2Im", "dilations", allInRangeInts(1, 1<<31)}, // (hunt: LpPool kernel_shape 2^62, SIGABRT)
	{spatialOps, "kernel_shape", allInRangeInts(1, 1<<31)},
	{spatialOps + " Col2Im", "pads", allInRangeInts(0, 1<<31)},
	{spatialOps, "strides", lenKernel(1)},
	{spatialOps, "dilations", lenKernel(1)},
	{spatialOps, "pads", lenKernel(2)},
	{"ConvTranspose", "output_padding", allAtLeast(0)},
	{"ConvTranspose", "output_padding", lenKernel(1)},
	{"ConvTranspose", "output_shape", allAtLeast(1)},
	{"ConvTranspose", "output_shape", lenKernel(1)},
	{convOps, "group", convGroup},
	{"MaxPool", "storage_order", intIn(0, 1)},
	{"MaxPool AveragePool LpPool", "ceil_mode", intIn(0, 1)},
	{"LpPool", "p", intAtLeast(1)},
	{"Conv ConvTranspose ConvInteger", "", sameRank(0, 1)},                            // hunt: SIGABRT
	{"QLinearConv", "", sameRank(0, 3)},                                               // hunt: SIGABRT
	{spatialOps + " GlobalAveragePool GlobalMaxPool GlobalLpPool", "", minRank(0, 3)}, // hunt
	{"MaxRoiPool", "pooled_shape", allAtLeast(1)},                                     // hunt: SIGABRT
	{"MaxRoiPool", "pooled_shape", lenExactly(2)},                                     // hunt: SIGABRT
	{"RoiAlign", "output_height", intAtLeast(1)},
	{"RoiAlign", "output_width", intAtLeast(1)},
	{"RoiAlign", "sampling_ratio", intAtLeast(0)},
	{"DepthToSpace SpaceToDepth", "blocksize", intBetween(1, 1<<16)},                    // hunt: SIGFPE (blocksize^2 overflows)
	{"GatherND", "batch_dims", gatherNDBatch},                                           // hunt: SIGFPE, SIGSEGV, SIGABRT
	{"LayerNormalization", "axis", axisIn(0, 0)},                                        // hunt: SIGSEGV
	{"OneHot", "axis", axisIn(0, 1)},                                                    // hunt: SIGABRT
	{"ai.onnx.ml:SVMRegressor ai.onnx.ml:SVMClassifier", "kernel_params", floatsFinite}, // hunt: SIGABRT
	{"Einsum", "", einsumInputs},                                                        // hunt: SIGSEGV
	{"CumSum", "", scalarAxisInput(1)},                                                  // hunt: SIGSEGV
	{"LpNormalization", "p", intIn(1, 2)},
	{"LpNormalization", "axis", axisIn(0, 0)},                                              // hunt: SIGFPE
	{"ai.onnx.ml:SVMRegressor ai.onnx.ml:SVMClassifier", "kernel_params", floatsLen(0, 3)}, // hunt: SIGABRT
	{"Flatten", "axis", axisIn(0, 1)},                                                      // Flatten's axis may equal the rank
	{"Softmax LogSoftmax Hardmax Concat Gather GatherElements ScatterElements Split Compress CumSum ArgMax ArgMin TopK Unique", "axis", axisIn(0, 0)},
	{"LpNormalization TopK", "", noZeroDim(0)},                                            // hunt: SIGFPE
	{"Unique", "axis", func(c *ruleCtx, _ *gAttr) string { return noZeroDim(0)(c, nil) }}, // hunt: SIGABRT
	{"MaxUnpool", "", sameShape(0, 1)},                                                    // hunt: SIGSEGV
	{"OneHot", "", elemsOf(1, 1)},                                                         // hunt: SIGABRT
	{"OneHot", "", elemsOf(2, 2)},                                                         // hunt: SIGABRT
	{"ReduceSum ReduceMean ReduceMax ReduceMin ReduceProd ReduceL1 ReduceL2 ReduceLogSum ReduceLogSumExp ReduceSumSquare", "", axesInput(1)}, // hunt: SIGABRT
	{"ScatterND GatherND", "", indexDepth},                    // hunt: SIGFPE
	{"ScatterND GatherND", "", indicesInBounds},               // hunt: SIGSEGV (at store when folded)
	{"DFT InstanceNormalization", "", noZeroDim(0)},           // hunt: DFT SIGFPE (at store when folded), InstanceNormalization SIGSEGV
	{"Einsum", "", einsumEllipsis},                            // hunt: SIGSEGV
	{"Einsum", "", noZeroDimInputs},                           // hunt: SIGSEGV (at store when folded)
	{"GatherND", "", batchDimsAgree},                          // hunt: SIGFPE
	{"Trilu", "", constScalarBetween(1, -1<<40, 1<<40)},       // hunt: SIGSEGV (k = INT64_MIN)
	{"RandomUniform RandomUniformLike", "low", floatsFinite},  // hunt: SIGABRT
	{"RandomUniform RandomUniformLike", "high", floatsFinite}, // hunt: SIGABRT
	{"RandomNormal RandomNormalLike", "mean", floatsFinite},
	{"RandomNormal RandomNormalLike", "scale", floatsFinite},
	{"MaxRoiPool RoiAlign", "spatial_scale", floatsFinite},                        // hunt: SIGABRT
	{"RNN GRU LSTM", "hidden_size", intBetween(1, 1<<24)},                         // hunt: SIGABRT
	{"ai.onnx.ml:LinearClassifier", "coefficients", linearCoefficients},           // hunt: SIGABRT
	{"RandomNormal RandomNormalLike", "scale", floatAtLeast(0)},                   // hunt: SIGABRT
	{"RandomUniform RandomUniformLike", "", uniformBounds},                        // hunt: SIGABRT
	{"ai.onnx.ml:FeatureVectorizer", "inputdimensions", allInRangeInts(1, 1<<24)}, // hunt: SIGABRT
	{"SplitToSequence", "", splitLengths},                                         // hunt: SIGFPE, at store when folded
	{"Loop", "", elemsOf(0, 1)},                                                   // hunt: SIGSEGV (an empty trip count)
	{"Loop", "", elemsOf(1, 1)},
	{"Scan", "num_scan_inputs", scanInputs}, // hunt: SIGSEGV
	// Resource bombs: outputs whose size is known at store.
	{"ConstantOfShape", "", staticSize(shapeFromInput(0))},
	{"Expand", "", staticSize(shapeFromInput(1))},
	{"Reshape", "", staticSize(shapeFromInput(1))},
	{"Tile", "", staticSize(tileShape)},
	{"Range", "", staticSize(rangeShape)},

	// A tree ensemble's parallel arrays (hunt: SIGABRT at store; the regressor's by the spec, as the classifier's).
	{"ai.onnx.ml:TreeEnsembleClassifier ai.onnx.ml:TreeEnsembleRegressor", "", parallelLists("nodes_treeids", "nodes_nodeids", "nodes_featureids", "nodes_modes", "nodes_truenodeids", "nodes_falsenodeids")},
	{"ai.onnx.ml:TreeEnsembleClassifier", "", parallelLists("class_ids", "class_treeids", "class_nodeids", "class_weights")},
	{"ai.onnx.ml:TreeEnsembleRegressor", "", parallelLists("target_ids", "target_treeids", "target_nodeids", "target_weights")},
}

// splitLengths: SplitToSequence's split, where it is a constant, is a
// chunk length of at least 1 (a scalar) or lengths of at least 0 (a
// list), as the ONNX specification asks: ONNX Runtime divides by a scalar
// split of 0.
func splitLengths(c *ruleCtx, _ *gAttr) string {
	v := c.in(1)
	if v == nil || !v.known || v.shape == nil {
		return ""
	}
	min := int64(0)
	if len(v.shape) == 0 {
		min = 1
	}
	for _, x := range v.ints {
		if x < min {
			return fmt.Sprintf("input 1 (split) holds %d, must be >= %d", x, min)
		}
	}
	return ""
}

// scanInputs: Scan's num_scan_inputs counts some of its inputs, at least
// one.
func scanInputs(c *ruleCtx, a *gAttr) string {
	if a.i < 1 || a.i > int64(len(c.n.inputs)) {
		return fmt.Sprintf("must be in [1, %d] (the node's inputs), got %d", len(c.n.inputs), a.i)
	}
	return ""
}

// floatsLen: a float list has one of the given lengths.
func floatsLen(lens ...int) func(*ruleCtx, *gAttr) string {
	return func(_ *ruleCtx, a *gAttr) string {
		for _, n := range lens {
			if len(a.floats) == n {
				return ""
			}
		}
		return fmt.Sprintf("must have %v entries, got %d", lens, len(a.floats))
	}
}

// parallelLists: the named list attributes, which the specification makes
// parallel arrays, have as many entries each, an absent one counting none
// (a tree ensemble's: ONNX Runtime aborts on a mismatch). A list given as
// a tensor instead (NAME_as_tensor) counts its elements.
func parallelLists(names ...string) func(*ruleCtx, *gAttr) string {
	return func(c *ruleCtx, _ *gAttr) string {
		first, n := "", -1
		for _, name := range names {
			k := 0
			if a := c.n.attr(name); a != nil {
				if a.ref {
					return ""
				}
				k = max(len(a.ints), len(a.floats), a.nStrs)
			} else if t := c.n.attr(name + "_as_tensor"); t != nil {
				e, ok := int64(0), false
				if !t.ref && t.t != nil {
					e, ok = elemCount(t.t.shape)
				}
				if !ok || e > 1<<31 {
					return "" // not told here
				}
				k = int(e)
			}
			if n < 0 {
				first, n = name, k
			} else if k != n {
				return fmt.Sprintf("attribute %s has %d entries, but %s has %d", name, k, first, n)
			}
		}
		return ""
	}
}

// noZeroDim: input i has no dimension of size 0 where its shape is known.
func noZeroDim(i int) func(*ruleCtx, *gAttr) string {
	return func(c *ruleCtx, _ *gAttr) string {
		if v := c.in(i); v != nil {
			for _, d := range v.shape {
				if d == 0 {
					return fmt.Sprintf("input %d has a dimension of size 0 (shape %s)", i, intList(v.shape))
				}
			}
		}
		return ""
	}
}

// noZeroDimInputs: no input has a dimension of size 0 (noZeroDim, for an
// operator of any number of inputs).
func noZeroDimInputs(c *ruleCtx, _ *gAttr) string {
	for i := range c.n.inputs {
		if why := noZeroDim(i)(c, nil); why != "" {
			return why
		}
	}
	return ""
}

// sameShape: inputs i and j have equal shapes where both are known.
func sameShape(i, j int) func(*ruleCtx, *gAttr) string {
	return func(c *ruleCtx, _ *gAttr) string {
		a, b := c.in(i), c.in(j)
		if a == nil || b == nil || a.shape == nil || b.shape == nil {
			return ""
		}
		if len(a.shape) != len(b.shape) {
			return fmt.Sprintf("input %d has shape %s, input %d %s", j, intList(b.shape), i, intList(a.shape))
		}
		for k := range a.shape {
			if a.shape[k] >= 0 && b.shape[k] >= 0 && a.shape[k] != b.shape[k] {
				return fmt.Sprintf("input %d has shape %s, input %d %s", j, intList(b.shape), i, intList(a.shape))
			}
		}
		return ""
	}
}

// elemsOf: input i has exactly n elements where its shape is known.
func elemsOf(i int, n int64) func(*ruleCtx, *gAttr) string {
	return func(c *ruleCtx, _ *gAttr) string {
		v := c.in(i)
		if v == nil || v.shape == nil {
			return ""
		}
		for _, d := range v.shape {
			if d < 0 {
				return ""
			}
		}
		if got, ok := elemCount(v.shape); !ok || got != n {
			return fmt.Sprintf("input %d must have %d element(s), got shape %s", i, n, intList(v.shape))
		}
		return ""
	}
}

// axesInput: an axes input (i) is 1-D, and its known values lie within
// the data's rank.
func axesInput(i int) func(*ruleCtx, *gAttr) string {
	return func(c *ruleCtx, _ *gAttr) string {
		v := c.in(i)
		if v == nil {
			return ""
		}
		if v.shape != nil && len(v.shape) != 1 {
			return fmt.Sprintf("axes input must be 1-D, got shape %s", intList(v.shape))
		}
		r := int64(c.rank(0))
		if v.known && r >= 0 {
			for _, ax := range v.ints {
				if ax < -r || ax >= r {
					return fmt.Sprintf("axis %d is outside [%d, %d)", ax, -r, r)
				}
			}
		}
		return ""
	}
}

// indexDepth: the last dimension of ScatterND's and GatherND's indices
// (input 1) is between 1 and the data's rank (less GatherND's
// batch_dims).
func indexDepth(c *ruleCtx, _ *gAttr) string {
	k := c.dim(1, -1)
	if k < 0 {
		return ""
	}
	if k == 0 {
		return "the indices' last dimension is 0"
	}
	r := int64(c.rank(0)) - batchDims(c)
	if c.rank(0) >= 0 && k > r {
		return fmt.Sprintf("the indices' last dimension is %d, more than the %d data dimensions it can index", k, r)
	}
	return ""
}

// batchDims is GatherND's batch_dims where it is a value, else 0
// (ScatterND has no batch_dims).
func batchDims(c *ruleCtx) int64 {
	if bd := c.n.attr("batch_dims"); bd != nil && !bd.ref && c.n.op == "GatherND" {
		return bd.i
	}
	return 0
}

// indicesInBounds: ScatterND's and GatherND's indices (input 1), where
// they are a known constant, address only elements the data (input 0)
// has: each index lies in [-s, s-1] for the data dimension of size s it
// indexes, as the ONNX specification asks (none does for a dimension of
// size 0). ONNX Runtime folds such a node at store and reads out of
// bounds.
func indicesInBounds(c *ruleCtx, _ *gAttr) string {
	idx, data := c.in(1), c.in(0)
	k := c.dim(1, -1)
	if idx == nil || !idx.known || data == nil || data.shape == nil || k <= 0 {
		return ""
	}
	b := batchDims(c)
	if r := int64(len(data.shape)); b < 0 || b > r || k > r-b {
		return "" // gatherNDBatch's and indexDepth's to refuse
	}
	for n, x := range idx.ints {
		d := b + int64(n)%k
		switch s := data.shape[d]; {
		case s == 0:
			return fmt.Sprintf("index %d is into the data's dimension %d, of size 0", x, d)
		case s > 0 && (x < -s || x >= s):
			return fmt.Sprintf("index %d is outside [%d, %d], the data's dimension %d", x, -s, s-1, d)
		}
	}
	return ""
}

// einsumEllipsis: the dimensions "..." stands for in each input broadcast
// together, where the inputs' shapes are known.
func einsumEllipsis(c *ruleCtx, _ *gAttr) string {
	eq := c.n.attr("equation")
	if eq == nil || eq.ref {
		return ""
	}
	lhs, _, _ := strings.Cut(strings.ReplaceAll(string(eq.s), " ", ""), "->")
	var bcast []int64 // right-aligned
	ellipsisRank := -1
	for i, t := range strings.Split(lhs, ",") {
		if !strings.Contains(t, "...") {
			continue
		}
		v := c.in(i)
		if v == nil || v.shape == nil {
			continue
		}
		before, after, _ := strings.Cut(t, "...")
		n := len(v.shape) - len(before) - len(after)
		if n < 0 {
			return fmt.Sprintf("equation term %q does not fit input %d of rank %d", t, i, len(v.shape))
		}
		// ONNX allows "..." to cover different ranks in different inputs
		// (broadcast); ONNX Runtime 1.24.1 crashes on it (hunt: SIGSEGV).
		if ellipsisRank >= 0 && n != ellipsisRank {
			return fmt.Sprintf("\"...\" covers %d dimensions in one input and %d in input %d", ellipsisRank, n, i)
		}
		ellipsisRank = n
		dims := v.shape[len(before) : len(before)+n]
		for k := 1; k <= len(dims); k++ {
			d := dims[len(dims)-k]
			if k > len(bcast) {
				bcast = append(bcast, d)
				continue
			}
			b := bcast[k-1]
			switch {
			case d < 0 || b < 0 || d == b || d == 1:
			case b == 1:
				bcast[k-1] = d
			default:
				return fmt.Sprintf("the dimensions of \"...\" do not broadcast (%d and %d)", b, d)
			}
		}
	}
	return ""
}

// batchDimsAgree: GatherND's data and indices agree on their first
// batch_dims dimensions where both are known.
func batchDimsAgree(c *ruleCtx, _ *gAttr) string {
	bd := c.n.attr("batch_dims")
	if bd == nil || bd.ref || bd.i <= 0 || bd.i >= maxRank {
		return ""
	}
	for d := 0; d < int(bd.i); d++ {
		a, b := c.dim(0, d), c.dim(1, d)
		if a >= 0 && b >= 0 && a != b {
			return fmt.Sprintf("batch dimension %d is %d in the data but %d in the indices", d, a, b)
		}
	}
	return ""
}

// constScalarBetween: input i, where it is a known constant, lies in
// [min, max].
func constScalarBetween(i int, min, max int64) func(*ruleCtx, *gAttr) string {
	return func(c *ruleCtx, _ *gAttr) string {
		if v := c.in(i); v != nil && v.known {
			for _, x := range v.ints {
				if x < min || x > max {
					return fmt.Sprintf("input %d is %d, outside [%d, %d]", i, x, min, max)
				}
			}
		}
		return ""
	}
}

// linearCoefficients: a LinearClassifier has finite coefficients, as many
// per class (intercept) as any other class.
func linearCoefficients(c *ruleCtx, a *gAttr) string {
	if why := floatsFinite(c, a); why != "" {
		return why
	}
	if ic := c.n.attr("intercepts"); ic != nil && !ic.ref && len(ic.floats) > 0 && len(a.floats)%len(ic.floats) != 0 {
		return fmt.Sprintf("has %d entries, not a multiple of the %d intercepts", len(a.floats), len(ic.floats))
	}
	return ""
}

func floatAtLeast(min float64) func(*ruleCtx, *gAttr) string {
	return func(_ *ruleCtx, a *gAttr) string {
		if !(a.f >= min) {
			return fmt.Sprintf("must be >= %g, got %g", min, a.f)
		}
		return ""
	}
}

func allInRangeInts(min, max int64) func(*ruleCtx, *gAttr) string {
	return func(_ *ruleCtx, a *gAttr) string {
		for _, v := range a.ints {
			if v < min || v > max {
				return fmt.Sprintf("must be between %d and %d, got %s", min, max, intList(a.ints))
			}
		}
		return ""
	}
}

// uniformBounds: low <= high (defaults 0 and 1).
func uniformBounds(c *ruleCtx, _ *gAttr) string {
	low, high := 0.0, 1.0
	if a := c.n.attr("low"); a != nil && !a.ref {
		low = a.f
	}
	if a := c.n.attr("high"); a != nil && !a.ref {
		high = a.f
	}
	if !(low <= high) {
		return fmt.Sprintf("low %g is above high %g", low, high)
	}
	return ""
}

func lenExactly(n int) func(*ruleCtx, *gAttr) string {
	return func(_ *ruleCtx, a *gAttr) string {
		if len(a.ints) != n {
			return fmt.Sprintf("must have %d entries, got %d", n, len(a.ints))
		}
		return ""
	}
}

// gatherNDBatch: 0 <= batch_dims < rank of both inputs.
func gatherNDBatch(c *ruleCtx, a *gAttr) string {
	if a.i < 0 || a.i >= maxRank {
		return fmt.Sprintf("must be between 0 and %d, got %d", maxRank-1, a.i)
	}
	for _, i := range []int{0, 1} {
		if r := c.rank(i); r >= 0 && a.i >= int64(r) {
			return fmt.Sprintf("is %d, not less than the rank %d of input %d", a.i, r, i)
		}
	}
	return ""
}

// einsumInputs: one equation term per input, as many letters as each
// input's known rank.
func einsumInputs(c *ruleCtx, _ *gAttr) string {
	eq := c.n.attr("equation")
	if eq == nil || eq.ref {
		return ""
	}
	lhs, _, _ := strings.Cut(strings.ReplaceAll(string(eq.s), " ", ""), "->")
	terms := strings.Split(lhs, ",")
	if len(terms) != len(c.n.inputs) {
		return fmt.Sprintf("equation %q has %d input terms for %d inputs", eq.s, len(terms), len(c.n.inputs))
	}
	for i, t := range terms {
		r := c.rank(i)
		if r < 0 {
			continue
		}
		letters := len(strings.ReplaceAll(t, "...", ""))
		if letters > r || (!strings.Contains(t, "...") && letters != r) {
			return fmt.Sprintf("equation term %q does not fit input %d of rank %d", t, i, r)
		}
	}
	return ""
}

// scalarAxisInput: input i (an axis) is a scalar or one element where its
// shape is known, and within the data's rank where its value is.
func scalarAxisInput(i int) func(*ruleCtx, *gAttr) string {
	return func(c *ruleCtx, _ *gAttr) string {
		v := c.in(i)
		if v == nil {
			return ""
		}
		if v.shape != nil {
			if n, ok := elemCount(v.shape); !ok || n != 1 || len(v.shape) > 1 {
				return fmt.Sprintf("axis input must be a scalar, got shape %v", v.shape)
			}
		}
		if v.known && len(v.ints) == 1 {
			if r := c.rank(0); r >= 0 && (v.ints[0] < -int64(r) || v.ints[0] >= int64(r)) {
				return fmt.Sprintf("axis %d is outside [%d, %d)", v.ints[0], -r, r)
			}
		}
		return ""
	}
}

// staticSize refuses a node whose output shape, known at store, has more
// than MaxStaticElements elements. Dimensions of 0 or less (Reshape's -1
// and 0, which the input's size and dims resolve) are left out of the
// product rather than ending it: the product of the others still bounds
// what the output claims, and a Reshape to [0, 3, 0x5555555555555556]
// (0 copying the input's 1) made a 2-element tensor whose dims' product
// wraps past 2^64 to 2 (review, 2026-12-07).
func staticSize(shape func(*ruleCtx) ([]int64, bool)) func(*ruleCtx, *gAttr) string {
	return func(c *ruleCtx, _ *gAttr) string {
		dims, ok := shape(c)
		if !ok {
			return ""
		}
		n := int64(1)
		for _, d := range dims {
			if d <= 0 {
				continue
			}
			if n > MaxStaticElements/d {
				return fmt.Sprintf("output shape %s has more than %d elements", intList(dims), int64(MaxStaticElements))
			}
			n *= d
		}
		return ""
	}
}

// shapeFromInput: the output shape is the values of input i (a constant).
func shapeFromInput(i int) func(*ruleCtx) ([]int64, bool) {
	return func(c *ruleCtx) ([]int64, bool) {
		v := c.in(i)
		if v == nil || !v.known || v.ints == nil {
			return nil, false
		}
		return v.ints, true
	}
}

// tileShape: the input's dims and the repeats, whose product is the
// output's element count, when both are known.
func tileShape(c *ruleCtx) ([]int64, bool) {
	x, r := c.in(0), c.in(1)
	if x == nil || r == nil || x.shape == nil || !r.known || len(r.ints) != len(x.shape) {
		return nil, false
	}
	for _, d := range x.shape {
		if d < 0 {
			return nil, false
		}
	}
	return append(append([]int64(nil), x.shape...), r.ints...), true
}

// rangeShape: ceil((limit - start) / delta) elements, when all three are
// known; a zero delta is refused by ONNX Runtime itself.
func rangeShape(c *ruleCtx) ([]int64, bool) {
	var v [3]float64
	for i := range v {
		in := c.in(i)
		if in == nil || !in.known {
			return nil, false
		}
		switch {
		case len(in.ints) == 1:
			v[i] = float64(in.ints[0])
		case len(in.floats) == 1:
			v[i] = in.floats[0]
		default:
			return nil, false
		}
	}
	if v[2] == 0 {
		return nil, false
	}
	n := math.Ceil((v[1] - v[0]) / v[2])
	if math.IsNaN(n) || n > 1<<62 {
		n = 1 << 62
	}
	return []int64{int64(math.Max(n, 0))}, true
}
