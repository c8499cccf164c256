package goengine

// Operators gonnx v1.1.0 lacks that the benchmark models use: MaxPool (the
// CNN), ReduceMean (reduce.go), Sqrt and Identity (the transformer's norms
// and output);
// Where, which the sanitizer's guard of an integer Div needs, and a Cast
// of unsigned scalars; Neg and Pow (pow.go), and MaxPool's and
// ReduceMean's integer types, as ONNX Runtime's CPU provider has them;
// and a fix of its Conv, a Softmax without goroutines, a batched MatMul
// that does not copy what it broadcasts and multiplies integers too, a
// Gather that copies blocks, an LSTM whose outputs are not lost to
// their names, a Gemm that takes only the float types it runs, and an Abs
// of unsigned integers.
// Each follows the ONNX opset-13 definition for FLOAT and DOUBLE tensors
// (MatMul, Neg, Pow, MaxPool and ReduceMean for their integer types as
// well, giving ONNX Runtime's results) and
// refuses, at Init, the attributes it does not implement; Compile calls Init
// on every node, so a model that uses them fails at AI.MODELSTORE, not at
// its first run.

import (
	"fmt"
	"math"
	"reflect"
	"slices"

	gonnxproto "github.com/advancedclimatesystems/gonnx/onnx"
	"github.com/advancedclimatesystems/gonnx/ops"
	"github.com/advancedclimatesystems/gonnx/ops/opset13"
	"gorgonia.org/tensor"
)

var extraOps = map[string]func() (ops.Operator, error){
	"Abs":                   newAbs,
	"BatchNormalization":    func() (ops.Operator, error) { return &batchNorm{}, nil },
	"Cast":                  newCast,
	"Clip":                  func() (ops.Operator, error) { return &clip{}, nil },
	"Conv":                  newConv,
	"ConvTranspose":         func() (ops.Operator, error) { return &convTranspose{}, nil },
	"CumSum":                func() (ops.Operator, error) { return &cumSum{}, nil },
	"Dropout":               func() (ops.Operator, error) { return &dropout{}, nil },
	"Erf":                   newErf,
	"Exp":                   newExp,
	"Gather":                newGather,
	"Gemm":                  newGemm,
	"GlobalAveragePool":     func() (ops.Operator, error) { return &globalAveragePool{}, nil },
	"Identity":              func() (ops.Operator, error) { return &identity{}, nil },
	"InstanceNormalization": func() (ops.Operator, error) { return &instanceNorm{}, nil },
	"LSTM":                  newLSTM,
	"LeakyRelu":             func() (ops.Operator, error) { return &leakyRelu{}, nil },
	"Max":                   func() (ops.Operator, error) { return &extreme{greatest: true}, nil },
	"Min":                   func() (ops.Operator, error) { return &extreme{}, nil },
	"ReduceMax":             newReduce("max", extremeType),
	"ReduceMin":             newReduce("min", extremeType),
	"ReduceSum":             newReduce("sum", sumTypes),
	"LayerNormalization":    func() (ops.Operator, error) { return &layerNorm{}, nil },
	"Log":                   newLog,
	"MatMul":                newMatMul,
	"MaxPool":               func() (ops.Operator, error) { return &maxPool{}, nil },
	"Neg":                   func() (ops.Operator, error) { return &neg{}, nil },
	"Pow":                   func() (ops.Operator, error) { return &pow{}, nil },
	"ReduceMean":            newReduce("mean", sumTypes),
	"Softmax":               func() (ops.Operator, error) { return &softmax{axis: -1}, nil },
	"LogSoftmax":            func() (ops.Operator, error) { return &softmax{axis: -1, log: true}, nil },
	"Sqrt":                  func() (ops.Operator, error) { return &sqrt{}, nil },
	"Where":                 func() (ops.Operator, error) { return &where{}, nil },
	"Expand":                func() (ops.Operator, error) { return &expand{}, nil },
	"Tile":                  func() (ops.Operator, error) { return &tile{}, nil },
	"Flatten":               newFlatten,
	"Squeeze":               newSqueeze(false),
	"Unsqueeze":             newSqueeze(true),
	"Split":                 func() (ops.Operator, error) { return &split{}, nil },
	"Range":                 func() (ops.Operator, error) { return &rangeOp{}, nil },
	"Floor":                 newFloor,
	"Ceil":                  newCeil,
	"Round":                 newRound,
	"Reciprocal":            newReciprocal,
	"Sign":                  func() (ops.Operator, error) { return &sign{}, nil },
	"Softplus":              newSoftplus,
	"Elu":                   newElu,
	"HardSigmoid":           newHardSigmoid,
	"HardSwish":             newHardSwish,
	"AveragePool":           func() (ops.Operator, error) { return &averagePool{}, nil },
	"Pad":                   func() (ops.Operator, error) { return &pad{}, nil },
	"Slice":                 func() (ops.Operator, error) { return &slice{}, nil },
	"ArgMax":                func() (ops.Operator, error) { return &argExtreme{greatest: true}, nil },
	"ArgMin":                func() (ops.Operator, error) { return &argExtreme{}, nil },
}

var floatTypes = []tensor.Dtype{tensor.Float32, tensor.Float64}

// unary is the part of an operator with one input of a float type.
type unary struct{ name string }

func (u unary) GetMinInputs() int                         { return 1 }
func (u unary) GetMaxInputs() int                         { return 1 }
func (u unary) GetInputTypeConstraints() [][]tensor.Dtype { return [][]tensor.Dtype{floatTypes} }
func (u unary) String() string                            { return u.name + " operator" }

// conv is 2-D convolution over NCHW FLOAT input computed directly, and
// gonnx's Conv otherwise (1-D and 3-D, DOUBLE, auto_pad SAME_*). gonnx's
// 2-D Conv slices and copies every input window: the CNN ran 1000x slower
// than ONNX Runtime with it. It also reshapes the bias input in place to
// broadcast it, which broke the next run of the model (the initializer is
// shared by all runs) with "Cannot reshape (1, C, 1, 1)": every operator
// gets tensor headers of its own (ownHeaders).
type conv struct {
	ops.Operator       // gonnx's, Init'ed on the same node
	gonnxErr     error // gonnx's Init's error: its Conv cannot run the node
	autoPad      string
	group        int
	kernel       []int
	pads         []int
	strides      []int
	dilations    []int
}

func newConv() (ops.Operator, error) {
	op, err := opset13.GetOperator("Conv")
	if err != nil {
		return nil, err
	}
	return &conv{Operator: op}, nil
}

func (c *conv) Init(n *gonnxproto.NodeProto) error {
	c.gonnxErr = c.Operator.Init(n) // group > 1, say: fine in direct2D
	c.group = 1
	for _, a := range n.GetAttribute() {
		ints := make([]int, len(a.GetInts()))
		for i, v := range a.GetInts() {
			ints[i] = int(v)
		}
		switch a.GetName() {
		case "auto_pad":
			c.autoPad = string(a.GetS())
		case "group":
			c.group = int(a.GetI())
		case "kernel_shape":
			c.kernel = ints
		case "pads":
			c.pads = ints
		case "strides":
			c.strides = ints
		case "dilations":
			c.dilations = ints
		}
	}
	return nil
}

// outputElems implements sizer: N x M (the weight's first dimension)
// times each padded spatial size.
func (c *conv) outputElems(in []tensor.Tensor) int64 {
	if len(in) < 2 || in[0] == nil || in[1] == nil || len(in[1].Shape()) == 0 {
		return 0
	}
	return spatialElems(in[0].Shape(), int64(in[1].Shape()[0]), c.pads, c.strides)
}

// scratchElems implements scratcher: gonnx's Conv pads a copy of the
// input (N x C x each padded spatial size) and spreads the kernel out by
// the dilations ((k-1) x d + 1 per spatial dimension) before it checks
// anything: a kernel of 9 dilated by 2^31 asked for 68 GB (review,
// 2026-12-07). The direct 2-D path makes neither; it is counted all the
// same, which errs on the safe side.
func (c *conv) scratchElems(in []tensor.Tensor) int64 {
	if len(in) < 2 || in[0] == nil || in[1] == nil {
		return 0
	}
	xs, ws := in[0].Shape(), in[1].Shape()
	if len(xs) < 3 || len(ws) < 3 {
		return 0
	}
	sp := len(xs) - 2
	padded, kernel := mul(int64(xs[0]), int64(xs[1])), mul(int64(ws[0]), int64(ws[1]))
	for i := range sp {
		size := int64(xs[2+i])
		if len(c.pads) == 2*sp {
			size = add(add(size, int64(max(c.pads[i], 0))), int64(max(c.pads[i+sp], 0)))
		}
		padded = mul(padded, size)
		if 2+i < len(ws) {
			kernel = mul(kernel, dilated(int64(ws[2+i]), c.dilation(i)))
		}
	}
	return max(padded, kernel)
}

// dilation is the dilation of spatial dimension i (1 when not given).
func (c *conv) dilation(i int) int64 {
	if i < len(c.dilations) && c.dilations[i] > 0 {
		return int64(c.dilations[i])
	}
	return 1
}

// dilated is the extent of a kernel of k taps spread d apart, saturating.
func dilated(k, d int64) int64 {
	if k < 1 {
		return k
	}
	return add(mul(k-1, d), 1)
}

func (c *conv) ValidateInputs(in []tensor.Tensor) ([]tensor.Tensor, error) {
	return ops.ValidateInputs(c, in)
}

func (c *conv) Apply(in []tensor.Tensor) ([]tensor.Tensor, error) {
	if out, ok, err := c.direct2D(in); ok || err != nil {
		return out, err
	}
	if c.gonnxErr != nil {
		return nil, c.gonnxErr
	}
	// gonnx's output size would be 0 or negative: refused here, before it
	// dilates the kernel and pads the input.
	if xs, ws := in[0].Shape(), in[1].Shape(); (c.autoPad == "" || c.autoPad == "NOTSET" || c.autoPad == "VALID") && len(xs) == len(ws) && len(xs) >= 3 {
		sp := len(xs) - 2
		for i := range sp {
			size := int64(xs[2+i])
			if len(c.pads) == 2*sp && c.autoPad != "VALID" {
				size = add(add(size, int64(max(c.pads[i], 0))), int64(max(c.pads[i+sp], 0)))
			}
			if dilated(int64(ws[2+i]), c.dilation(i)) > size {
				return nil, ops.ErrInvalidInput("kernel larger than the padded input", c)
			}
		}
	}
	return c.Operator.Apply(in)
}

// direct2D computes the convolution when it is 2-D FLOAT with explicit or
// no padding; ok is false when it leaves the case to gonnx.
func (c *conv) direct2D(in []tensor.Tensor) (out []tensor.Tensor, ok bool, err error) {
	x, w := dense(in[0]), dense(in[1])
	xs, ws := x.Shape(), w.Shape()
	xd, ok1 := x.Data().([]float32)
	wd, ok2 := w.Data().([]float32)
	if !ok1 || !ok2 || len(xs) != 4 || len(ws) != 4 || (c.autoPad != "" && c.autoPad != "NOTSET") || c.group < 1 {
		return nil, false, nil
	}
	var bias []float32
	if len(in) > 2 && in[2] != nil {
		if bias, ok = dense(in[2]).Data().([]float32); !ok {
			return nil, false, nil
		}
	}
	pads, strides, dil := c.pads, c.strides, c.dilations
	if pads == nil {
		pads = []int{0, 0, 0, 0}
	}
	if strides == nil {
		strides = []int{1, 1}
	}
	if dil == nil {
		dil = []int{1, 1}
	}
	n, ci, h, wi := xs[0], xs[1], xs[2], xs[3]
	co, cig, kh, kw := ws[0], ws[1], ws[2], ws[3]
	g := c.group
	if len(pads) != 4 || len(strides) != 2 || len(dil) != 2 || ci != cig*g || co%g != 0 ||
		(c.kernel != nil && (len(c.kernel) != 2 || c.kernel[0] != kh || c.kernel[1] != kw)) ||
		(bias != nil && len(bias) != co) || min(strides[0], strides[1], dil[0], dil[1]) < 1 || min(pads[0], pads[1], pads[2], pads[3]) < 0 {
		return nil, false, nil
	}
	oh := (h+pads[0]+pads[2]-dil[0]*(kh-1)-1)/strides[0] + 1
	ow := (wi+pads[1]+pads[3]-dil[1]*(kw-1)-1)/strides[1] + 1
	if oh < 1 || ow < 1 {
		return nil, true, ops.ErrInvalidInput("kernel larger than the padded input", c)
	}
	res := make([]float32, n*co*oh*ow)
	cog := co / g
	for b := range n {
		for oc := range co {
			plane := res[(b*co+oc)*oh*ow : (b*co+oc+1)*oh*ow]
			if bias != nil {
				for i := range plane {
					plane[i] = bias[oc]
				}
			}
			grp := oc / cog
			for icg := range cig {
				ic := grp*cig + icg
				src := xd[(b*ci+ic)*h*wi : (b*ci+ic+1)*h*wi]
				kern := wd[(oc*cig+icg)*kh*kw : (oc*cig+icg+1)*kh*kw]
				for ky := range kh {
					for kx := range kw {
						k := kern[ky*kw+kx]
						for oy := range oh {
							y := oy*strides[0] - pads[0] + ky*dil[0]
							if y < 0 || y >= h {
								continue
							}
							row, orow := src[y*wi:(y+1)*wi], plane[oy*ow:(oy+1)*ow]
							for ox := range ow {
								xx := ox*strides[1] - pads[1] + kx*dil[1]
								if xx >= 0 && xx < wi {
									orow[ox] += k * row[xx]
								}
							}
						}
					}
				}
			}
		}
	}
	return []tensor.Tensor{tensor.New(tensor.WithShape(n, co, oh, ow), tensor.WithBacking(res))}, true, nil
}

// matMul is gonnx's MatMul but for operands of rank 2 or more, one of
// them with batch dimensions (rank 3 or more), and for integer operands
// of any rank. gonnx repeats an operand
// whose batch dimension is 1 to the other's (tensor.Repeat) before it
// multiplies: a copy of batch(out) x M x K elements where the output holds
// batch(out) x M x N, so [1, 1024, 1024] x [1024, 1024, 1] (8 MB) asked
// 4 GiB for a 4 MiB output, a fatal out-of-memory the output's bound did
// not see (review). Here each of the output's matrices is the
// product of its operands' matrices, found by index, in place. gonnx also
// slices a matrix of one row to a vector and then refuses it ([n, 1, 1]).
// gorgonia multiplies floats only: an INT32, INT64, UINT32 or UINT64
// MatMul, which ONNX Runtime runs, failed every run with its "getFloatDense
// only handles floats"; those are multiplied here (mulInts), wrapping
// around on overflow as ONNX Runtime's do.
type matMul struct{ ops.Operator }

func newMatMul() (ops.Operator, error) {
	op, err := opset13.GetOperator("MatMul")
	if err != nil {
		return nil, err
	}
	return &matMul{Operator: op}, nil
}

func (m *matMul) ValidateInputs(in []tensor.Tensor) ([]tensor.Tensor, error) {
	return ops.ValidateInputs(m, in)
}

func (m *matMul) Apply(in []tensor.Tensor) ([]tensor.Tensor, error) {
	a, b := dense(in[0]), dense(in[1])
	as, bs := a.Shape(), b.Shape()
	ad, aok := a.(*tensor.Dense)
	bd, bok := b.(*tensor.Dense)
	ints := intTypes[a.Dtype()]
	// A float vector (rank 1) gonnx repeats to at most the other operand's size.
	if !aok || !bok || !ints && (len(as) < 2 || len(bs) < 2 || len(as) == 2 && len(bs) == 2) {
		return m.Operator.Apply(in)
	}
	if a.Dtype() != b.Dtype() {
		return nil, fmt.Errorf("%s: operands of types %v and %v", m, a.Dtype(), b.Dtype())
	}
	if len(as) == 0 || len(bs) == 0 {
		return nil, fmt.Errorf("%s: a scalar operand (shapes %v and %v)", m, as, bs)
	}
	// A vector is a matrix of one row (A) or one column (B), that
	// dimension gone from the output, as in numpy's matmul.
	if len(as) == 1 {
		as = tensor.Shape{1, as[0]}
	}
	if len(bs) == 1 {
		bs = tensor.Shape{bs[0], 1}
	}
	rows, inner, cols := as[len(as)-2], as[len(as)-1], bs[len(bs)-1]
	if bs[len(bs)-2] != inner {
		return nil, fmt.Errorf("%s: shapes %v and %v do not multiply", m, as, bs)
	}
	// The batch dimensions, aligned on the right and padded with 1s.
	r := max(len(as), len(bs)) - 2
	batchA, batchB := padOnes(as[:len(as)-2], r), padOnes(bs[:len(bs)-2], r)
	batch := make([]int, r)
	for i := range r {
		switch x, y := batchA[i], batchB[i]; {
		case x == y || y == 1:
			batch[i] = x
		case x == 1:
			batch[i] = y
		default:
			return nil, fmt.Errorf("%s: batch dimensions of %v and %v do not broadcast", m, as, bs)
		}
	}
	keep := slices.Clone(batch) // the output's shape
	if len(a.Shape()) > 1 {
		keep = append(keep, rows)
	}
	if len(b.Shape()) > 1 {
		keep = append(keep, cols)
	}
	out := tensor.New(tensor.WithShape(append(slices.Clone(batch), rows, cols)...), tensor.Of(a.Dtype()))
	product := matrixProduct(ad.Data(), bd.Data(), out.Data(), rows, inner, cols)
	idx := make([]int, r) // the output's batch index
	for o := 0; ; o++ {
		// An operand's own index: the output's, or 0 in a dimension of 1.
		ai, bi := 0, 0
		for i := range r {
			ai = ai*batchA[i] + min(idx[i], batchA[i]-1)
			bi = bi*batchB[i] + min(idx[i], batchB[i]-1)
		}
		if err := product(ai, bi, o); err != nil {
			return nil, err
		}
		i := r - 1
		for ; i >= 0; i-- {
			if idx[i]++; idx[i] < batch[i] {
				break
			}
			idx[i] = 0
		}
		if i < 0 {
			break
		}
	}
	if len(keep) != len(out.Shape()) {
		if err := out.Reshape(keep...); err != nil {
			return nil, err
		}
	}
	return []tensor.Tensor{out}, nil
}

// gemm is gonnx's Gemm taking FLOAT and DOUBLE only: gonnx lists the
// integer types of ONNX's definition, but gorgonia multiplies floats
// only, and an INT32 Gemm failed every run with its "getFloatDense only
// handles floats". ONNX Runtime has no integer Gemm either ("Could not
// find an implementation for Gemm(13)"): such a model is refused when it
// is stored (checkModel), or at its first run where the types are known
// only then.
type gemm struct{ ops.Operator }

func newGemm() (ops.Operator, error) {
	op, err := opset13.GetOperator("Gemm")
	if err != nil {
		return nil, err
	}
	return &gemm{Operator: op}, nil
}

func (g *gemm) GetInputTypeConstraints() [][]tensor.Dtype {
	return [][]tensor.Dtype{floatTypes, floatTypes, floatTypes}
}

func (g *gemm) ValidateInputs(in []tensor.Tensor) ([]tensor.Tensor, error) {
	return ops.ValidateInputs(g, in)
}

// intTypes are the integer types of MatMul (ONNX's, and ONNX Runtime's).
var intTypes = map[tensor.Dtype]bool{tensor.Int32: true, tensor.Int64: true, tensor.Uint32: true, tensor.Uint64: true}

// matrixProduct multiplies matrix ai of a by matrix bi of b into matrix
// o of out, the backing slices of MatMul's operands and output, each a
// batch of matrices of rows x inner, inner x cols and rows x cols.
func matrixProduct(a, b, out any, rows, inner, cols int) func(ai, bi, o int) error {
	switch a := a.(type) {
	case []int32:
		return intProduct(a, b.([]int32), out.([]int32), rows, inner, cols)
	case []int64:
		return intProduct(a, b.([]int64), out.([]int64), rows, inner, cols)
	case []uint32:
		return intProduct(a, b.([]uint32), out.([]uint32), rows, inner, cols)
	case []uint64:
		return intProduct(a, b.([]uint64), out.([]uint64), rows, inner, cols)
	}
	av, bv, ov := reflect.ValueOf(a), reflect.ValueOf(b), reflect.ValueOf(out)
	matrix := func(v reflect.Value, i, r, c int) tensor.Tensor {
		return tensor.New(tensor.WithShape(r, c), tensor.WithBacking(v.Slice(i*r*c, (i+1)*r*c).Interface()))
	}
	return func(ai, bi, o int) error {
		_, err := tensor.MatMul(matrix(av, ai, rows, inner), matrix(bv, bi, inner, cols), tensor.WithReuse(matrix(ov, o, rows, cols)))
		return err
	}
}

// intProduct is matrixProduct for integers (mulInts).
func intProduct[T int32 | int64 | uint32 | uint64](a, b, out []T, rows, inner, cols int) func(ai, bi, o int) error {
	return func(ai, bi, o int) error {
		mulInts(a[ai*rows*inner:(ai+1)*rows*inner], b[bi*inner*cols:(bi+1)*inner*cols], out[o*rows*cols:(o+1)*rows*cols], inner, cols)
		return nil
	}
}

// mulInts adds the product of a (rows x inner) and b (inner x cols) to
// out (rows x cols), a row of b at a time: the loops of conv's direct2D,
// whose rate checkWork counts them at.
func mulInts[T int32 | int64 | uint32 | uint64](a, b, out []T, inner, cols int) {
	for i := range len(out) / cols {
		orow := out[i*cols : (i+1)*cols]
		for k, x := range a[i*inner : (i+1)*inner] {
			for j, y := range b[k*cols : (k+1)*cols] {
				orow[j] += x * y
			}
		}
	}
}

// padOnes is s with 1s before it, to rank r.
func padOnes(s []int, r int) []int {
	out := make([]int, r-len(s), r)
	for i := range out {
		out[i] = 1
	}
	return append(out, s...)
}

// gather is Gather at opset 13 (data of any type, INT32 or INT64
// indices, negative ones counting from the end): a block of the data
// copied per index. gonnx's converts the indices to a []int (8 bytes
// each, grown by append) and slices the data and the output and assigns
// between them per index, about 1.6 µs each: 40M indices made by a
// ConstantOfShape from 8 bytes of a client's took 34 s past a 5 s
// deadline, and 1 GB under a maxmemory of 512 MB (review).
type gather struct {
	ops.Operator // gonnx's: its Init checks the attributes, its ValidateInputs the types
	axis         int
}

func newGather() (ops.Operator, error) {
	op, err := opset13.GetOperator("Gather")
	if err != nil {
		return nil, err
	}
	return &gather{Operator: op}, nil
}

func (o *gather) Init(n *gonnxproto.NodeProto) error {
	if err := o.Operator.Init(n); err != nil {
		return err
	}
	for _, a := range n.GetAttribute() {
		if a.GetName() == "axis" {
			o.axis = int(a.GetI())
		}
	}
	return nil
}

func (o *gather) Apply(in []tensor.Tensor) ([]tensor.Tensor, error) {
	data := dense(in[0])
	shape := data.Shape().Clone()
	axis, outer, inner, err := aroundAxis(shape, data.IsScalar(), o.axis)
	if err != nil {
		return nil, err
	}
	idx := in[1].Data()
	switch v := idx.(type) {
	case int32:
		idx = []int32{v}
	case int64:
		idx = []int64{v}
	}
	backing, err := gatherData(data.Data(), idx, outer, shape[axis], inner)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", o, err)
	}
	outShape := append(append(slices.Clone(shape[:axis]), in[1].Shape()...), shape[axis+1:]...)
	return []tensor.Tensor{tensor.New(tensor.WithShape(outShape...), tensor.WithBacking(backing))}, nil
}

// gatherData is Gather of src, laid out as [outer, n, inner], along its
// middle axis, for each of ops.AllTypes.
func gatherData(src, idx any, outer, n, inner int) (any, error) {
	switch s := src.(type) {
	case []uint8:
		return gatherAs(s, idx, outer, n, inner)
	case []uint16:
		return gatherAs(s, idx, outer, n, inner)
	case []uint32:
		return gatherAs(s, idx, outer, n, inner)
	case []uint64:
		return gatherAs(s, idx, outer, n, inner)
	case []int8:
		return gatherAs(s, idx, outer, n, inner)
	case []int16:
		return gatherAs(s, idx, outer, n, inner)
	case []int32:
		return gatherAs(s, idx, outer, n, inner)
	case []int64:
		return gatherAs(s, idx, outer, n, inner)
	case []float32:
		return gatherAs(s, idx, outer, n, inner)
	case []float64:
		return gatherAs(s, idx, outer, n, inner)
	case []complex64:
		return gatherAs(s, idx, outer, n, inner)
	case []complex128:
		return gatherAs(s, idx, outer, n, inner)
	case []string:
		return gatherAs(s, idx, outer, n, inner)
	case []bool:
		return gatherAs(s, idx, outer, n, inner)
	}
	return nil, fmt.Errorf("data of type %T", src)
}

func gatherAs[T any](src []T, idx any, outer, n, inner int) (any, error) {
	switch ix := idx.(type) {
	case []int32:
		return gatherBlocks(src, ix, outer, n, inner)
	case []int64:
		return gatherBlocks(src, ix, outer, n, inner)
	}
	return nil, fmt.Errorf("indices of type %T", idx)
}

// gatherBlocks copies, for each of outer blocks of src and each index k,
// the k-th run of inner elements of the block's n. The indices are all
// checked before the output is made.
func gatherBlocks[T any, I int32 | int64](src []T, idx []I, outer, n, inner int) ([]T, error) {
	for _, k := range idx {
		if int64(k) < -int64(n) || int64(k) >= int64(n) {
			return nil, fmt.Errorf("index %d out of range for a dimension of %d", k, n)
		}
	}
	out := make([]T, outer*len(idx)*inner)
	at := 0
	for o := range outer {
		block := src[o*n*inner:]
		for _, k := range idx {
			j := int(k)
			if j < 0 {
				j += n
			}
			at += copy(out[at:at+inner], block[j*inner:(j+1)*inner])
		}
	}
	return out, nil
}

// lstm is gonnx's LSTM, Init'ed on a copy of the node whose outputs are
// named as ONNX's definition names them (Y, Y_h, Y_c, by position): gonnx
// looks its results up by the node's output names, so under any others
// (y, h) it returned none and the run's outputs went missing without an
// error.
type lstm struct{ ops.Operator }

func newLSTM() (ops.Operator, error) {
	op, err := opset13.GetOperator("LSTM")
	if err != nil {
		return nil, err
	}
	return &lstm{Operator: op}, nil
}

func (o *lstm) Init(n *gonnxproto.NodeProto) error {
	named := &gonnxproto.NodeProto{Name: n.GetName(), OpType: n.GetOpType(), Domain: n.GetDomain(), Input: n.GetInput(), Attribute: n.GetAttribute()}
	for i := range min(len(n.GetOutput()), 3) {
		named.Output = append(named.Output, []string{"Y", "Y_h", "Y_c"}[i])
	}
	return o.Operator.Init(named)
}

// abs is gonnx's Abs, and its input for the unsigned types gonnx lists
// but gorgonia refuses ("Typeclass mismatch on a: Type uint8 is not a
// member of Signed"): a UINT8 Abs, which ONNX Runtime runs, failed every
// run.
type abs struct{ ops.Operator }

func newAbs() (ops.Operator, error) {
	op, err := opset13.GetOperator("Abs")
	if err != nil {
		return nil, err
	}
	return &abs{Operator: op}, nil
}

func (a *abs) Apply(in []tensor.Tensor) ([]tensor.Tensor, error) {
	switch in[0].Dtype() {
	case tensor.Uint8, tensor.Uint16, tensor.Uint32, tensor.Uint64:
		return []tensor.Tensor{in[0]}, nil
	}
	return a.Operator.Apply(in)
}

// cast is gonnx's Cast, which panics on a scalar of UINT8, UINT16,
// UINT32 or UINT64 (ops.IfScalarToSlice leaves those scalars alone and
// ConvertTensorDtype asserts a slice): the sanitizer's guard of a UINT32
// Div by a scalar casts the divisor, and every run failed inside the
// engine, quarantining the model. A scalar is cast as a tensor of one
// element.
type cast struct{ ops.Operator }

func newCast() (ops.Operator, error) {
	op, err := opset13.GetOperator("Cast")
	if err != nil {
		return nil, err
	}
	return &cast{Operator: op}, nil
}

func (c *cast) Apply(in []tensor.Tensor) ([]tensor.Tensor, error) {
	if !in[0].IsScalar() {
		return c.Operator.Apply(in)
	}
	out, err := c.Operator.Apply([]tensor.Tensor{tensor.New(tensor.WithShape(1), tensor.WithBacking(flat(in[0])))})
	if err != nil {
		return nil, err
	}
	return []tensor.Tensor{tensor.New(tensor.FromScalar(reflect.ValueOf(flat(out[0])).Index(0).Interface()))}, nil
}

// where is Where at opset 13: X where the condition holds, else Y, the
// three broadcast together (numpy's rules), of any type. The sanitizer
// guards every integer Div with it (modelstore's divguard.go: a zero
// divisor becomes 1), and a model with an integer Div was refused for
// want of it, where ONNX Runtime runs it.
type where struct{}

func (*where) Init(*gonnxproto.NodeProto) error { return nil }
func (o *where) ValidateInputs(in []tensor.Tensor) ([]tensor.Tensor, error) {
	return ops.ValidateInputs(o, in)
}
func (*where) GetMinInputs() int { return 3 }
func (*where) GetMaxInputs() int { return 3 }
func (*where) GetInputTypeConstraints() [][]tensor.Dtype {
	return [][]tensor.Dtype{{tensor.Bool}, ops.AllTypes, ops.AllTypes}
}
func (*where) String() string { return "where operator" }

func (o *where) Apply(in []tensor.Tensor) ([]tensor.Tensor, error) {
	if in[1].Dtype() != in[2].Dtype() {
		return nil, fmt.Errorf("%s: X is %v and Y %v", o, in[1].Dtype(), in[2].Dtype())
	}
	_, out, strides, err := broadcastInputs(in)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", o, err)
	}
	cond, ok := flat(in[0]).([]bool)
	if !ok {
		return nil, ops.ErrInvalidInputType(0, in[0].Dtype().Name(), o)
	}
	n := tensor.Shape(out).TotalSize() // bounded before Apply (outputElems)
	backing := reflect.MakeSlice(reflect.ValueOf(flat(in[1])).Type(), n, n).Interface()
	if err := whereInto(backing, cond, flat(in[1]), flat(in[2]), out, strides); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return []tensor.Tensor{tensor.New(tensor.FromScalar(reflect.ValueOf(backing).Index(0).Interface()))}, nil
	}
	return []tensor.Tensor{tensor.New(tensor.WithShape(out...), tensor.WithBacking(backing))}, nil
}

// broadcastInputs is broadcastShapes of the shapes of in, which it
// returns too.
func broadcastInputs(in []tensor.Tensor) (shapes [][]int, out []int, strides [][]int, err error) {
	shapes = make([][]int, len(in))
	for i, t := range in {
		if !t.IsScalar() {
			shapes[i] = t.Shape()
		}
	}
	out, strides, err = broadcastShapes(shapes)
	return shapes, out, strides, err
}

// broadcastShapes is the shape that shapes (nil for a scalar) broadcast
// to, numpy's rules, and each one's strides along it, 0 along a dimension
// it broadcasts.
func broadcastShapes(shapes [][]int) (out []int, strides [][]int, err error) {
	rank := 0
	for _, s := range shapes {
		rank = max(rank, len(s))
	}
	out = make([]int, rank)
	padded := make([][]int, len(shapes))
	for i, s := range shapes {
		padded[i] = padOnes(s, rank)
		for d, n := range padded[i] {
			switch {
			case out[d] == 0 || out[d] == 1:
				out[d] = n
			case n != 1 && n != out[d]:
				return nil, nil, fmt.Errorf("shapes %v do not broadcast", shapes)
			}
		}
	}
	strides = make([][]int, len(shapes))
	for i, s := range padded {
		strides[i] = make([]int, rank)
		step := 1
		for d := rank - 1; d >= 0; d-- {
			if s[d] != 1 {
				strides[i][d] = step
			}
			step *= s[d]
		}
	}
	return out, strides, nil
}

// flat is a tensor's elements as a slice, a scalar's too (gorgonia gives
// a scalar's Data as the value itself).
func flat(t tensor.Tensor) any {
	t = dense(t)
	v := t.Data()
	if t.IsScalar() {
		rv := reflect.ValueOf(v)
		return reflect.Append(reflect.MakeSlice(reflect.SliceOf(rv.Type()), 0, 1), rv).Interface()
	}
	return v
}

// whereInto fills out (a slice of X's type) for Where.
func whereInto(out any, cond []bool, x, y any, shape []int, strides [][]int) error {
	switch o := out.(type) {
	case []float32:
		whereOf(o, cond, x.([]float32), y.([]float32), shape, strides)
	case []float64:
		whereOf(o, cond, x.([]float64), y.([]float64), shape, strides)
	case []int8:
		whereOf(o, cond, x.([]int8), y.([]int8), shape, strides)
	case []int16:
		whereOf(o, cond, x.([]int16), y.([]int16), shape, strides)
	case []int32:
		whereOf(o, cond, x.([]int32), y.([]int32), shape, strides)
	case []int64:
		whereOf(o, cond, x.([]int64), y.([]int64), shape, strides)
	case []uint8:
		whereOf(o, cond, x.([]uint8), y.([]uint8), shape, strides)
	case []uint16:
		whereOf(o, cond, x.([]uint16), y.([]uint16), shape, strides)
	case []uint32:
		whereOf(o, cond, x.([]uint32), y.([]uint32), shape, strides)
	case []uint64:
		whereOf(o, cond, x.([]uint64), y.([]uint64), shape, strides)
	case []bool:
		whereOf(o, cond, x.([]bool), y.([]bool), shape, strides)
	case []string:
		whereOf(o, cond, x.([]string), y.([]string), shape, strides)
	default:
		return fmt.Errorf("where operator: X of type %T", out)
	}
	return nil
}

// whereOf walks the output odometer style, each input's offset following
// its strides (strides[0] the condition's, 1 X's, 2 Y's).
func whereOf[T any](out []T, cond []bool, x, y []T, shape []int, strides [][]int) {
	idx := make([]int, len(shape))
	var c, a, b int
	for k := range out {
		if cond[c] {
			out[k] = x[a]
		} else {
			out[k] = y[b]
		}
		for d := len(shape) - 1; d >= 0; d-- {
			idx[d]++
			c, a, b = c+strides[0][d], a+strides[1][d], b+strides[2][d]
			if idx[d] < shape[d] {
				break
			}
			c, a, b = c-strides[0][d]*idx[d], a-strides[1][d]*idx[d], b-strides[2][d]*idx[d]
			idx[d] = 0
		}
	}
}

// identity passes its input through (any type).
type identity struct{}

func (*identity) Init(*gonnxproto.NodeProto) error { return nil }
func (*identity) Apply(in []tensor.Tensor) ([]tensor.Tensor, error) {
	return []tensor.Tensor{in[0]}, nil
}
func (o *identity) ValidateInputs(in []tensor.Tensor) ([]tensor.Tensor, error) {
	return ops.ValidateInputs(o, in)
}
func (*identity) GetMinInputs() int { return 1 }
func (*identity) GetMaxInputs() int { return 1 }
func (*identity) GetInputTypeConstraints() [][]tensor.Dtype {
	return [][]tensor.Dtype{ops.AllTypes}
}
func (*identity) String() string { return "identity operator" }

// noAttributes is the Init of operator o, which takes no attribute: it
// refuses node n if n has any.
func noAttributes(n *gonnxproto.NodeProto, o ops.Operator) error {
	if a := n.GetAttribute(); len(a) > 0 {
		return ops.ErrUnsupportedAttribute(a[0].GetName(), o)
	}
	return nil
}

// neg is Neg at opset 13, which gonnx lacks, for the types ONNX
// Runtime's CPU provider registers it for (negTypes): the signed minimum
// stays itself, wrapping around as ONNX Runtime's does.
type neg struct{}

// negTypes are Neg's types in ONNX Runtime 1.24's CPU provider.
var negTypes = []tensor.Dtype{tensor.Float32, tensor.Float64, tensor.Int8, tensor.Int16, tensor.Int32, tensor.Int64}

func (o *neg) Init(n *gonnxproto.NodeProto) error { return noAttributes(n, o) }
func (o *neg) ValidateInputs(in []tensor.Tensor) ([]tensor.Tensor, error) {
	return ops.ValidateInputs(o, in)
}
func (*neg) GetMinInputs() int                         { return 1 }
func (*neg) GetMaxInputs() int                         { return 1 }
func (*neg) GetInputTypeConstraints() [][]tensor.Dtype { return [][]tensor.Dtype{negTypes} }
func (*neg) String() string                            { return "neg operator" }

func (o *neg) Apply(in []tensor.Tensor) ([]tensor.Tensor, error) {
	x := dense(in[0])
	var backing any
	switch v := flat(x).(type) {
	case []float32:
		backing = negated(v)
	case []float64:
		backing = negated(v)
	case []int8:
		backing = negated(v)
	case []int16:
		backing = negated(v)
	case []int32:
		backing = negated(v)
	case []int64:
		backing = negated(v)
	default:
		return nil, ops.ErrInvalidInputType(0, x.Dtype().Name(), o)
	}
	return []tensor.Tensor{shaped(x, backing)}, nil
}

// negated is -v, element by element, in a new slice.
func negated[T float32 | float64 | int8 | int16 | int32 | int64](v []T) []T {
	out := make([]T, len(v))
	for i, x := range v {
		out[i] = -x
	}
	return out
}

// shaped is a tensor of x's shape (a scalar when x is one) over backing.
func shaped(x tensor.Tensor, backing any) tensor.Tensor {
	if x.IsScalar() {
		return tensor.New(tensor.FromScalar(reflect.ValueOf(backing).Index(0).Interface()))
	}
	return tensor.New(tensor.WithShape(x.Shape().Clone()...), tensor.WithBacking(backing))
}

// pow is Pow at opset 13, which gonnx lacks: a base of INT32, INT64,
// FLOAT or DOUBLE raised to an exponent of any of those types, the two
// broadcast together, as ONNX Runtime's CPU provider computes it: C's pow
// in double (cPow; powf for FLOAT ^ FLOAT, which rounds the same but in
// the hardest cases) cast to the base's type, an integer's NaN or out of
// range being its minimum (0 ^ -1 and 2 ^ 31 in INT32 are -2^31); and
// x*x and x*x*x in the base's type, wrapping around, where ONNX Runtime
// takes them instead (input1Scalar). A negative integer exponent gives 0
// for a base other than 0, 1 or -1, as 1/x^n truncates. Each element
// costs the same whatever the exponent (cPow has no loop over it).
type pow struct{}

// powTypes are Pow's types, base's and exponent's, in ONNX Runtime
// 1.24's CPU provider.
var powTypes = []tensor.Dtype{tensor.Int32, tensor.Int64, tensor.Float32, tensor.Float64}

func (o *pow) Init(n *gonnxproto.NodeProto) error { return noAttributes(n, o) }
func (o *pow) ValidateInputs(in []tensor.Tensor) ([]tensor.Tensor, error) {
	return ops.ValidateInputs(o, in)
}
func (*pow) GetMinInputs() int                         { return 2 }
func (*pow) GetMaxInputs() int                         { return 2 }
func (*pow) GetInputTypeConstraints() [][]tensor.Dtype { return [][]tensor.Dtype{powTypes, powTypes} }
func (*pow) String() string                            { return "pow operator" }

func (o *pow) Apply(in []tensor.Tensor) ([]tensor.Tensor, error) {
	shapes, out, strides, err := broadcastInputs(in)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", o, err)
	}
	// The exponents as C's pow sees them: an INT64's rounded to a double.
	var y []float64
	switch v := flat(in[1]).(type) {
	case []int32:
		y = toFloat64s(v)
	case []int64:
		y = toFloat64s(v)
	case []float32:
		y = toFloat64s(v)
	case []float64:
		y = v
	default:
		return nil, ops.ErrInvalidInputType(1, in[1].Dtype().Name(), o)
	}
	fast := input1Scalar(shapes[0], shapes[1])
	var backing any
	switch x := flat(in[0]).(type) {
	case []int32:
		backing = powInto(x, y, out, strides, fast, func(x int32, y float64) int32 { return toInt32(cPow(float64(x), y)) })
	case []int64:
		backing = powInto(x, y, out, strides, fast, func(x int64, y float64) int64 { return toInt64(cPow(float64(x), y)) })
	case []float32:
		backing = powInto(x, y, out, strides, fast, func(x float32, y float64) float32 { return float32(cPow(float64(x), y)) })
	case []float64:
		backing = powInto(x, y, out, strides, fast, cPow)
	default:
		return nil, ops.ErrInvalidInputType(0, in[0].Dtype().Name(), o)
	}
	if len(out) == 0 {
		return []tensor.Tensor{tensor.New(tensor.FromScalar(reflect.ValueOf(backing).Index(0).Interface()))}, nil
	}
	return []tensor.Tensor{tensor.New(tensor.WithShape(out...), tensor.WithBacking(backing))}, nil
}

// toFloat64s is v converted, element by element.
func toFloat64s[T int32 | int64 | float32](v []T) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}

// input1Scalar is whether ONNX Runtime's broadcasting of shapes x and y
// (nil for a scalar) takes its "input 1 is a scalar" path, where its Pow
// computes x^2 as x*x and x^3 as x*x*x in the base's type: when the
// innermost dimension it iterates over, the last the two have in common
// of more than 1 element (else their first in common), is 1 in y and more
// than 1 in x, or y is a scalar and x's last dimension more than 1.
func input1Scalar(x, y []int) bool {
	switch {
	case len(x) == 0:
		return false
	case len(y) == 0:
		return x[len(x)-1] > 1
	}
	n := min(len(x), len(y))
	for i := 1; ; i++ {
		a, b := x[len(x)-i], y[len(y)-i]
		if max(a, b) > 1 || i == n {
			return a > 1 && b <= 1
		}
	}
}

// powInto is Pow of x and y broadcast to shape (strides[0] x's, 1 y's):
// f, or x*x and x*x*x where fast and y is 2 or 3.
func powInto[T int32 | int64 | float32 | float64](x []T, y []float64, shape []int, strides [][]int, fast bool, f func(T, float64) T) []T {
	n := 1
	for _, d := range shape {
		n *= d
	}
	out := make([]T, n) // bounded before Apply (outputElems)
	idx := make([]int, len(shape))
	var a, b int
	for k := range out {
		switch v, e := x[a], y[b]; {
		case fast && e == 2:
			out[k] = v * v
		case fast && e == 3:
			out[k] = v * v * v
		default:
			out[k] = f(v, e)
		}
		for d := len(shape) - 1; d >= 0; d-- {
			idx[d]++
			a, b = a+strides[0][d], b+strides[1][d]
			if idx[d] < shape[d] {
				break
			}
			a, b = a-strides[0][d]*idx[d], b-strides[1][d]*idx[d]
			idx[d] = 0
		}
	}
	return out
}

// sqrt is the element-wise square root.
type sqrt struct{ unary }

func (o *sqrt) Init(*gonnxproto.NodeProto) error { o.name = "sqrt"; return nil }
func (o *sqrt) Apply(in []tensor.Tensor) ([]tensor.Tensor, error) {
	out, err := tensor.Sqrt(in[0])
	if err != nil {
		return nil, err
	}
	return []tensor.Tensor{out}, nil
}
func (o *sqrt) ValidateInputs(in []tensor.Tensor) ([]tensor.Tensor, error) {
	return ops.ValidateInputs(o, in)
}

// meanOver is the mean of x (of shape) over the axes that have size 1 in
// outShape, count elements each, summed in float64.
func meanOver[T float32 | float64](x []T, shape, outShape []int, count int) []T {
	sum := sumOver[T, float64](x, shape, outShape)
	out := make([]T, len(sum))
	for i, v := range sum {
		out[i] = T(v / float64(count))
	}
	return out
}

// intMeanOver is meanOver for integers as ONNX Runtime computes it: the
// sum in the input's type, wrapping around on overflow, divided by count
// and truncated toward zero.
func intMeanOver[T int32 | int64](x []T, shape, outShape []int, count int) []T {
	sum := sumOver[T, T](x, shape, outShape)
	for i := range sum {
		sum[i] /= T(count)
	}
	return sum
}

// sumOver sums x (of shape) into an array of outShape, where each reduced
// axis has size 1, accumulating in A.
func sumOver[T int32 | int64 | float32 | float64, A int32 | int64 | float64](x []T, shape, outShape []int) []A {
	rank := len(shape)
	outStrides := make([]int, rank) // 0 on reduced axes
	s := 1
	for i := rank - 1; i >= 0; i-- {
		if outShape[i] != 1 || shape[i] == 1 {
			outStrides[i] = s
		}
		s *= outShape[i]
	}
	sum := make([]A, s)
	idx := make([]int, rank)
	o := 0
	for _, v := range x {
		sum[o] += A(v)
		for i := rank - 1; i >= 0; i-- { // next index, odometer style
			idx[i]++
			o += outStrides[i]
			if idx[i] < shape[i] {
				break
			}
			o -= outStrides[i] * idx[i]
			idx[i] = 0
		}
	}
	return sum
}

// softmax is Softmax at opset 13 over FLOAT and DOUBLE tensors: exp(x -
// max) / sum of those along axis (default -1), row by row, in float64;
// and LogSoftmax (log), its logarithm, x - max - log(sum), which PyTorch's
// classifiers end with (older nodes of both are rewritten by
// coercedSoftmax).
// gonnx's calls gorgonia's, which starts a goroutine per row, all at once:
// an input of [16M, 1] took 34 s (review, 2026-12-07), and a panic in one
// of them (an empty tensor, or dims whose product wraps: FuzzGoEngineOps
// and the review) ends the process, as no recover reaches it.
type softmax struct {
	unary
	axis int
	log  bool
}

func (o *softmax) Init(n *gonnxproto.NodeProto) error {
	o.name = "softmax"
	if o.log {
		o.name = "logsoftmax"
	}
	for _, a := range n.GetAttribute() {
		if a.GetName() != "axis" {
			return ops.ErrUnsupportedAttribute(a.GetName(), o)
		}
		o.axis = int(a.GetI())
	}
	return nil
}

func (o *softmax) ValidateInputs(in []tensor.Tensor) ([]tensor.Tensor, error) {
	return ops.ValidateInputs(o, in)
}

func (o *softmax) Apply(in []tensor.Tensor) ([]tensor.Tensor, error) {
	x := dense(in[0])
	shape := x.Shape().Clone()
	axis, outer, inner, err := aroundAxis(shape, x.IsScalar(), o.axis)
	if err != nil {
		return nil, err
	}
	var backing any
	switch v := x.Data().(type) {
	case []float32:
		backing = softmaxOver(v, outer, shape[axis], inner, o.log)
	case []float64:
		backing = softmaxOver(v, outer, shape[axis], inner, o.log)
	default:
		return nil, ops.ErrInvalidInputType(0, x.Dtype().Name(), o)
	}
	return []tensor.Tensor{tensor.New(tensor.WithShape(shape...), tensor.WithBacking(backing))}, nil
}

// softmaxOver is the softmax of x, laid out as [outer, n, inner], along
// its middle axis, or its logarithm.
func softmaxOver[T float32 | float64](x []T, outer, n, inner int, log bool) []T {
	out := make([]T, len(x))
	e := make([]float64, n)
	for o := range outer {
		for i := range inner {
			base := o*n*inner + i
			m := math.Inf(-1)
			for j := range n {
				m = max(m, float64(x[base+j*inner]))
			}
			sum := 0.0
			for j := range n {
				e[j] = math.Exp(float64(x[base+j*inner]) - m)
				sum += e[j]
			}
			for j := range n {
				if log {
					out[base+j*inner] = T(float64(x[base+j*inner]) - m - math.Log(sum))
				} else {
					out[base+j*inner] = T(e[j] / sum)
				}
			}
		}
	}
	return out
}

// maxPool is 2-D max pooling over NCHW input: kernel_shape, strides, pads,
// dilations and ceil_mode; auto_pad NOTSET (or VALID) and storage_order 0;
// one output (the Indices output is refused). FLOAT and DOUBLE, and INT8
// and UINT8 as ONNX Runtime has them since opset 12, which a model of an
// INT8 MaxPool was refused for: a window's padding counts as the type's
// least value (-inf, -128, 0), as ONNX Runtime's.
type maxPool struct {
	unary
	kernel, strides, pads, dilations []int
	ceil                             bool
}

func (o *maxPool) Init(n *gonnxproto.NodeProto) error {
	if o.name == "" {
		o.name = "maxpool" // averagePool's Init names its own
	}
	if len(n.GetOutput()) > 1 {
		return fmt.Errorf("%s: the Indices output is not supported", o)
	}
	o.strides, o.pads, o.dilations = []int{1, 1}, []int{0, 0, 0, 0}, []int{1, 1}
	ints := func(a *gonnxproto.AttributeProto, want int) ([]int, error) {
		if len(a.GetInts()) != want {
			return nil, ops.ErrInvalidAttribute(a.GetName(), o)
		}
		out := make([]int, want)
		for i, v := range a.GetInts() {
			out[i] = int(v)
		}
		return out, nil
	}
	var err error
	for _, a := range n.GetAttribute() {
		switch a.GetName() {
		case "kernel_shape":
			o.kernel, err = ints(a, 2)
		case "strides":
			o.strides, err = ints(a, 2)
		case "pads":
			o.pads, err = ints(a, 4)
		case "dilations":
			o.dilations, err = ints(a, 2)
		case "ceil_mode":
			o.ceil = a.GetI() != 0
		case "auto_pad":
			if s := string(a.GetS()); s != "NOTSET" && s != "VALID" && s != "" {
				return ops.ErrUnsupportedAttribute(a.GetName()+"="+s, o)
			}
		case "storage_order":
			if a.GetI() != 0 {
				return ops.ErrUnsupportedAttribute(a.GetName(), o)
			}
		default:
			return ops.ErrUnsupportedAttribute(a.GetName(), o)
		}
		if err != nil {
			return err
		}
	}
	if o.kernel == nil {
		return fmt.Errorf("%s: kernel_shape is required (2-D pooling only)", o)
	}
	if slices.Min(o.kernel) < 1 || slices.Min(o.strides) < 1 || slices.Min(o.dilations) < 1 || slices.Min(o.pads) < 0 {
		return ops.ErrInvalidAttribute("kernel_shape/strides/dilations/pads", o)
	}
	// The sanitizer's limit too: the index arithmetic of pool2D stays far
	// from overflowing.
	if max(slices.Max(o.kernel), slices.Max(o.strides), slices.Max(o.dilations), slices.Max(o.pads)) > 1<<31 {
		return ops.ErrInvalidAttribute("kernel_shape/strides/dilations/pads past 2^31", o)
	}
	return nil
}

// outputElems implements sizer.
func (o *maxPool) outputElems(in []tensor.Tensor) int64 {
	if len(in) < 1 || in[0] == nil || len(in[0].Shape()) < 2 {
		return 0
	}
	return spatialElems(in[0].Shape(), int64(in[0].Shape()[1]), o.pads, o.strides)
}

// GetInputTypeConstraints implements ops.Operator.
func (o *maxPool) GetInputTypeConstraints() [][]tensor.Dtype {
	return [][]tensor.Dtype{{tensor.Float32, tensor.Float64, tensor.Int8, tensor.Uint8}}
}

func (o *maxPool) ValidateInputs(in []tensor.Tensor) ([]tensor.Tensor, error) {
	return ops.ValidateInputs(o, in)
}

// outDims is the output's height and width for input shape s.
func (o *maxPool) outDims(s tensor.Shape) (outH, outW int, err error) {
	if len(s) != 4 {
		return 0, 0, ops.ErrInvalidInput(fmt.Sprintf("input of rank %d; 2-D pooling takes N x C x H x W", len(s)), o)
	}
	dims := [2]*int{&outH, &outW}
	for i := range 2 {
		span := s[2+i] + o.pads[i] + o.pads[i+2] - (o.kernel[i]-1)*o.dilations[i] - 1
		if span < 0 {
			return 0, 0, ops.ErrInvalidInput("kernel larger than the padded input", o)
		}
		d := span/o.strides[i] + 1
		if o.ceil && span%o.strides[i] != 0 {
			d++
			// The last window must start inside the input or its left
			// padding (ONNX and PyTorch drop one that would not).
			if (d-1)*o.strides[i] >= s[2+i]+o.pads[i] {
				d--
			}
		}
		*dims[i] = d
	}
	return outH, outW, nil
}

// work is how many comparisons pool2D makes: each output element looks
// at the taps of its window that fall inside the input, at most the
// kernel's or the input's size per axis, whichever is less. A kernel of
// 2^31 with pads of 2^30 and strides of 2^31 gave a 1x1 output whose
// window the loop walked whole, 7 s per channel (review, 2026-12-07).
func (o *maxPool) work(in []tensor.Tensor) (int64, bool) {
	if len(in) < 1 || in[0] == nil {
		return 0, false
	}
	s := in[0].Shape()
	outH, outW, err := o.outDims(s)
	if err != nil {
		return 0, false
	}
	n := mul(mul(mul(int64(s[0]), int64(s[1])), int64(outH)), int64(outW))
	return mul(mul(n, int64(min(o.kernel[0], s[2]))), int64(min(o.kernel[1], s[3]))), true
}

func (o *maxPool) Apply(in []tensor.Tensor) ([]tensor.Tensor, error) {
	x := dense(in[0])
	s := x.Shape()
	outH, outW, err := o.outDims(s)
	if err != nil {
		return nil, err
	}
	var backing any
	switch v := x.Data().(type) {
	case []float32:
		backing = pool2D(v, s, outH, outW, o, float32(math.Inf(-1)))
	case []float64:
		backing = pool2D(v, s, outH, outW, o, math.Inf(-1))
	case []int8:
		backing = pool2D(v, s, outH, outW, o, math.MinInt8)
	case []uint8:
		backing = pool2D(v, s, outH, outW, o, 0)
	default:
		return nil, ops.ErrInvalidInputType(0, x.Dtype().Name(), o)
	}
	return []tensor.Tensor{tensor.New(tensor.WithShape(s[0], s[1], outH, outW), tensor.WithBacking(backing))}, nil
}

// pool2D is the max of each window of x, least when none of its taps is
// inside x.
func pool2D[T float32 | float64 | int8 | uint8](x []T, s tensor.Shape, outH, outW int, o *maxPool, least T) []T {
	h, w := s[2], s[3]
	out := make([]T, s[0]*s[1]*outH*outW)
	k := 0
	for plane := 0; plane < s[0]*s[1]; plane++ {
		src := x[plane*h*w : (plane+1)*h*w]
		for oy := range outH {
			y0 := oy*o.strides[0] - o.pads[0]
			kyLo, kyHi := taps(y0, h, o.kernel[0], o.dilations[0])
			for ox := range outW {
				x0 := ox*o.strides[1] - o.pads[1]
				kxLo, kxHi := taps(x0, w, o.kernel[1], o.dilations[1])
				m := least
				for ky := kyLo; ky < kyHi; ky++ {
					row := src[(y0+ky*o.dilations[0])*w:]
					for kx := kxLo; kx < kxHi; kx++ {
						if v := row[x0+kx*o.dilations[1]]; v > m {
							m = v
						}
					}
				}
				out[k] = m
				k++
			}
		}
	}
	return out
}

// averagePool is AveragePool at opsets 11 to 17 (version 11), FLOAT as
// in ONNX Runtime's CPU provider, 2-D over NCHW input: kernel_shape,
// strides, pads, ceil_mode (maxPool's, which it shares the output's size
// and the bounds with) and count_include_pad; auto_pad NOTSET or VALID.
// Each output is the sum of its window's elements inside the input,
// divided by their count, or with count_include_pad by the kernel's size
// whatever part of the window lies in the padding or past it, as ONNX
// Runtime's. A pad as large as the kernel is refused, as ONNX Runtime
// refuses it. PyTorch exports AvgPool2d as it (with a Pad before it where
// it counts its padding).
type averagePool struct {
	maxPool
	includePad bool
}

func (o *averagePool) Init(n *gonnxproto.NodeProto) error {
	o.name = "averagepool"
	if len(n.GetOutput()) > 1 {
		return fmt.Errorf("%s: %d outputs, where it has 1", o, len(n.GetOutput()))
	}
	// The attributes it shares with MaxPool are read by maxPool's Init,
	// which takes dilations and storage_order too: not AveragePool's
	// before opset 19.
	shared := &gonnxproto.NodeProto{Output: n.GetOutput()}
	for _, a := range n.GetAttribute() {
		switch a.GetName() {
		case "count_include_pad":
			o.includePad = a.GetI() != 0
		case "dilations", "storage_order":
			return ops.ErrUnsupportedAttribute(a.GetName(), o)
		default:
			shared.Attribute = append(shared.Attribute, a)
		}
	}
	if err := o.maxPool.Init(shared); err != nil {
		return err
	}
	for i, k := range o.kernel {
		if o.pads[i] >= k || o.pads[i+2] >= k {
			return ops.ErrInvalidAttribute("pads as large as the kernel", o)
		}
	}
	return nil
}

// GetInputTypeConstraints implements ops.Operator.
func (o *averagePool) GetInputTypeConstraints() [][]tensor.Dtype {
	return [][]tensor.Dtype{float32Only}
}

func (o *averagePool) ValidateInputs(in []tensor.Tensor) ([]tensor.Tensor, error) {
	return ops.ValidateInputs(o, in)
}

func (o *averagePool) Apply(in []tensor.Tensor) ([]tensor.Tensor, error) {
	x := dense(in[0])
	s := x.Shape()
	outH, outW, err := o.outDims(s)
	if err != nil {
		return nil, err
	}
	v, ok := x.Data().([]float32)
	if !ok {
		return nil, ops.ErrInvalidInputType(0, x.Dtype().Name(), o)
	}
	h, w := s[2], s[3]
	out := make([]float32, s[0]*s[1]*outH*outW)
	k := 0
	for plane := 0; plane < s[0]*s[1]; plane++ {
		src := v[plane*h*w : (plane+1)*h*w]
		for oy := range outH {
			y0 := oy*o.strides[0] - o.pads[0]
			yLo, yHi := max(y0, 0), min(y0+o.kernel[0], h)
			for ox := range outW {
				x0 := ox*o.strides[1] - o.pads[1]
				xLo, xHi := max(x0, 0), min(x0+o.kernel[1], w)
				var sum float32
				for y := yLo; y < yHi; y++ {
					for _, e := range src[y*w+xLo : y*w+xHi] {
						sum += e
					}
				}
				count := max(yHi-yLo, 0) * max(xHi-xLo, 0)
				if o.includePad {
					count = o.kernel[0] * o.kernel[1]
				}
				out[k] = sum / float32(count)
				k++
			}
		}
	}
	return []tensor.Tensor{tensor.New(tensor.WithShape(s[0], s[1], outH, outW), tensor.WithBacking(out))}, nil
}

// taps is the range [lo, hi) of a window's taps, starting at start and d
// apart, k of them, that fall inside [0, size): the loops above visit
// only those, however far the window reaches into the padding.
func taps(start, size, k, d int) (lo, hi int) {
	if start < 0 {
		lo = min((-start+d-1)/d, k)
	}
	hi = k
	if last := size - 1 - start; last < 0 {
		hi = 0
	} else if last/d+1 < k {
		hi = last/d + 1
	}
	return lo, max(lo, hi)
}

// dense returns t as a dense tensor laid out in order.
func dense(t tensor.Tensor) tensor.Tensor {
	if d, ok := t.(*tensor.Dense); ok && d.IsMaterializable() {
		return d.Materialize()
	}
	return t
}

// aroundAxis resolves an operator's axis attribute (negative counts from
// the end) against shape, and gives the elements before it and after it:
// the axis's dimension repeats outer times, each element inner apart. A
// scalar, or an axis out of range, is ONNX's axis error.
func aroundAxis(shape tensor.Shape, scalar bool, axis int) (a, outer, inner int, err error) {
	r := len(shape)
	if scalar || axis < -r || axis >= r {
		return 0, 0, 0, ops.ErrAxisOutOfRange(-r, r, axis)
	}
	a = (axis + r) % r
	outer, inner = 1, 1
	for _, d := range shape[:a] {
		outer *= d
	}
	for _, d := range shape[a+1:] {
		inner *= d
	}
	return a, outer, inner, nil
}
