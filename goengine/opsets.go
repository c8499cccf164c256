package goengine

import gonnxproto "github.com/advancedclimatesystems/gonnx/onnx"

// The engine's operators are opset 13's (gonnx's, and ours in ops.go). A
// model that imports a later opset of the default domain names, for each
// node, the operator's latest version at or below that opset, which is
// what ONNX Runtime runs; up to MaxOpset, every operator the engine has
// either kept its opset-13 definition or gained versions whose changes
// are types (checked against each operator's own list, as at opset 13) or
// one attribute or input that laterRules checks on the node. PyTorch
// exports at opset 14 to 17 (17 by default since 2.0), so the enclave
// build refused its models though nothing it runs differs there.
//
// The versions were read from the ONNX operator schemas (onnx 1.12,
// onnx.defs.get_schema over the engine's operators and opsets 14 to 17);
// TestLaterRulesCoverTheSchemas checks the table against ONNX Runtime.
const (
	// MinOpset is the oldest default-domain opset the engine runs:
	// before 13 some operators differ (Softmax's axis, Squeeze's and
	// Unsqueeze's axes as an attribute, Split's sizes).
	MinOpset = 13
	// MaxOpset is the newest: at 18 the Reduce operators take their axes
	// as an input, and Split and Pad change.
	MaxOpset = 17
)

// laterRule is one operator's versions after 13 up to MaxOpset, and what a
// node of the operator must not use when the model's opset reaches them:
// check returns why the engine cannot run the node, or "" when it can.
// (Only the first version matters to the checks; the others are listed
// as the schemas have them.)
type laterRule struct {
	since []int64 // the versions, ascending
	check func(n *gonnxproto.NodeProto) string
	// layout: a recurrent operator, whose layout of 0 is dropped.
	layout bool
}

// typesAt is the rule of versions whose changes are types: the operator's
// type list refuses those the engine lacks (wrongType), as at opset 13.
func typesAt(since ...int64) laterRule {
	return laterRule{since: since, check: func(*gonnxproto.NodeProto) string { return "" }}
}

// laterRules holds every operator the engine has that has a version after
// 13 up to MaxOpset. An operator missing here kept its opset-13 version.
var laterRules = map[string]laterRule{
	// 14: UINT8, INT8, UINT16, INT16, BFLOAT16.
	"Add": typesAt(14),
	"Sub": typesAt(14),
	"Mul": typesAt(14),
	"Div": typesAt(14),
	// 14: the integer types and BFLOAT16.
	"Relu": typesAt(14),
	// 14 and 16: optional and sequence values, which no model here has.
	"Identity": typesAt(14, 16),
	// 15 and 16: BFLOAT16.
	"Pow":            typesAt(15),
	"PRelu":          typesAt(16),
	"Where":          typesAt(16),
	"GreaterOrEqual": typesAt(16),
	"LessOrEqual":    typesAt(16),
	// 14: allowzero, where a 0 in the shape means a dimension of 0
	// rather than the input's own.
	"Reshape": {since: []int64{14}, check: func(n *gonnxproto.NodeProto) string {
		if attrInt(n, "allowzero", 0) != 0 {
			return "allowzero 1 (opset 14)"
		}
		return ""
	}},
	// 15: start and end, a slice of the shape.
	"Shape": {since: []int64{15}, check: func(n *gonnxproto.NodeProto) string {
		for _, a := range n.GetAttribute() {
			if a.GetName() == "start" || a.GetName() == "end" {
				return "attribute " + a.GetName() + " (opset 15)"
			}
		}
		return ""
	}},
	// 14: layout, batch first when 1. A layout of 0 is opset 13's, and
	// is dropped (laterVersions) since the operators refuse attributes
	// they do not know.
	"RNN":  {since: []int64{14}, check: layoutZero, layout: true},
	"GRU":  {since: []int64{14}, check: layoutZero, layout: true},
	"LSTM": {since: []int64{14}, check: layoutZero, layout: true},
	// 17: new in the default domain (ONNX Runtime also has it there from
	// version 1, as a contrib operator of its own, so it runs at 13 too).
	"LayerNormalization": typesAt(17),
}

func layoutZero(n *gonnxproto.NodeProto) string {
	if attrInt(n, "layout", 0) != 0 {
		return "layout 1 (opset 14)"
	}
	return ""
}

// attrInt is n's integer attribute name, or def when n has none.
func attrInt(n *gonnxproto.NodeProto, name string, def int64) int64 {
	for _, a := range n.GetAttribute() {
		if a.GetName() == name {
			return a.GetI()
		}
	}
	return def
}

// laterVersions refuses the nodes that use what their operator's later
// versions added (before those versions the attribute is unknown, which
// ONNX Runtime refuses too; gonnx's Reshape and Shape ignore it), and
// drops a layout of 0 from the recurrent operators of a model whose opset
// has it (opset 13's meaning, which their Init refuses by name).
func laterVersions(g *gonnxproto.GraphProto, opset int64) error {
	for _, n := range g.GetNode() {
		r, ok := laterRules[n.GetOpType()]
		if !ok {
			continue
		}
		if why := r.check(n); why != "" {
			return refuse("node %q (%s) uses %s, which this engine does not run (inference-engine onnxruntime does)", n.GetName(), n.GetOpType(), why)
		}
		if r.layout && r.since[0] <= opset {
			n.Attribute = dropAttr(n.GetAttribute(), "layout")
		}
	}
	return nil
}

// dropAttr is attrs without the one named name.
func dropAttr(attrs []*gonnxproto.AttributeProto, name string) []*gonnxproto.AttributeProto {
	out := attrs[:0:0]
	for _, a := range attrs {
		if a.GetName() != name {
			out = append(out, a)
		}
	}
	return out
}

// defaultOpset is the version of the default domain's opset that mp
// imports, or an error when the engine does not run it.
func defaultOpset(mp *gonnxproto.ModelProto) (int64, error) {
	var v int64
	found := false
	for _, o := range mp.GetOpsetImport() {
		if o.GetDomain() != "" && o.GetDomain() != "ai.onnx" {
			continue
		}
		if found && o.GetVersion() != v {
			return 0, refuse("the model imports ONNX opsets %d and %d", v, o.GetVersion())
		}
		v, found = o.GetVersion(), true
	}
	if !found {
		return 0, refuse("the model imports no ONNX opset")
	}
	if v < MinOpset || v > MaxOpset {
		return 0, refuse("the model imports ONNX opset %d; this engine runs opsets %d to %d", v, MinOpset, MaxOpset)
	}
	return v, nil
}

// forGonnx is mp as gonnx's NewModel takes it: importing opset 13, the
// one it has (the engine's getOperator then serves every node).
func forGonnx(mp *gonnxproto.ModelProto) *gonnxproto.ModelProto {
	return &gonnxproto.ModelProto{IrVersion: mp.GetIrVersion(), Graph: mp.Graph,
		OpsetImport: []*gonnxproto.OperatorSetIdProto{{Version: 13}}}
}
