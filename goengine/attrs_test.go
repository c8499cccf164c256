package goengine

import (
	"maps"
	"slices"
	"strings"
	"testing"

	gonnxproto "github.com/advancedclimatesystems/gonnx/onnx"
	"github.com/advancedclimatesystems/gonnx/ops/opset13"

	"github.com/enclaveai/enclaveai/modelstore"
)

// attrTypes holds, for every operator the engine has, exactly the
// attributes and types the ONNX schemas give it over all its versions
// (redis_tests/models/onnx_versions.json, written by gen_models.py from
// the onnx package).
func TestAttributeTypesMatchTheSchemas(t *testing.T) {
	doc := readSchemas(t)
	if len(doc.Attributes) == 0 {
		t.Fatal("onnx_versions.json has no attributes (run `make models`)")
	}
	names := append(opset13.GetOpNames(), slices.Collect(maps.Keys(extraOps))...)
	for _, name := range names {
		if doc.Versions[name] == nil {
			continue // gonnx's operators of ai.onnx.ml, which the engine refuses (checkModel)
		}
		want := map[string]string{}
		maps.Copy(want, doc.Attributes[name])
		got := map[string]string{}
		for a, ty := range attrTypes[name] {
			got[a] = ty.String()
		}
		if _, ok := attrTypes[name]; !ok {
			t.Errorf("%s: not in attrTypes", name)
		} else if !maps.Equal(got, want) {
			t.Errorf("%s: attrTypes has %v, the schemas %v", name, got, want)
		}
	}
	for name := range attrTypes {
		if !Supported(name) || doc.Versions[name] == nil {
			t.Errorf("attrTypes has %s, which the engine does not run", name)
		}
	}
}

// An attribute declared of another type than ONNX defines is refused at
// compile, as ONNX Runtime refuses it: the operators read it as zero (an
// ArgMax whose axis was FLOAT 1 ran over axis 0, review). An attribute
// ONNX does not define is left to the operator.
func TestAttributeOfAnotherTypeIsRefused(t *testing.T) {
	f32 := gonnxproto.TensorProto_FLOAT
	one := func(op string, attrs ...*gonnxproto.AttributeProto) []byte {
		return typedModel(t, op, 13, attrs, []string{"x"}, []gonnxproto.TensorProto_DataType{f32}, nil, f32)
	}
	floatAttr := func(name string, v float32) *gonnxproto.AttributeProto {
		return &gonnxproto.AttributeProto{Name: name, Type: gonnxproto.AttributeProto_FLOAT, F: v}
	}
	for _, c := range []struct {
		what  string
		model []byte
		want  string
	}{
		{"ArgMax axis FLOAT", one("ArgMax", floatAttr("axis", 1)), `node "n" (ArgMax): attribute axis is FLOAT, where ONNX defines it as INT`},
		{"HardSigmoid alpha INT", one("HardSigmoid", intAttr("alpha", 1)), "attribute alpha is INT, where ONNX defines it as FLOAT"},
		{"Elu alpha INT", one("Elu", intAttr("alpha", 2)), "attribute alpha is INT, where ONNX defines it as FLOAT"},
		{"AveragePool count_include_pad FLOAT", one("AveragePool", ints("kernel_shape", 2, 2), floatAttr("count_include_pad", 1)), "attribute count_include_pad is FLOAT"},
		{"AveragePool kernel_shape INT", one("AveragePool", intAttr("kernel_shape", 2)), "attribute kernel_shape is INT, where ONNX defines it as INTS"},
	} {
		_, err := Engine{}.Compile(modelstore.ModelSource{Data: c.model}, modelstore.SessionOptions{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", c.what, err, c.want)
		}
	}
	// The right types compile.
	compileGo(t, one("ArgMax", intAttr("axis", 1)))
	compileGo(t, one("HardSigmoid", floatAttr("alpha", 0.5)))
}
