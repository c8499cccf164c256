//go:build cgo && !noort

package goengine

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand"
	"testing"

	gonnxproto "github.com/advancedclimatesystems/gonnx/onnx"
	"google.golang.org/protobuf/proto"

	"github.com/enclaveai/enclaveai/modelstore"
)

// node is a one-node model for the tests against ONNX Runtime: op at
// opset, its inputs graph inputs of the given types unless they are
// initializers (by name; "" leaves an optional input out), and outputs
// of the given types.
type node struct {
	op      string
	opset   int64
	attrs   []*gonnxproto.AttributeProto
	in      []string
	inTypes []gonnxproto.TensorProto_DataType // of the graph inputs, in order
	inits   []*gonnxproto.TensorProto
	out     []gonnxproto.TensorProto_DataType
}

// model is n's bytes.
func (n node) model(t *testing.T) []byte {
	t.Helper()
	g := &gonnxproto.GraphProto{Name: "g", Initializer: n.inits}
	nd := &gonnxproto.NodeProto{Name: "n", OpType: n.op, Input: n.in, Attribute: n.attrs}
	isInit := map[string]bool{"": true}
	for _, i := range n.inits {
		isInit[i.GetName()] = true
	}
	k := 0
	for _, name := range n.in {
		if !isInit[name] {
			g.Input = append(g.Input, valueInfo(name, n.inTypes[k]))
			k++
		}
	}
	for i, ty := range n.out {
		name := fmt.Sprintf("y%d", i)
		nd.Output = append(nd.Output, name)
		g.Output = append(g.Output, valueInfo(name, ty))
	}
	g.Node = []*gonnxproto.NodeProto{nd}
	b, err := proto.Marshal(&gonnxproto.ModelProto{IrVersion: 8, OpsetImport: []*gonnxproto.OperatorSetIdProto{{Version: n.opset}}, Graph: g})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// likeORT runs n on both engines with in and fails t unless every output
// has ONNX Runtime's type and shape, and its values: floats within rtol
// 1e-3 and atol 1e-4 (NaN where ONNX Runtime has NaN), others the same
// bytes.
func likeORT(t *testing.T, what string, n node, in ...*modelstore.Tensor) {
	t.Helper()
	ort, gos := compileBoth(t, n.model(t))
	want, got := runBoth(t, ort, gos, what, in)
	if len(got) != len(want) {
		t.Fatalf("%s: %d outputs, ORT %d", what, len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if g == nil || g.DType != w.DType || !equalShape(g.Shape, w.Shape) {
			t.Fatalf("%s output %d: %v, ORT %s %v", what, i, g, w.DType, w.Shape)
		}
		switch w.DType {
		case modelstore.Float, modelstore.Double:
			for k := range len(w.Data) / w.DType.Size() {
				a, b := floatAt(g, k), floatAt(w, k)
				if bothNaN := math.IsNaN(a) && math.IsNaN(b); !bothNaN && a != b && !(math.Abs(a-b) <= 1e-4+1e-3*math.Abs(b)) {
					t.Fatalf("%s output %d[%d]: %g, ORT %g", what, i, k, a, b)
				}
			}
		default:
			if !bytes.Equal(g.Data, w.Data) {
				t.Fatalf("%s output %d: %x, ORT %x", what, i, g.Data, w.Data)
			}
		}
	}
}

// floatAt is element k of a FLOAT or DOUBLE tensor.
func floatAt(t *modelstore.Tensor, k int) float64 {
	if t.DType == modelstore.Float {
		return float64(math.Float32frombits(binary.LittleEndian.Uint32(t.Data[4*k:])))
	}
	return math.Float64frombits(binary.LittleEndian.Uint64(t.Data[8*k:]))
}

// floatTensor is a FLOAT or DOUBLE tensor of shape whose elements are
// f(i).
func floatTensor(dt modelstore.DType, f func(i int) float64, shape ...int64) *modelstore.Tensor {
	t := &modelstore.Tensor{DType: dt, Shape: shape}
	for i := range int(modelstore.ShapeLen(shape)) {
		if dt == modelstore.Float {
			t.Data = binary.LittleEndian.AppendUint32(t.Data, math.Float32bits(float32(f(i))))
		} else {
			t.Data = binary.LittleEndian.AppendUint64(t.Data, math.Float64bits(f(i)))
		}
	}
	return t
}

// floatElems are FLOAT and DOUBLE.
var floatElems = []elemType{{gonnxproto.TensorProto_FLOAT, modelstore.Float}, {gonnxproto.TensorProto_DOUBLE, modelstore.Double}}

// shapes are the ranks the element-wise tests run, 1 to 4 (the server's
// ONNX Runtime binding reads no scalar outputs).
var shapes = [][]int64{{1}, {7}, {3, 5}, {2, 3, 4}, {2, 3, 4, 5}}

// Erf (FLOAT), Exp and Log (FLOAT, DOUBLE) give ONNX Runtime's outputs
// at every rank and at opsets 11 to 17, Log of 0 and of negative numbers
// (-inf, NaN) and Exp past FLOAT's range too; the pure-Go engine refused
// every model with one ("unsupported operator Erf"), so every BERT
// exported from PyTorch (its GELU).
func TestErfExpLogMatchONNXRuntime(t *testing.T) {
	requireORT(t)
	r := rand.New(rand.NewSource(20))
	for _, c := range []struct {
		op    string
		types []elemType
		value func() float64
	}{
		{"Erf", floatElems[:1], func() float64 { return r.NormFloat64() * 2 }},
		{"Exp", floatElems, func() float64 { return []float64{r.NormFloat64() * 5, 100, -200, 0}[r.Intn(4)] }},
		{"Log", floatElems, func() float64 { return []float64{r.ExpFloat64() * 10, 1e-30, 0, -1}[r.Intn(4)] }},
	} {
		for _, ty := range c.types {
			for v := int64(MinOpset); v <= MaxOpset; v++ {
				for _, s := range shapes {
					n := node{op: c.op, opset: v, in: []string{"x"}, inTypes: []gonnxproto.TensorProto_DataType{ty.elem}, out: []gonnxproto.TensorProto_DataType{ty.elem}}
					likeORT(t, fmt.Sprint(c.op, " ", ty.dt, " opset ", v, " ", s), n, floatTensor(ty.dt, func(int) float64 { return c.value() }, s...))
				}
			}
		}
	}
}
