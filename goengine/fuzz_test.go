package goengine

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	gonnxproto "github.com/advancedclimatesystems/gonnx/onnx"
	"google.golang.org/protobuf/proto"

	"github.com/enclaveai/enclaveai/modelstore"
)

// FuzzGoEngine feeds the engine model bytes and input shapes: whatever
// they are, Compile and Run return (a result or an error) and never panic,
// since in the enclave build the engine runs in the server's own process.
// The seeds are one-node models of operators the engine has and the test
// models of `make models`; `make fuzz` runs it.
func FuzzGoEngine(f *testing.F) {
	t := &testing.T{}
	w := func(shape ...int64) *modelstore.Tensor {
		n := int64(1)
		for _, d := range shape {
			n *= d
		}
		return &modelstore.Tensor{DType: modelstore.Float, Shape: shape, Data: make([]byte, 4*n)}
	}
	seeds := [][]byte{
		oneNode(t, "Add", []int64{2, 3}, []*modelstore.Tensor{w(3)}),
		oneNode(t, "MatMul", []int64{2, 3}, []*modelstore.Tensor{w(3, 4)}),
		oneNode(t, "Gemm", []int64{2, 3}, []*modelstore.Tensor{w(3, 4), w(4)}),
		oneNode(t, "Conv", []int64{1, 1, 4, 4}, []*modelstore.Tensor{w(1, 1, 3, 3)}, ints("kernel_shape", 3, 3)),
		oneNode(t, "MaxPool", []int64{1, 1, 4, 4}, nil, ints("kernel_shape", 2, 2), ints("strides", 2, 2)),
		oneNode(t, "Softmax", []int64{2, 3}, nil, intAttr("axis", 1)),
		oneNode(t, "Transpose", []int64{2, 3}, nil, ints("perm", 1, 0)),
		oneNode(t, "ReduceMean", []int64{2, 3}, nil, ints("axes", 1)),
		oneNode(t, "Relu", []int64{2, 3}, nil),
	}
	for _, name := range []string{"linear.onnx", "mlp.onnx", "cnn.onnx"} {
		if b, err := os.ReadFile(filepath.Join("..", "redis_tests", "models", name)); err == nil {
			seeds = append(seeds, b)
		}
	}
	for _, s := range seeds {
		f.Add(s, []byte{2, 3})
		f.Add(s, []byte{1, 1, 4, 4})
	}
	f.Fuzz(func(t *testing.T, model, dims []byte) {
		if len(model) > 1<<20 {
			return
		}
		stuck := time.AfterFunc(5*time.Second, func() { panic("FuzzGoEngine: Compile or Run ran past 5 s") })
		defer stuck.Stop()
		s, err := Engine{}.Compile(modelstore.ModelSource{Data: model}, modelstore.SessionOptions{})
		if err != nil {
			return
		}
		defer s.Close()
		// Each input gets the fuzzed shape, or its declared one where the
		// fuzzed one is empty; at most 4096 elements, counted as the
		// dimensions come so that the count cannot wrap (22 fuzzed
		// dimensions of up to 16 did, and make panicked).
		var inputs []*modelstore.Tensor
		for _, in := range s.Inputs() {
			shape := make([]int64, 0, len(dims))
			for _, d := range dims {
				shape = append(shape, int64(d%17))
			}
			if len(dims) == 0 {
				shape = nil
				for _, d := range in.Shape {
					if d < 0 {
						d = 1 // a symbolic dimension
					}
					shape = append(shape, d)
				}
			}
			n := int64(1)
			for _, d := range shape {
				if d > 4096 || n*d > 4096 {
					return
				}
				n *= d
			}
			if in.DType == modelstore.DTypeInvalid {
				return
			}
			data := make([]byte, int(n)*in.DType.Size())
			for i := 0; i+4 <= len(data); i += 4 {
				binary.LittleEndian.PutUint32(data[i:], uint32(i*2654435761))
			}
			inputs = append(inputs, &modelstore.Tensor{DType: in.DType, Shape: shape, Data: data})
		}
		s.Run(context.Background(), inputs)
	})
}

// fuzzOps are the operators FuzzGoEngineOps builds models of: gonnx's
// opset 13 and ours (ops.go).
var fuzzOps = []string{"Abs", "Acos", "Acosh", "Add", "And", "Asin", "Asinh", "Atan", "Atanh", "Cast", "Concat",
	"Constant", "ConstantOfShape", "Conv", "Cos", "Cosh", "Div", "Equal", "Flatten", "Gather", "Gemm", "Greater",
	"GreaterOrEqual", "GRU", "Less", "LessOrEqual", "LinearRegressor", "LSTM", "MatMul", "Mul", "Not", "Or",
	"PRelu", "Relu", "Reshape", "RNN", "Scaler", "Shape", "Sigmoid", "Sin", "Sinh", "Slice", "Softmax", "Squeeze",
	"Sub", "Tan", "Tanh", "Transpose", "Unsqueeze", "Xor", "Identity", "MaxPool", "ReduceMean", "Sqrt", "Where",
	"Neg", "Pow", "LayerNormalization", "Erf", "Exp", "Log",
	"Dropout", "GlobalAveragePool", "BatchNormalization", "Clip", "ReduceSum", "ReduceMax", "ReduceMin", "Min", "Max",
	"LeakyRelu", "Expand", "Tile", "Split", "Range",
	"Floor", "Ceil", "Round", "Reciprocal", "Sign", "Softplus", "Elu", "HardSigmoid", "HardSwish", "LogSoftmax",
	"AveragePool", "Pad", "ArgMax", "ArgMin", "ConvTranspose", "InstanceNormalization", "CumSum"}

// fuzzAttrs are the attributes FuzzGoEngineOps may give a node, any
// operator; each takes ints or an int from the fuzzer's bytes (direction,
// mode and auto_pad one of their strings, alpha and epsilon a float).
var fuzzAttrs = []struct {
	name string
	list bool
}{{"axis", false}, {"axes", true}, {"perm", true}, {"kernel_shape", true}, {"strides", true}, {"pads", true},
	{"dilations", true}, {"group", false}, {"transA", false}, {"transB", false}, {"hidden_size", false},
	{"to", false}, {"keepdims", false}, {"direction", false}, {"layout", false}, {"ceil_mode", false},
	{"stash_type", false}, {"allowzero", false}, {"start", false}, {"end", false},
	{"training_mode", false}, {"seed", false}, {"noop_with_empty_axes", false}, {"split", true},
	{"count_include_pad", false}, {"select_last_index", false}, {"mode", false}, {"alpha", false},
	{"output_padding", true}, {"output_shape", true}, {"auto_pad", false}, {"epsilon", false},
	{"exclusive", false}, {"reverse", false}, {"num_outputs", false}}

// FuzzGoEngineOps builds one-node models from the fuzzer's bytes: an
// operator, its attributes, inputs that are initializers of any shape and
// of FLOAT or INT64 (their data possibly shorter or longer than the shape
// says) or graph inputs with no declared shape, fed tensors of fuzzed
// shapes, at an opset from 11 to 18. Compile and Run must return, whatever
// the model; a panic or a run past 5 s fails.
func FuzzGoEngineOps(f *testing.F) {
	f.Add(uint8(3), []byte{0, 2, 3, 1, 3}, []byte{}, []byte{2, 3})        // Add of x [2,3] and an init [3]
	f.Add(uint8(28), []byte{0, 2, 3, 1, 2, 3, 4}, []byte{}, []byte{2, 3}) // MatMul
	f.Add(uint8(13), []byte{0, 4, 1, 1, 4, 4, 1, 4, 1, 1, 3, 3}, []byte{3, 2, 3, 3}, []byte{1, 1, 4, 4})
	f.Add(uint8(19), []byte{0, 2, 3, 4, 1, 9}, []byte{0, 1}, []byte{2, 3})                         // Gather with an INT64 index
	f.Add(uint8(34), []byte{0, 2, 2, 3, 5, 1, 0}, []byte{}, []byte{2, 3})                          // Reshape
	f.Add(uint8(52), []byte{0, 4, 1, 1, 4, 4}, []byte{3, 2, 2, 2, 4, 2, 2, 2}, []byte{1, 1, 4, 4}) // MaxPool
	f.Add(uint8(85), []byte{0}, []byte{3, 2, 2, 2, 24, 1}, []byte{1, 1, 4, 4})                     // AveragePool
	f.Add(uint8(86), []byte{0, 2, 1, 4}, []byte{26, 2}, []byte{2, 3})                              // Pad, reflect
	// ConvTranspose of a [1, 2, 2, 2] kernel, strides 2, output_padding 1.
	f.Add(uint8(89), []byte{0, 1, 4, 1, 2, 2, 2, 128}, []byte{4, 2, 2, 2, 28, 2, 1, 1}, []byte{1, 1, 3, 3})
	// InstanceNormalization of x [1, 2, 3], its scale and B [2], epsilon 1/16.
	f.Add(uint8(90), []byte{0, 1, 1, 2, 128, 1, 1, 2, 128}, []byte{31, 1}, []byte{1, 2, 3})
	// CumSum of x [2, 3] along an INT64 scalar axis of -1, exclusive and reverse.
	f.Add(uint8(91), []byte{0, 2, 0, 128}, []byte{32, 1, 33, 1}, []byte{2, 3})
	// ReduceSum, Squeeze, Unsqueeze and Split of x [2, 3] and an empty
	// INT64 list (opset 18), which the guard gives them as left out.
	f.Add(uint8(65), []byte{0, 2, 1, 0, 128}, []byte{}, []byte{2, 3})
	f.Add(uint8(43), []byte{0, 2, 1, 0, 128}, []byte{}, []byte{2, 1})
	f.Add(uint8(48), []byte{0, 2, 1, 0, 128}, []byte{}, []byte{2, 3})
	f.Add(uint8(73), []byte{0, 2, 1, 0, 128}, []byte{}, []byte{2, 3})
	f.Fuzz(func(t *testing.T, op uint8, spec, attrs, xdims []byte) {
		// The operator, and from the byte's rest and the other inputs'
		// lengths the opset: the nodes of opsets 11 and 12 are rewritten
		// (opsets.go). (From the byte's rest alone, with over 85
		// operators, the opset was 11, 12 or 13, never a later one.)
		model, inputs := fuzzModel(fuzzOps[int(op)%len(fuzzOps)], spec, attrs, xdims)
		model = atOpset(model, MinOpset+int64(int(op)/len(fuzzOps)+len(spec)+len(attrs)+len(xdims))%(MaxOpset-MinOpset+1))
		if model == nil {
			return
		}
		stuck := time.AfterFunc(5*time.Second, func() { panic("FuzzGoEngineOps: Compile or Run ran past 5 s") })
		defer stuck.Stop()
		s, err := Engine{}.Compile(modelstore.ModelSource{Data: model}, modelstore.SessionOptions{})
		if err != nil {
			if signal(err) {
				t.Fatalf("a signal inside the engine (fatal in the enclave): %v", err)
			}
			return
		}
		defer s.Close()
		if _, err := s.Run(context.Background(), inputs); signal(err) {
			t.Fatalf("a signal inside the engine (fatal in the enclave): %v", err)
		}
	})
}

// signal reports a recovered panic that was a signal: a recover catches it
// here, but inside an EGo enclave a nil dereference (SIGSEGV) or an integer
// division by zero (SIGFPE) aborts before any deferred function runs.
func signal(err error) bool {
	return err != nil && (strings.Contains(err.Error(), "nil pointer dereference") ||
		strings.Contains(err.Error(), "integer divide by zero"))
}

// fuzzModel decodes spec as the node's inputs: each a kind byte (0: the
// graph input x, of shape xdims; 1: a FLOAT initializer; 2: an INT64 one; 3:
// an empty name, an omitted optional input), a rank and that many dims, and
// for initializers a byte that scales the data's length (128: exact);
// attrs as pairs of an attribute index and a value (lists take the next
// value's count of bytes, as signed values). Shapes are bounded to 4096
// elements.
func fuzzModel(op string, spec, attrs, xdims []byte) ([]byte, []*modelstore.Tensor) {
	next := func(b *[]byte) (byte, bool) {
		if len(*b) == 0 {
			return 0, false
		}
		v := (*b)[0]
		*b = (*b)[1:]
		return v, true
	}
	elems := func(shape []int64) int64 {
		n := int64(1)
		for _, d := range shape {
			if n *= d; n > 4096 {
				return 4097
			}
		}
		return n
	}
	node := &gonnxproto.NodeProto{OpType: op, Output: []string{"y"}}
	graph := &gonnxproto.GraphProto{Name: "fuzz", Node: []*gonnxproto.NodeProto{node},
		Output: []*gonnxproto.ValueInfoProto{valueInfo("y", gonnxproto.TensorProto_FLOAT)}}
	var feeds []*modelstore.Tensor
	if len(xdims) > 8 {
		return nil, nil
	}
	xshape := make([]int64, 0, len(xdims))
	for _, d := range xdims {
		xshape = append(xshape, int64(d%9))
	}
	if elems(xshape) > 4096 {
		return nil, nil
	}
	for i := 0; len(spec) > 0 && i < 6; i++ {
		kind, _ := next(&spec)
		switch kind % 4 {
		case 0:
			name := fmt.Sprintf("x%d", len(feeds))
			node.Input = append(node.Input, name)
			graph.Input = append(graph.Input, valueInfo(name, gonnxproto.TensorProto_FLOAT))
			data := make([]byte, 4*elems(xshape))
			for j := 0; j+4 <= len(data); j += 4 {
				binary.LittleEndian.PutUint32(data[j:], math.Float32bits(float32(j%7)-3))
			}
			feeds = append(feeds, &modelstore.Tensor{DType: modelstore.Float, Shape: xshape, Data: data})
		case 3:
			node.Input = append(node.Input, "")
		default:
			rank, _ := next(&spec)
			shape := make([]int64, 0, rank%5)
			for range rank % 5 {
				d, _ := next(&spec)
				shape = append(shape, int64(d%9))
			}
			scale, ok := next(&spec)
			if !ok {
				scale = 128
			}
			n := elems(shape) * int64(scale) / 128
			if n > 4096 {
				return nil, nil
			}
			name := fmt.Sprintf("init%d", i)
			node.Input = append(node.Input, name)
			tp := &gonnxproto.TensorProto{Name: name, Dims: shape, DataType: int32(gonnxproto.TensorProto_FLOAT)}
			if kind%4 == 2 {
				tp.DataType = int32(gonnxproto.TensorProto_INT64)
				raw := make([]byte, 8*n)
				for j := int64(0); j < n; j++ {
					binary.LittleEndian.PutUint64(raw[8*j:], uint64(int64(j%5)-1))
				}
				tp.RawData = raw
			} else {
				tp.RawData = make([]byte, 4*n)
			}
			graph.Initializer = append(graph.Initializer, tp)
		}
	}
	for len(attrs) >= 2 {
		which, _ := next(&attrs)
		v, _ := next(&attrs)
		a := fuzzAttrs[int(which)%len(fuzzAttrs)]
		ap := &gonnxproto.AttributeProto{Name: a.name, Type: gonnxproto.AttributeProto_INT, I: int64(int8(v))}
		switch {
		case a.name == "direction":
			ap = &gonnxproto.AttributeProto{Name: a.name, Type: gonnxproto.AttributeProto_STRING,
				S: []byte([]string{"forward", "reverse", "bidirectional", ""}[v%4])}
		case a.name == "mode":
			ap = &gonnxproto.AttributeProto{Name: a.name, Type: gonnxproto.AttributeProto_STRING,
				S: []byte([]string{"constant", "reflect", "edge", "wrap"}[v%4])}
		case a.name == "auto_pad":
			ap = &gonnxproto.AttributeProto{Name: a.name, Type: gonnxproto.AttributeProto_STRING,
				S: []byte([]string{"NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID", ""}[v%5])}
		case a.name == "alpha" || a.name == "epsilon":
			ap = &gonnxproto.AttributeProto{Name: a.name, Type: gonnxproto.AttributeProto_FLOAT, F: float32(int8(v)) / 16}
		case a.list:
			ap = &gonnxproto.AttributeProto{Name: a.name, Type: gonnxproto.AttributeProto_INTS}
			for range v % 6 {
				e, _ := next(&attrs)
				ap.Ints = append(ap.Ints, int64(int8(e)))
			}
		}
		node.Attribute = append(node.Attribute, ap)
	}
	m := &gonnxproto.ModelProto{IrVersion: 8, OpsetImport: []*gonnxproto.OperatorSetIdProto{{Version: 13}}, Graph: graph}
	b, err := proto.Marshal(m)
	if err != nil {
		return nil, nil
	}
	return b, feeds
}

// atOpset is model (nil: nil) importing opset v of the default domain.
func atOpset(model []byte, v int64) []byte {
	mp := &gonnxproto.ModelProto{}
	if model == nil || proto.Unmarshal(model, mp) != nil {
		return model
	}
	mp.OpsetImport = []*gonnxproto.OperatorSetIdProto{{Version: v}}
	b, err := proto.Marshal(mp)
	if err != nil {
		return nil
	}
	return b
}

// valueInfo declares a tensor of an element type and no shape.
func valueInfo(name string, elem gonnxproto.TensorProto_DataType) *gonnxproto.ValueInfoProto {
	return &gonnxproto.ValueInfoProto{Name: name, Type: &gonnxproto.TypeProto{
		Value: &gonnxproto.TypeProto_TensorType{TensorType: &gonnxproto.TypeProto_Tensor{ElemType: int32(elem)}}}}
}
