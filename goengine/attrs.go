package goengine

import (
	gonnxproto "github.com/advancedclimatesystems/gonnx/onnx"
)

// The attribute types ONNX gives each operator the engine runs, over all
// its versions (no operator's attribute changed type between versions):
// TestAttributeTypesMatchTheSchemas checks the table against the onnx
// package's schemas, and opset 18's as gen_models.py lists them
// (redis_tests/models/onnx_versions.json). The
// operators' Init read an attribute by the type they expect, and one
// declared of another type read as zero: an ArgMax whose axis was FLOAT 1
// ran over axis 0, a HardSigmoid or Elu whose alpha was INT ran with
// alpha 0 (review). ONNX Runtime refuses such a model when it is stored
// ("Mismatched attribute type"), and so does checkAttributeTypes.
var attrTypes = map[string]map[string]gonnxproto.AttributeProto_AttributeType{
	"Abs":                   {"consumed_inputs": aInts},
	"Acos":                  {},
	"Acosh":                 {},
	"Add":                   {"axis": aInt, "broadcast": aInt, "consumed_inputs": aInts},
	"And":                   {"axis": aInt, "broadcast": aInt},
	"ArgMax":                {"axis": aInt, "keepdims": aInt, "select_last_index": aInt},
	"ArgMin":                {"axis": aInt, "keepdims": aInt, "select_last_index": aInt},
	"Asin":                  {},
	"Asinh":                 {},
	"Atan":                  {},
	"Atanh":                 {},
	"AveragePool":           {"auto_pad": aString, "ceil_mode": aInt, "count_include_pad": aInt, "kernel_shape": aInts, "pads": aInts, "strides": aInts},
	"BatchNormalization":    {"consumed_inputs": aInts, "epsilon": aFloat, "is_test": aInt, "momentum": aFloat, "spatial": aInt, "training_mode": aInt},
	"Cast":                  {"to": aInt},
	"Ceil":                  {"consumed_inputs": aInts},
	"Clip":                  {"consumed_inputs": aInts, "max": aFloat, "min": aFloat},
	"Concat":                {"axis": aInt},
	"Constant":              {"sparse_value": aSparse, "value": aTensor, "value_float": aFloat, "value_floats": aFloats, "value_int": aInt, "value_ints": aInts, "value_string": aString, "value_strings": aStrings},
	"ConstantOfShape":       {"value": aTensor},
	"Conv":                  {"auto_pad": aString, "dilations": aInts, "group": aInt, "kernel_shape": aInts, "pads": aInts, "strides": aInts},
	"ConvTranspose":         {"auto_pad": aString, "dilations": aInts, "group": aInt, "kernel_shape": aInts, "output_padding": aInts, "output_shape": aInts, "pads": aInts, "strides": aInts},
	"Cos":                   {},
	"Cosh":                  {},
	"CumSum":                {"exclusive": aInt, "reverse": aInt},
	"Div":                   {"axis": aInt, "broadcast": aInt, "consumed_inputs": aInts},
	"Dropout":               {"consumed_inputs": aInts, "is_test": aInt, "ratio": aFloat, "seed": aInt},
	"Elu":                   {"alpha": aFloat, "consumed_inputs": aInts},
	"Equal":                 {"axis": aInt, "broadcast": aInt},
	"Erf":                   {},
	"Exp":                   {"consumed_inputs": aInts},
	"Expand":                {},
	"Flatten":               {"axis": aInt},
	"Floor":                 {"consumed_inputs": aInts},
	"GRU":                   {"activation_alpha": aFloats, "activation_beta": aFloats, "activations": aStrings, "clip": aFloat, "direction": aString, "hidden_size": aInt, "layout": aInt, "linear_before_reset": aInt, "output_sequence": aInt},
	"Gather":                {"axis": aInt},
	"Gemm":                  {"alpha": aFloat, "beta": aFloat, "broadcast": aInt, "transA": aInt, "transB": aInt},
	"GlobalAveragePool":     {},
	"Greater":               {"axis": aInt, "broadcast": aInt},
	"GreaterOrEqual":        {},
	"HardSigmoid":           {"alpha": aFloat, "beta": aFloat, "consumed_inputs": aInts},
	"HardSwish":             {},
	"Identity":              {},
	"InstanceNormalization": {"consumed_inputs": aInts, "epsilon": aFloat},
	"LSTM":                  {"activation_alpha": aFloats, "activation_beta": aFloats, "activations": aStrings, "clip": aFloat, "direction": aString, "hidden_size": aInt, "input_forget": aInt, "layout": aInt, "output_sequence": aInt},
	"LayerNormalization":    {"axis": aInt, "epsilon": aFloat, "stash_type": aInt},
	"LeakyRelu":             {"alpha": aFloat, "consumed_inputs": aInts},
	"Less":                  {"axis": aInt, "broadcast": aInt},
	"LessOrEqual":           {},
	"Log":                   {"consumed_inputs": aInts},
	"LogSoftmax":            {"axis": aInt},
	"MatMul":                {},
	"Max":                   {"consumed_inputs": aInts},
	"MaxPool":               {"auto_pad": aString, "ceil_mode": aInt, "dilations": aInts, "kernel_shape": aInts, "pads": aInts, "storage_order": aInt, "strides": aInts},
	"Min":                   {"consumed_inputs": aInts},
	"Mul":                   {"axis": aInt, "broadcast": aInt, "consumed_inputs": aInts},
	"Neg":                   {"consumed_inputs": aInts},
	"Not":                   {},
	"Or":                    {"axis": aInt, "broadcast": aInt},
	"PRelu":                 {"consumed_inputs": aInts},
	"Pad":                   {"mode": aString, "paddings": aInts, "pads": aInts, "value": aFloat},
	"Pow":                   {"axis": aInt, "broadcast": aInt},
	"RNN":                   {"activation_alpha": aFloats, "activation_beta": aFloats, "activations": aStrings, "clip": aFloat, "direction": aString, "hidden_size": aInt, "layout": aInt, "output_sequence": aInt},
	"Range":                 {},
	"Reciprocal":            {"consumed_inputs": aInts},
	"ReduceMax":             {"axes": aInts, "keepdims": aInt, "noop_with_empty_axes": aInt},
	"ReduceMean":            {"axes": aInts, "keepdims": aInt, "noop_with_empty_axes": aInt},
	"ReduceMin":             {"axes": aInts, "keepdims": aInt, "noop_with_empty_axes": aInt},
	"ReduceSum":             {"axes": aInts, "keepdims": aInt, "noop_with_empty_axes": aInt},
	"Relu":                  {"consumed_inputs": aInts},
	"Reshape":               {"allowzero": aInt, "consumed_inputs": aInts, "shape": aInts},
	"Round":                 {},
	"Shape":                 {"end": aInt, "start": aInt},
	"Sigmoid":               {"consumed_inputs": aInts},
	"Sign":                  {},
	"Sin":                   {},
	"Sinh":                  {},
	"Slice":                 {"axes": aInts, "ends": aInts, "starts": aInts},
	"Softmax":               {"axis": aInt},
	"Softplus":              {},
	"Split":                 {"axis": aInt, "num_outputs": aInt, "split": aInts},
	"Sqrt":                  {"consumed_inputs": aInts},
	"Squeeze":               {"axes": aInts},
	"Sub":                   {"axis": aInt, "broadcast": aInt, "consumed_inputs": aInts},
	"Tan":                   {},
	"Tanh":                  {"consumed_inputs": aInts},
	"Tile":                  {},
	"Transpose":             {"perm": aInts},
	"Unsqueeze":             {"axes": aInts},
	"Where":                 {},
	"Xor":                   {"axis": aInt, "broadcast": aInt},
}

// The attribute types, short.
const (
	aInt     = gonnxproto.AttributeProto_INT
	aInts    = gonnxproto.AttributeProto_INTS
	aFloat   = gonnxproto.AttributeProto_FLOAT
	aFloats  = gonnxproto.AttributeProto_FLOATS
	aString  = gonnxproto.AttributeProto_STRING
	aStrings = gonnxproto.AttributeProto_STRINGS
	aTensor  = gonnxproto.AttributeProto_TENSOR
	aSparse  = gonnxproto.AttributeProto_SPARSE_TENSOR
)

// checkAttributeTypes refuses a node of g whose attribute ONNX defines
// for its operator is declared of another type (attrTypes). An attribute
// ONNX does not define for the operator is left to the operator's Init.
func checkAttributeTypes(g *gonnxproto.GraphProto) error {
	for _, n := range g.GetNode() {
		types := attrTypes[n.GetOpType()]
		for _, a := range n.GetAttribute() {
			if want, ok := types[a.GetName()]; ok && a.GetType() != want {
				return refuse("node %q (%s): attribute %s is %s, where ONNX defines it as %s", n.GetName(), n.GetOpType(), a.GetName(), a.GetType(), want)
			}
		}
	}
	return nil
}
