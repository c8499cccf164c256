package goengine

import (
	"strings"
	"testing"

	gonnxproto "github.com/advancedclimatesystems/gonnx/onnx"
	"google.golang.org/protobuf/proto"

	"github.com/enclaveai/enclaveai/modelstore"
)

// typedModel is a one-node model of op at opset: graph inputs of the
// given names and types (with inits for the initializers among them),
// outputs y0, y1, ... of the types outs.
func typedModel(t *testing.T, op string, opset int64, attrs []*gonnxproto.AttributeProto, in []string, types []gonnxproto.TensorProto_DataType,
	inits []*gonnxproto.TensorProto, outs ...gonnxproto.TensorProto_DataType) []byte {
	t.Helper()
	n := &gonnxproto.NodeProto{Name: "n", OpType: op, Input: in, Attribute: attrs}
	g := &gonnxproto.GraphProto{Name: "g", Node: []*gonnxproto.NodeProto{n}, Initializer: inits}
	for i, name := range in {
		if name != "" && i < len(types) {
			g.Input = append(g.Input, valueInfo(name, types[i]))
		}
	}
	for i, ty := range outs {
		name := "y" + string(rune('0'+i))
		n.Output = append(n.Output, name)
		g.Output = append(g.Output, valueInfo(name, ty))
	}
	b, err := proto.Marshal(&gonnxproto.ModelProto{IrVersion: 8, OpsetImport: []*gonnxproto.OperatorSetIdProto{{Version: opset}}, Graph: g})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The operators added for published models refuse at AI.MODELSTORE, with
// an error naming it, what ONNX Runtime's CPU provider has no kernel
// for, and what this engine does not implement.
func TestNewOperatorsRefuse(t *testing.T) {
	const (
		f32 = gonnxproto.TensorProto_FLOAT
		f64 = gonnxproto.TensorProto_DOUBLE
		i32 = gonnxproto.TensorProto_INT32
	)
	for _, c := range []struct {
		what  string
		model []byte
		want  string
	}{
		{"DOUBLE Erf", typedModel(t, "Erf", 13, nil, []string{"x"}, []gonnxproto.TensorProto_DataType{f64}, nil, f64),
			"input 0 (x) is DOUBLE, which this engine's Erf does not take (FLOAT)"},
		{"INT32 Exp", typedModel(t, "Exp", 13, nil, []string{"x"}, []gonnxproto.TensorProto_DataType{i32}, nil, i32),
			"input 0 (x) is INT32, which this engine's Exp does not take (FLOAT, DOUBLE)"},
		{"Log with an attribute", typedModel(t, "Log", 13, []*gonnxproto.AttributeProto{intAttr("axis", 1)}, []string{"x"}, []gonnxproto.TensorProto_DataType{f32}, nil, f32),
			"axis"},
	} {
		_, err := Engine{}.Compile(modelstore.ModelSource{Data: c.model}, modelstore.SessionOptions{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", c.what, err, c.want)
		}
	}
}
