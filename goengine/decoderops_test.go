package goengine

import (
	"context"
	"strings"
	"testing"
	"time"

	gonnxproto "github.com/advancedclimatesystems/gonnx/onnx"

	"github.com/enclaveai/enclaveai/modelstore"
)

// The decoder operators refuse at AI.MODELSTORE, with an error naming
// it, the types ONNX Runtime's CPU provider has no kernel for and what
// this engine does not implement.
func TestDecoderOperatorsRefuse(t *testing.T) {
	const (
		f32 = gonnxproto.TensorProto_FLOAT
		f64 = gonnxproto.TensorProto_DOUBLE
		i64 = gonnxproto.TensorProto_INT64
	)
	str := func(name, v string) *gonnxproto.AttributeProto {
		return &gonnxproto.AttributeProto{Name: name, Type: gonnxproto.AttributeProto_STRING, S: []byte(v)}
	}
	convT := func(ty gonnxproto.TensorProto_DataType, attrs ...*gonnxproto.AttributeProto) []byte {
		return typedModel(t, "ConvTranspose", 13, attrs, []string{"x", "w"}, []gonnxproto.TensorProto_DataType{ty, ty}, nil, ty)
	}
	instNorm := func(ty gonnxproto.TensorProto_DataType, attrs ...*gonnxproto.AttributeProto) []byte {
		return typedModel(t, "InstanceNormalization", 13, attrs, []string{"x", "s", "b"}, []gonnxproto.TensorProto_DataType{ty, ty, ty}, nil, ty)
	}
	cumSum := func(ty, axis gonnxproto.TensorProto_DataType, attrs ...*gonnxproto.AttributeProto) []byte {
		return typedModel(t, "CumSum", 13, attrs, []string{"x", "axis"}, []gonnxproto.TensorProto_DataType{ty, axis}, nil, ty)
	}
	for _, c := range []struct {
		what  string
		model []byte
		want  string
	}{
		{"DOUBLE ConvTranspose", convT(f64), "input 0 (x) is DOUBLE, which this engine's ConvTranspose does not take (FLOAT)"},
		{"ConvTranspose auto_pad FOO", convT(f32, str("auto_pad", "FOO")), "auto_pad=FOO"},
		{"ConvTranspose pads and auto_pad", convT(f32, str("auto_pad", "SAME_UPPER"), ints("pads", 1, 1, 1, 1)), "pads with auto_pad=SAME_UPPER"},
		{"ConvTranspose output_padding 2^40", convT(f32, ints("output_padding", 1<<40, 0)), "output_padding (each must be in [0, 2^31], not 1099511627776)"},
		{"ConvTranspose output_shape 2^40", convT(f32, ints("output_shape", 1<<40, 4)), "output_shape (each must be in [1, 2^31], not 1099511627776)"},
		{"ConvTranspose group 2^40", convT(f32, intAttr("group", 1<<40)), "group (it must be in [1, 2^31])"},
		{"ConvTranspose with an attribute of another operator", convT(f32, intAttr("ceil_mode", 1)), "ceil_mode"},
		{"ConvTranspose of 2 outputs", typedModel(t, "ConvTranspose", 13, nil, []string{"x", "w"}, []gonnxproto.TensorProto_DataType{f32, f32}, nil, f32, f32),
			"2 outputs, where it has 1"},
		{"DOUBLE InstanceNormalization", instNorm(f64), "input 0 (x) is DOUBLE, which this engine's InstanceNormalization does not take (FLOAT)"},
		{"InstanceNormalization consumed_inputs", instNorm(f32, ints("consumed_inputs", 0)), "consumed_inputs"},
		{"UINT32 CumSum", cumSum(gonnxproto.TensorProto_UINT32, i64), "input 0 (x) is UINT32, which this engine's CumSum does not take (FLOAT, DOUBLE, INT32, INT64)"},
		{"CumSum of a FLOAT axis", cumSum(f32, f32), "input 1 (axis) is FLOAT, which this engine's CumSum does not take (INT32, INT64)"},
		{"CumSum exclusive 2", cumSum(f32, i64, intAttr("exclusive", 2)), "exclusive 2 (it is 0 or 1)"},
		{"CumSum reverse -1", cumSum(f32, i64, intAttr("reverse", -1)), "reverse -1 (it is 0 or 1)"},
		{"CumSum axis attribute", cumSum(f32, i64, intAttr("axis", 0)), "axis"},
	} {
		_, err := Engine{}.Compile(modelstore.ModelSource{Data: c.model}, modelstore.SessionOptions{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", c.what, err, c.want)
		}
	}
}

// ConvTranspose refuses at its run, before it allocates, shapes that do
// not fit each other or its attributes, pads that crop the whole output
// and an output past the memory bound (strides of 2^20, output_padding
// and output_shape of 2^31); none of them panics.
func TestConvTransposeRefuses(t *testing.T) {
	f32 := gonnxproto.TensorProto_FLOAT
	for _, c := range []struct {
		attrs []*gonnxproto.AttributeProto
		x, w  *modelstore.Tensor
		b     *modelstore.Tensor // nil: none
		want  string
	}{
		{nil, floatT(1, 2), floatT(2, 3), nil, "X of shape (1, 2); it takes N x C x D1 x ..."},
		{nil, floatT(1, 2, 4, 4), floatT(2, 3, 3), nil, "W of shape (2, 3, 3) for X of shape (1, 2, 4, 4): their ranks differ"},
		{nil, floatT(1, 2, 4, 4), floatT(3, 3, 3, 3), nil, "W's first dimension must be X's channels"},
		{[]*gonnxproto.AttributeProto{intAttr("group", 3)}, floatT(1, 2, 4, 4), floatT(2, 3, 3, 3), nil, "group 3 does not divide X's 2 channels"},
		{[]*gonnxproto.AttributeProto{ints("kernel_shape", 2, 2)}, floatT(1, 2, 4, 4), floatT(2, 3, 3, 3), nil, "kernel_shape [2 2], but W has shape (2, 3, 3, 3)"},
		{[]*gonnxproto.AttributeProto{ints("strides", 2)}, floatT(1, 2, 4, 4), floatT(2, 3, 3, 3), nil, "strides has 1 entries for 2 spatial axes"},
		{[]*gonnxproto.AttributeProto{ints("pads", 3, 3, 3, 3)}, floatT(1, 2, 2, 2), floatT(2, 3, 3, 3), nil, "an output of -2 elements along spatial axis 0: the pads crop all of it"},
		{[]*gonnxproto.AttributeProto{intAttr("group", 2)}, floatT(1, 2, 4, 4), floatT(2, 3, 3, 3), floatT(3), "B of shape (3), where it takes the 6 output channels"},
		{[]*gonnxproto.AttributeProto{ints("strides", 1<<20, 1<<20)}, floatT(1, 1, 4, 4), floatT(1, 1, 1, 1), nil, "ConvTranspose would make a tensor of 9895610941441 elements"},
		{[]*gonnxproto.AttributeProto{ints("output_padding", 1<<31, 1<<31)}, floatT(1, 1, 1, 1), floatT(1, 1, 1, 1), nil, "ConvTranspose would make a tensor of 4611686022722355201 elements"},
		{[]*gonnxproto.AttributeProto{ints("output_shape", 1<<31, 1<<31)}, floatT(1, 1, 1, 1), floatT(1, 1, 1, 1), nil, "ConvTranspose would make a tensor of 4611686018427387904 elements"},
	} {
		in, feeds := []string{"x", "w"}, []*modelstore.Tensor{c.x, c.w}
		if c.b != nil {
			in, feeds = append(in, "b"), append(feeds, c.b)
		}
		model := typedModel(t, "ConvTranspose", 13, c.attrs, in, []gonnxproto.TensorProto_DataType{f32, f32, f32}, nil, f32)
		_, err := compileGo(t, model).Run(context.Background(), feeds)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v x %v w %v: %v, want an error with %q", c.attrs, c.x.Shape, c.w.Shape, err, c.want)
		}
	}
}

// InstanceNormalization refuses at its run an input of fewer than 3
// dimensions and a scale or B of another shape than [C]; none of them
// panics.
func TestInstanceNormalizationRefuses(t *testing.T) {
	f32 := gonnxproto.TensorProto_FLOAT
	s := compileGo(t, typedModel(t, "InstanceNormalization", 13, nil, []string{"x", "s", "b"}, []gonnxproto.TensorProto_DataType{f32, f32, f32}, nil, f32))
	for _, c := range []struct {
		x, scale, b *modelstore.Tensor
		want        string
	}{
		{floatT(2, 3), floatT(3), floatT(3), "input of shape (2, 3); it takes N x C x D1 x ..."},
		{floatT(2, 3, 4), floatT(2), floatT(3), "input 1 has shape (2), not [3] (X's channels)"},
		{floatT(2, 3, 4), floatT(3), floatT(1, 3), "input 2 has shape (1, 3), not [3] (X's channels)"},
	} {
		_, err := s.Run(context.Background(), []*modelstore.Tensor{c.x, c.scale, c.b})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("x %v scale %v b %v: %v, want an error with %q", c.x.Shape, c.scale.Shape, c.b.Shape, err, c.want)
		}
	}
}

// CumSum refuses at its run a scalar input, an axis out of range and an
// axis of other than one element; none of them panics.
func TestCumSumRefuses(t *testing.T) {
	s := compileGo(t, typedModel(t, "CumSum", 13, nil, []string{"x", "axis"},
		[]gonnxproto.TensorProto_DataType{gonnxproto.TensorProto_FLOAT, gonnxproto.TensorProto_INT64}, nil, gonnxproto.TensorProto_FLOAT))
	scalarAxis := func(v int64) *modelstore.Tensor { a := int64s(v); a.Shape = []int64{}; return a }
	for _, c := range []struct {
		x, axis *modelstore.Tensor
		want    string
	}{
		{floatT(), scalarAxis(0), "a scalar input: there is no axis to sum along"},
		{floatT(2, 3), scalarAxis(2), "axis out of range"},
		{floatT(2, 3), scalarAxis(-3), "axis out of range"},
		{floatT(2, 3), int64s(0, 1), "axis of shape (2), where it takes one element"},
		{floatT(2, 3), &modelstore.Tensor{DType: modelstore.Int64, Shape: []int64{1, 1}, Data: make([]byte, 8)}, "axis of shape (1, 1), where it takes one element"},
	} {
		_, err := s.Run(context.Background(), []*modelstore.Tensor{c.x, c.axis})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("x %v axis %v: %v, want an error with %q", c.x.Shape, c.axis.Shape, err, c.want)
		}
	}
}

// A ConvTranspose whose every input plane is one element does a tap, a
// row and a multiply-add for each pair of channels: counted as the
// multiply-add alone, [300, 300, 1] by [300, 300, 1] (2.7e7 of them) was
// let run with 50 ms left and took about 0.45 s here, nine times the
// deadline where workFactor allows four. Counted with its taps and rows
// (tapWork, rowWork), it is refused at once; given the time, it runs.
func TestConvTransposeWorkCountsTaps(t *testing.T) {
	workRate() // measured now, not inside the run
	m := oneNode(t, "ConvTranspose", []int64{300, 300, 1}, []*modelstore.Tensor{floatT(300, 300, 1)})
	s, err := Engine{}.Compile(modelstore.ModelSource{Data: m}, modelstore.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	run := func(left time.Duration) (time.Duration, error) {
		ctx, cancel := context.WithTimeout(context.Background(), left)
		defer cancel()
		start := time.Now()
		_, err := s.Run(ctx, []*modelstore.Tensor{floatT(300, 300, 1)})
		return time.Since(start), err
	}
	took, err := run(50 * time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "ConvTranspose would do") {
		t.Fatalf("with 50 ms left: %v after %v, want the work refused", err, took)
	}
	if took > 50*time.Millisecond {
		t.Errorf("refused after %v: it should not have started", took)
	}
	if took, err := run(time.Minute); err != nil {
		t.Errorf("with a minute left: %v after %v", err, took)
	}
}
