package goengine

import (
	"encoding/binary"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"unsafe"

	gonnxproto "github.com/advancedclimatesystems/gonnx/onnx"
	"gorgonia.org/tensor"

	"github.com/enclaveai/enclaveai/modelstore"
)

// toGonnx copies a Tensor into a gorgonia tensor. A copy, always: gonnx's
// operators may write to their inputs (Gather offsets negative indices in
// place), and a stored Tensor never changes.
func toGonnx(t *modelstore.Tensor) (tensor.Tensor, error) {
	shape := make([]int, len(t.Shape))
	for i, d := range t.Shape {
		shape[i] = int(d)
	}
	var backing any
	switch t.DType {
	case modelstore.Float:
		backing = fromBytes[float32](t.Data)
	case modelstore.Double:
		backing = fromBytes[float64](t.Data)
	case modelstore.Int8:
		backing = fromBytes[int8](t.Data)
	case modelstore.Int16:
		backing = fromBytes[int16](t.Data)
	case modelstore.Int32:
		backing = fromBytes[int32](t.Data)
	case modelstore.Int64:
		backing = fromBytes[int64](t.Data)
	case modelstore.Uint8:
		backing = fromBytes[uint8](t.Data)
	case modelstore.Uint16:
		backing = fromBytes[uint16](t.Data)
	case modelstore.Uint32:
		backing = fromBytes[uint32](t.Data)
	case modelstore.Uint64:
		backing = fromBytes[uint64](t.Data)
	case modelstore.Bool:
		b := make([]bool, len(t.Data))
		for i, v := range t.Data {
			b[i] = v != 0
		}
		backing = b
	default:
		return nil, refuse("%s tensors are not supported", t.DType)
	}
	if len(shape) == 0 {
		return tensor.New(tensor.FromScalar(scalarOf(backing))), nil
	}
	return tensor.New(tensor.WithShape(shape...), tensor.WithBacking(backing)), nil
}

// fromBytes copies little-endian elements into a new slice (the machines
// Go and EGo run on are little-endian).
func fromBytes[T any](b []byte) []T {
	var zero T
	out := make([]T, len(b)/int(unsafe.Sizeof(zero)))
	if len(out) > 0 {
		copy(unsafe.Slice((*byte)(unsafe.Pointer(&out[0])), len(b)), b)
	}
	return out
}

// asBytes is the memory of s, without a copy.
func asBytes[T any](s []T) []byte {
	if len(s) == 0 {
		return []byte{}
	}
	var zero T
	return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), len(s)*int(unsafe.Sizeof(zero)))
}

func scalarOf(backing any) any {
	switch b := backing.(type) {
	case []float32:
		return b[0]
	case []float64:
		return b[0]
	case []int8:
		return b[0]
	case []int16:
		return b[0]
	case []int32:
		return b[0]
	case []int64:
		return b[0]
	case []uint8:
		return b[0]
	case []uint16:
		return b[0]
	case []uint32:
		return b[0]
	case []uint64:
		return b[0]
	case []bool:
		return b[0]
	}
	return nil
}

// fromGonnx makes an output Tensor of a gorgonia tensor. Its memory
// becomes the Tensor's Data without a copy when the tensor is dense and
// laid out in order (a view, a transposed one say, is materialized first).
func fromGonnx(g tensor.Tensor) (*modelstore.Tensor, error) {
	if d, ok := g.(*tensor.Dense); ok && d.IsMaterializable() {
		g = d.Materialize()
	}
	shape := make([]int64, 0, len(g.Shape()))
	if !g.IsScalar() {
		for _, d := range g.Shape() {
			shape = append(shape, int64(d))
		}
	}
	var (
		dt   modelstore.DType
		data []byte
	)
	values := g.Data()
	if g.IsScalar() {
		// A slice of the one value, of any type: a scalar INT32 output
		// (an integer MatMul of two vectors) was an unsupported type.
		v := reflect.ValueOf(values)
		values = reflect.Append(reflect.MakeSlice(reflect.SliceOf(v.Type()), 0, 1), v).Interface()
	}
	switch v := values.(type) {
	case []float32:
		dt, data = modelstore.Float, asBytes(v)
	case []float64:
		dt, data = modelstore.Double, asBytes(v)
	case []int8:
		dt, data = modelstore.Int8, asBytes(v)
	case []int16:
		dt, data = modelstore.Int16, asBytes(v)
	case []int32:
		dt, data = modelstore.Int32, asBytes(v)
	case []int64:
		dt, data = modelstore.Int64, asBytes(v)
	case []uint8:
		dt, data = modelstore.Uint8, asBytes(v)
	case []uint16:
		dt, data = modelstore.Uint16, asBytes(v)
	case []uint32:
		dt, data = modelstore.Uint32, asBytes(v)
	case []uint64:
		dt, data = modelstore.Uint64, asBytes(v)
	case []bool:
		dt, data = modelstore.Bool, make([]byte, len(v))
		for i, b := range v {
			if b {
				data[i] = 1
			}
		}
	default:
		return nil, fmt.Errorf("%w: %s output", modelstore.ErrUnsupportedDType, g.Dtype())
	}
	if want := modelstore.ByteSize(dt, shape); want != int64(len(data)) {
		return nil, fmt.Errorf("%w: output of shape %v holds %d bytes", modelstore.ErrUnsupportedShape, shape, len(data))
	}
	return &modelstore.Tensor{DType: dt, Shape: shape, Data: data}, nil
}

// decodeWeights turns the float initializers' raw_data into float_data,
// each read once into a slice of its exact size, and drops the raw bytes.
// gonnx would otherwise decode them element by element into a growing
// slice (a peak of twice the weights) and keep the raw bytes as well.
// Initializers that modelstore.WithoutLargeWeights left out are read from
// model, where their external-data reference points. UINT64 raw_data is
// decoded here too: gonnx reads it 4 bytes at a time, stops at once, and
// gave such an initializer no elements at all.
func decodeWeights(g *gonnxproto.GraphProto, model []byte) error {
	for _, tp := range g.GetInitializer() {
		if tp.GetDataLocation() == gonnxproto.TensorProto_EXTERNAL {
			raw, err := inModel(tp, model)
			if err != nil {
				return err
			}
			tp.RawData, tp.ExternalData, tp.DataLocation = raw, nil, gonnxproto.TensorProto_DEFAULT
		}
		if tp.GetDataType() == int32(gonnxproto.TensorProto_UINT64) && len(tp.RawData) > 0 {
			if len(tp.RawData)%8 != 0 {
				return fmt.Errorf("initializer %s: %d bytes of UINT64", tp.GetName(), len(tp.RawData))
			}
			u := make([]uint64, len(tp.RawData)/8)
			for i := range u {
				u[i] = binary.LittleEndian.Uint64(tp.RawData[8*i:])
			}
			tp.Uint64Data, tp.RawData = u, nil
			continue
		}
		if tp.GetDataType() != int32(gonnxproto.TensorProto_FLOAT) || len(tp.RawData) == 0 {
			continue
		}
		if len(tp.RawData)%4 != 0 {
			return fmt.Errorf("initializer %s: %d bytes of FLOAT", tp.GetName(), len(tp.RawData))
		}
		f := make([]float32, len(tp.RawData)/4)
		for i := range f {
			f[i] = math.Float32frombits(binary.LittleEndian.Uint32(tp.RawData[4*i:]))
		}
		tp.FloatData, tp.RawData = f, nil
	}
	return nil
}

// inModel returns the bytes of model that an initializer's external-data
// reference (offset, length) names. gonnx copies them when it decodes a
// non-float tensor, so they are never written.
func inModel(tp *gonnxproto.TensorProto, model []byte) ([]byte, error) {
	off, n := int64(-1), int64(-1)
	for _, kv := range tp.GetExternalData() {
		v, err := strconv.ParseInt(kv.GetValue(), 10, 64)
		switch kv.GetKey() {
		case "offset":
			off = v
		case "length":
			n = v
		default:
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("initializer %s: external data %s: %v", tp.GetName(), kv.GetKey(), err)
		}
	}
	if off < 0 || n < 0 || off > int64(len(model)) || n > int64(len(model))-off {
		return nil, fmt.Errorf("initializer %s: external data outside the model", tp.GetName())
	}
	return model[off : off+n], nil
}

// dtypes are the gorgonia types of the element types a model may declare.
var dtypes = map[modelstore.DType]tensor.Dtype{
	modelstore.Float: tensor.Float32, modelstore.Double: tensor.Float64,
	modelstore.Int8: tensor.Int8, modelstore.Int16: tensor.Int16, modelstore.Int32: tensor.Int32, modelstore.Int64: tensor.Int64,
	modelstore.Uint8: tensor.Uint8, modelstore.Uint16: tensor.Uint16, modelstore.Uint32: tensor.Uint32, modelstore.Uint64: tensor.Uint64,
	modelstore.Bool: tensor.Bool, modelstore.String: tensor.String,
}

// typeName is the ONNX name of a gorgonia type (INT32), or gorgonia's.
func typeName(dt tensor.Dtype) string {
	for m, d := range dtypes {
		if d == dt {
			return m.String()
		}
	}
	return dt.Name()
}
