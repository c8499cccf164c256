package goengine

import (
	"fmt"
	"testing"

	gonnxproto "github.com/advancedclimatesystems/gonnx/onnx"
	"google.golang.org/protobuf/proto"

	"github.com/enclaveai/enclaveai/modelstore"
)

// oneNode is a model of one node at opset 13: inputs x (FLOAT, shape
// xShape) and the initializers (inputs 1, 2, ...), output y.
func oneNode(t *testing.T, op string, xShape []int64, inits []*modelstore.Tensor, attrs ...*gonnxproto.AttributeProto) []byte {
	t.Helper()
	names := []string{"x"}
	var initializers []*gonnxproto.TensorProto
	for i, v := range inits {
		name := fmt.Sprintf("init%d", i)
		names = append(names, name)
		initializers = append(initializers, &gonnxproto.TensorProto{Name: name, Dims: v.Shape,
			DataType: int32(gonnxproto.TensorProto_FLOAT), RawData: v.Data})
	}
	dims := func(shape []int64) *gonnxproto.TensorShapeProto {
		s := &gonnxproto.TensorShapeProto{}
		for _, d := range shape {
			s.Dim = append(s.Dim, &gonnxproto.TensorShapeProto_Dimension{Value: &gonnxproto.TensorShapeProto_Dimension_DimValue{DimValue: d}})
		}
		return s
	}
	vi := func(name string, shape []int64) *gonnxproto.ValueInfoProto {
		tt := &gonnxproto.TypeProto_Tensor{ElemType: int32(gonnxproto.TensorProto_FLOAT)}
		if shape != nil {
			tt.Shape = dims(shape)
		}
		return &gonnxproto.ValueInfoProto{Name: name, Type: &gonnxproto.TypeProto{Value: &gonnxproto.TypeProto_TensorType{TensorType: tt}}}
	}
	m := &gonnxproto.ModelProto{IrVersion: 8, OpsetImport: []*gonnxproto.OperatorSetIdProto{{Version: 13}},
		Graph: &gonnxproto.GraphProto{Name: "one", Initializer: initializers,
			Node:   []*gonnxproto.NodeProto{{OpType: op, Input: names, Output: []string{"y"}, Attribute: attrs}},
			Input:  []*gonnxproto.ValueInfoProto{vi("x", xShape)},
			Output: []*gonnxproto.ValueInfoProto{vi("y", nil)}}}
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func ints(name string, v ...int64) *gonnxproto.AttributeProto {
	return &gonnxproto.AttributeProto{Name: name, Type: gonnxproto.AttributeProto_INTS, Ints: v}
}

func intAttr(name string, v int64) *gonnxproto.AttributeProto {
	return &gonnxproto.AttributeProto{Name: name, Type: gonnxproto.AttributeProto_INT, I: v}
}

// chain is a model of n nodes of op at opset 13, each taking the one
// before's output: input x (FLOAT, shape xShape), output y.
func chain(t *testing.T, op string, xShape []int64, n int) []byte {
	t.Helper()
	vi := func(name string, shape []int64) *gonnxproto.ValueInfoProto {
		tt := &gonnxproto.TypeProto_Tensor{ElemType: int32(gonnxproto.TensorProto_FLOAT), Shape: &gonnxproto.TensorShapeProto{}}
		for _, d := range shape {
			tt.Shape.Dim = append(tt.Shape.Dim, &gonnxproto.TensorShapeProto_Dimension{Value: &gonnxproto.TensorShapeProto_Dimension_DimValue{DimValue: d}})
		}
		return &gonnxproto.ValueInfoProto{Name: name, Type: &gonnxproto.TypeProto{Value: &gonnxproto.TypeProto_TensorType{TensorType: tt}}}
	}
	var nodes []*gonnxproto.NodeProto
	prev := "x"
	for i := range n {
		out := fmt.Sprintf("t%d", i)
		if i == n-1 {
			out = "y"
		}
		nodes = append(nodes, &gonnxproto.NodeProto{OpType: op, Input: []string{prev}, Output: []string{out}})
		prev = out
	}
	m := &gonnxproto.ModelProto{IrVersion: 8, OpsetImport: []*gonnxproto.OperatorSetIdProto{{Version: 13}},
		Graph: &gonnxproto.GraphProto{Name: "chain", Node: nodes,
			Input: []*gonnxproto.ValueInfoProto{vi("x", xShape)}, Output: []*gonnxproto.ValueInfoProto{vi("y", xShape)}}}
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
