package goengine

import (
	"context"
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
		{"Dropout training_mode true", typedModel(t, "Dropout", 13, nil, []string{"x", "", "training"}, []gonnxproto.TensorProto_DataType{f32},
			[]*gonnxproto.TensorProto{{Name: "training", DataType: int32(gonnxproto.TensorProto_BOOL), Int32Data: []int32{1}}}, f32),
			`node "n" (Dropout): training_mode is true, and this engine does not train`},
		{"Dropout seed at opset 11", typedModel(t, "Dropout", 11, []*gonnxproto.AttributeProto{intAttr("seed", 1)}, []string{"x"}, []gonnxproto.TensorProto_DataType{f32}, nil, f32),
			"uses attribute seed before opset 12"},
		{"BatchNormalization training_mode 1", batchNormModel(t, 14, 1, intAttr("training_mode", 1)), "uses training_mode 1 (opset 14; this engine does not train)"},
		{"BatchNormalization training_mode at 13", batchNormModel(t, 13, 1, intAttr("training_mode", 0)), "uses attribute training_mode before opset 14"},
		{"BatchNormalization running statistics", batchNormModel(t, 15, 3), "3 outputs; this engine runs inference, of Y alone"},
		{"DOUBLE GlobalAveragePool", typedModel(t, "GlobalAveragePool", 13, nil, []string{"x"}, []gonnxproto.TensorProto_DataType{f64}, nil, f64),
			"which this engine's GlobalAveragePool does not take (FLOAT)"},
		{"ReduceSum axes attribute at 13", typedModel(t, "ReduceSum", 13, []*gonnxproto.AttributeProto{ints("axes", 1)}, []string{"x"}, []gonnxproto.TensorProto_DataType{f32}, nil, f32),
			"axes"},
		{"ReduceSum axes input at 11", typedModel(t, "ReduceSum", 11, nil, []string{"x", "a"}, []gonnxproto.TensorProto_DataType{f32, gonnxproto.TensorProto_INT64}, nil, f32),
			"uses other inputs than the data before opset 13"},
		{"UINT16 Max", typedModel(t, "Max", 13, nil, []string{"x"}, []gonnxproto.TensorProto_DataType{gonnxproto.TensorProto_UINT16}, nil, gonnxproto.TensorProto_UINT16),
			"which this engine's Max does not take"},
		{"Min of 65 inputs", typedModel(t, "Min", 13, nil, strings.Split(strings.Repeat("x,", 64)+"x", ","), []gonnxproto.TensorProto_DataType{f32}, nil, f32),
			"65 inputs, past this engine's bound of 64"},
	} {
		_, err := Engine{}.Compile(modelstore.ModelSource{Data: c.model}, modelstore.SessionOptions{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", c.what, err, c.want)
		}
	}
}

// batchNormModel is a BatchNormalization of FLOAT inputs at opset with
// outs outputs.
func batchNormModel(t *testing.T, opset int64, outs int, attrs ...*gonnxproto.AttributeProto) []byte {
	t.Helper()
	f := gonnxproto.TensorProto_FLOAT
	types := make([]gonnxproto.TensorProto_DataType, outs)
	for i := range types {
		types[i] = f
	}
	return typedModel(t, "BatchNormalization", opset, attrs, []string{"x", "s", "b", "m", "v"},
		[]gonnxproto.TensorProto_DataType{f, f, f, f, f}, nil, types...)
}

// A Dropout whose training_mode is fed true fails its run: this engine
// does not train.
func TestDropoutTrainingFails(t *testing.T) {
	f32 := gonnxproto.TensorProto_FLOAT
	model := typedModel(t, "Dropout", 13, nil, []string{"x", "", "training"}, []gonnxproto.TensorProto_DataType{f32, f32, gonnxproto.TensorProto_BOOL}, nil, f32)
	s, err := Engine{}.Compile(modelstore.ModelSource{Data: model}, modelstore.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	x := &modelstore.Tensor{DType: modelstore.Float, Shape: []int64{2}, Data: make([]byte, 8)}
	for _, c := range []struct {
		training byte
		want     string // "" runs
	}{{0, ""}, {1, "training_mode true: this engine does not train"}} {
		_, err := s.Run(context.Background(), []*modelstore.Tensor{x, {DType: modelstore.Bool, Shape: []int64{1}, Data: []byte{c.training}}})
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("training_mode %d: %v, want %q", c.training, err, c.want)
		}
	}
}

// The vision and classification operators refuse at AI.MODELSTORE, with
// an error naming it, the types ONNX Runtime's CPU provider has no kernel
// for, attributes of other versions than the model's, and what ONNX
// Runtime refuses itself (an AveragePool pad as large as its kernel).
func TestVisionOperatorsRefuse(t *testing.T) {
	const (
		f32 = gonnxproto.TensorProto_FLOAT
		f64 = gonnxproto.TensorProto_DOUBLE
		i32 = gonnxproto.TensorProto_INT32
		i64 = gonnxproto.TensorProto_INT64
	)
	one := func(op string, opset int64, ty gonnxproto.TensorProto_DataType, attrs ...*gonnxproto.AttributeProto) []byte {
		return typedModel(t, op, opset, attrs, []string{"x"}, []gonnxproto.TensorProto_DataType{ty}, nil, ty)
	}
	mode := func(m string) *gonnxproto.AttributeProto {
		return &gonnxproto.AttributeProto{Name: "mode", Type: gonnxproto.AttributeProto_STRING, S: []byte(m)}
	}
	for _, c := range []struct {
		what  string
		model []byte
		want  string
	}{
		{"DOUBLE HardSigmoid", one("HardSigmoid", 13, f64), "input 0 (x) is DOUBLE, which this engine's HardSigmoid does not take (FLOAT)"},
		{"DOUBLE Softplus", one("Softplus", 13, f64), "which this engine's Softplus does not take (FLOAT)"},
		{"DOUBLE Elu", one("Elu", 13, f64), "which this engine's Elu does not take (FLOAT)"},
		{"INT32 Floor", one("Floor", 13, i32), "which this engine's Floor does not take (FLOAT, DOUBLE)"},
		{"INT64 Round", one("Round", 13, i64), "which this engine's Round does not take (FLOAT, DOUBLE)"},
		{"BOOL Sign", one("Sign", 13, gonnxproto.TensorProto_BOOL), "which this engine's Sign does not take"},
		{"INT32 LogSoftmax", one("LogSoftmax", 13, i32), "which this engine's LogSoftmax does not take (FLOAT, DOUBLE)"},
		{"DOUBLE AveragePool", one("AveragePool", 13, f64, ints("kernel_shape", 2, 2)), "which this engine's AveragePool does not take (FLOAT)"},
		{"UINT16 ArgMax", one("ArgMax", 13, gonnxproto.TensorProto_UINT16), "which this engine's ArgMax does not take"},
		{"Elu with beta", one("Elu", 13, f32, &gonnxproto.AttributeProto{Name: "beta", Type: gonnxproto.AttributeProto_FLOAT, F: 1}), "beta"},
		{"HardSwish at 13", one("HardSwish", 13, f32), `node "n" (HardSwish): no such operator in the model's opset`},
		{"ArgMax select_last_index at 11", one("ArgMax", 11, f32, intAttr("select_last_index", 1)), "uses attribute select_last_index before opset 12"},
		{"AveragePool pads as large as the kernel", one("AveragePool", 13, f32, ints("kernel_shape", 2, 2), ints("pads", 2, 0, 0, 0)), "pads as large as the kernel"},
		{"AveragePool dilations", one("AveragePool", 13, f32, ints("kernel_shape", 2, 2), ints("dilations", 2, 2)), "dilations"},
		{"AveragePool without kernel_shape", one("AveragePool", 13, f32), "averagepool operator: kernel_shape is required"},
		{"AveragePool SAME_UPPER", one("AveragePool", 13, f32, ints("kernel_shape", 2, 2), &gonnxproto.AttributeProto{Name: "auto_pad", Type: gonnxproto.AttributeProto_STRING, S: []byte("SAME_UPPER")}), "auto_pad=SAME_UPPER"},
		{"Pad wrap", typedModel(t, "Pad", 13, []*gonnxproto.AttributeProto{mode("wrap")}, []string{"x", "p"}, []gonnxproto.TensorProto_DataType{f32, i64}, nil, f32), "mode=wrap"},
		{"Pad INT16", typedModel(t, "Pad", 13, nil, []string{"x", "p"}, []gonnxproto.TensorProto_DataType{gonnxproto.TensorProto_INT16, i64}, nil, gonnxproto.TensorProto_INT16), "which this engine's Pad does not take"},
	} {
		_, err := Engine{}.Compile(modelstore.ModelSource{Data: c.model}, modelstore.SessionOptions{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", c.what, err, c.want)
		}
	}
}

// Pad refuses at its run pads that do not match the input's rank or are
// not a list (of shape [2r] or [1, 2r], which it takes), that
// make a dimension of 0 or below, edge and reflect pads of an axis
// cropped whole, reflect pads as large as what is left of the axis (past
// which ONNX Runtime reads memory it never wrote), a constant_value of
// more than one element and an output past the memory bound, before it
// allocates, and (opset 18) axes out of range, not a list, or not matching
// the pads; none of them panics.
func TestPadRefuses(t *testing.T) {
	x := &modelstore.Tensor{DType: modelstore.Float, Shape: []int64{2, 3}, Data: make([]byte, 24)}
	for _, c := range []struct {
		mode      string
		pads      []int64
		value     *modelstore.Tensor
		want      string
		padsShape []int64 // when not a list
	}{
		{"constant", []int64{1, 1}, nil, "pads of shape (2) for an input of rank 2, where it takes 4", nil},
		{"constant", []int64{0, -2, 0, -1}, nil, "this engine makes no empty tensors", nil},
		{"constant", []int64{-1, 0, -1, 0}, nil, "this engine makes no empty tensors", nil},
		{"edge", []int64{0, -3, 0, 1}, nil, "crop all of it", nil},
		{"reflect", []int64{0, 3, 0, 0}, nil, "each must be less than the 3 elements they reflect", nil},
		{"reflect", []int64{0, 0, 0, 3}, nil, "each must be less than the 3 elements they reflect", nil},
		{"reflect", []int64{0, -1, 0, 2}, nil, "each must be less than the 2 elements they reflect", nil},
		{"reflect", []int64{0, -2, 0, 1}, nil, "each must be less than the 1 elements they reflect", nil},
		{"constant", []int64{0, 0, 0, 0}, &modelstore.Tensor{DType: modelstore.Float, Shape: []int64{2}, Data: make([]byte, 8)}, "constant_value is float32 of shape (2)", nil},
		{"constant", []int64{1 << 40, 0, 1 << 40, 0}, nil, "would make", nil},
		{"edge", []int64{1 << 62, 1 << 62, 1 << 62, 1 << 62}, nil, "would make", nil},
		// The count of pads, but not [4] or [1, 4], as ONNX Runtime refuses (review).
		{"constant", []int64{1, 1, 1, 1}, nil, "pads of shape (2, 2)", []int64{2, 2}},
		{"constant", []int64{1, 1, 1, 1}, nil, "pads of shape (1, 1, 4)", []int64{1, 1, 4}},
	} {
		pads := int64s(c.pads...)
		if c.padsShape != nil {
			pads.Shape = c.padsShape
		}
		in, feeds := []string{"x", "p"}, []*modelstore.Tensor{x, pads}
		types := []gonnxproto.TensorProto_DataType{gonnxproto.TensorProto_FLOAT, gonnxproto.TensorProto_INT64}
		if c.value != nil {
			in, feeds, types = append(in, "c"), append(feeds, c.value), append(types, gonnxproto.TensorProto_FLOAT)
		}
		model := typedModel(t, "Pad", 13, []*gonnxproto.AttributeProto{{Name: "mode", Type: gonnxproto.AttributeProto_STRING, S: []byte(c.mode)}},
			in, types, nil, gonnxproto.TensorProto_FLOAT)
		_, err := compileGo(t, model).Run(context.Background(), feeds)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %v: %v, want an error with %q", c.mode, c.pads, err, c.want)
		}
	}
	// Opset 18's axes: in range, a list, two pads for each.
	i64 := gonnxproto.TensorProto_INT64
	model := typedModel(t, "Pad", 18, nil, []string{"x", "p", "", "a"},
		[]gonnxproto.TensorProto_DataType{gonnxproto.TensorProto_FLOAT, i64, i64, i64}, nil, gonnxproto.TensorProto_FLOAT)
	matrix := int64s(0, 1)
	matrix.Shape = []int64{1, 2}
	for _, c := range []struct {
		pads, axes *modelstore.Tensor
		want       string
	}{
		{int64s(1, 1), int64s(2), "axis 2 of an input of rank 2"},
		{int64s(1, 1), int64s(-3), "axis -3 of an input of rank 2"},
		{int64s(1, 1, 1, 1), matrix, "axes of shape (1, 2), where it takes a list"},
		{int64s(1, 1, 1, 1), int64s(1), "pads of shape (4) for 1 axes, where it takes 2"},
	} {
		_, err := compileGo(t, model).Run(context.Background(), []*modelstore.Tensor{x, c.pads, c.axes})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("axes %v: %v, want an error with %q", c.axes, err, c.want)
		}
	}
}

// Slice refuses at its run a step of 0, an axis sliced twice or out of
// range, lists of different lengths and a slice of no elements; none of
// them panics.
func TestSliceRefuses(t *testing.T) {
	i64 := gonnxproto.TensorProto_INT64
	s := compileGo(t, typedModel(t, "Slice", 13, nil, []string{"x", "s", "e", "a", "p"},
		[]gonnxproto.TensorProto_DataType{gonnxproto.TensorProto_FLOAT, i64, i64, i64, i64}, nil, gonnxproto.TensorProto_FLOAT))
	x := &modelstore.Tensor{DType: modelstore.Float, Shape: []int64{2, 6}, Data: make([]byte, 48)}
	for _, c := range []struct {
		starts, ends, axes, steps []int64
		want                      string
	}{
		{[]int64{0}, []int64{2}, []int64{1}, []int64{0}, "a step of 0"},
		{[]int64{0, 0}, []int64{2, 2}, []int64{1, -1}, []int64{1, 1}, "axis 1 sliced twice"},
		{[]int64{0}, []int64{2}, []int64{2}, []int64{1}, "axis"},
		{[]int64{0, 0}, []int64{2}, []int64{0, 1}, []int64{1, 1}, "2 starts, 1 ends, 2 axes and 2 steps"},
		{[]int64{3}, []int64{3}, []int64{1}, []int64{1}, "no elements"},
		{[]int64{0}, []int64{5}, []int64{1}, []int64{-1}, "no elements"},
		{[]int64{-100}, []int64{-50}, []int64{1}, []int64{1}, "no elements"},
	} {
		_, err := s.Run(context.Background(), []*modelstore.Tensor{x, int64s(c.starts...), int64s(c.ends...), int64s(c.axes...), int64s(c.steps...)})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v %v %v %v: %v, want an error with %q", c.starts, c.ends, c.axes, c.steps, err, c.want)
		}
	}
}
