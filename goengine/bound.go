package goengine

import (
	"fmt"
	"math"
	"sync/atomic"

	gonnxproto "github.com/advancedclimatesystems/gonnx/onnx"
	"gorgonia.org/tensor"

	"github.com/enclaveai/enclaveai/persistence"
)

// DefaultMaxTensorBytes bounds any one tensor an operator makes when the
// Engine is given no bound (MaxTensorBytes).
const DefaultMaxTensorBytes = 2 << 30

// An allocation the Go runtime cannot satisfy is not a panic but a fatal
// error that ends the process, and in the enclave build the engine runs in
// the server's: a ConstantOfShape fed [100000, 100000] (40 GB) did that
// through a client's tensor, and a Conv with pads of 100000 through its
// attributes. So before an operator runs, the size of the
// tensor it is about to make is computed from its inputs, for every
// operator whose output can be much larger than its inputs: those shaped
// by an input's values (ConstantOfShape, Expand, Tile, Range), and those
// whose output dimensions multiply (MatMul and Gemm, [100000, 1] x [1,
// 100000] is 40 GB from 800 KB, the broadcasting binary operators,
// Concat), and those whose attributes pad or widen it (Conv, ConvTranspose
// and MaxPool: sizer; RNN, GRU, LSTM: hidden_size), and Gather (a row per
// index); and
// what gonnx allocates on the way: Conv's padded copies (scratcher), the
// copies of the inputs its broadcasting operators repeat to the output's
// shape (broadcastCopies). Cast makes as
// many elements as it is given but can widen each 4 times (INT16 to
// DOUBLE: 800 MB from a client's 200 MB tensor, made before the run's
// budget saw it), so its output is bounded too, at the size of the type
// it casts to (elemSize). Other operators make at most about as many
// elements as they are given, of a type no wider (the comparisons make
// BOOL, Shape a few INT64).

// outputElems is how many elements the tensor op is about to make holds,
// at most, and false when op is not one whose output can outgrow its
// inputs. It saturates at math.MaxInt64.
func outputElems(op string, in []tensor.Tensor) (int64, bool) {
	shape := func(i int) []int64 {
		if i >= len(in) || in[i] == nil {
			return nil
		}
		s := in[i].Shape()
		out := make([]int64, len(s))
		for j, d := range s {
			out[j] = int64(d)
		}
		return out
	}
	switch op {
	case "Add", "Sub", "Mul", "Div", "Equal", "Greater", "GreaterOrEqual", "Less", "LessOrEqual",
		"And", "Or", "Xor", "PRelu", "Pow", "Where", "Max", "Min", "Sum", "Mean":
		var b []int64
		for i := range in {
			b = broadcast(b, shape(i))
		}
		return product(b), true
	case "MatMul":
		a, c := shape(0), shape(1)
		if len(a) == 0 || len(c) == 0 {
			return 0, false
		}
		m, n := int64(1), int64(1)
		if len(a) >= 2 {
			m = a[len(a)-2]
		}
		if len(c) >= 2 {
			n = c[len(c)-1]
		}
		batch := broadcast(trim(a, 2), trim(c, 2))
		return mul(mul(product(batch), m), n), true
	case "Gemm":
		a, c := shape(0), shape(1)
		if len(a) != 2 || len(c) != 2 {
			return 0, false
		}
		// transA and transB pick which dimension is kept: the larger of
		// each is a bound whichever they are.
		return mul(max(a[0], a[1]), max(c[0], c[1])), true
	case "Concat":
		var n int64
		for i := range in {
			n = add(n, product(shape(i)))
		}
		return n, true
	case "Cast":
		return product(shape(0)), true
	case "ConstantOfShape":
		return product(values(in, 0)), true
	case "Expand":
		return product(broadcast(shape(0), values(in, 1))), true
	case "Tile":
		s, r := shape(0), values(in, 1)
		n := int64(1)
		for i, d := range s {
			if i < len(r) {
				d = mul(d, r[i])
			}
			n = mul(n, d)
		}
		return n, true
	case "Range":
		v := floats(in)
		if len(v) != 3 || v[2] == 0 {
			return 0, false
		}
		n := math.Ceil((v[1] - v[0]) / v[2])
		switch {
		case n != n || n <= 0:
			return 0, true
		case n >= math.MaxInt64:
			return math.MaxInt64, true
		}
		return int64(n), true
	}
	return 0, false
}

// maxRank bounds the rank of any tensor an operator is given or makes:
// gonnx's Squeeze is quadratic in its input's rank, and an Unsqueeze of a
// client's 400,000 axes took 28 s before it (review), where any one
// operator cannot be stopped; and a snapshot holds no more dimensions than
// this, so a run's output of a larger rank broke the log and snapshots.
const maxRank = persistence.MaxRank

// outputRank is the rank of the tensor op is about to make when an
// input's values decide it (the size of an input: the axes Unsqueeze
// inserts, the shape ConstantOfShape, Reshape and Expand make), false for
// other operators, whose output's rank is at most their inputs'.
func outputRank(op string, in []tensor.Tensor) (int64, bool) {
	size := func(i int) int64 {
		if i >= len(in) || in[i] == nil {
			return 0
		}
		n := int64(1)
		for _, d := range in[i].Shape() {
			n = mul(n, int64(d))
		}
		return n
	}
	rank := func(i int) int64 {
		if i >= len(in) || in[i] == nil {
			return 0
		}
		return int64(len(in[i].Shape()))
	}
	switch op {
	case "Unsqueeze":
		return add(rank(0), size(1)), true
	case "ConstantOfShape":
		return size(0), true
	case "Reshape":
		return size(1), true
	case "Expand":
		return max(rank(0), size(1)), true
	}
	return 0, false
}

// badShape says what is wrong with t's shape, or "" when nothing is: a
// rank past maxRank, a dimension below 0, dimensions whose product passes
// 2^63, or more elements than t holds. gorgonia multiplies dimensions without checking
// (Shape.TotalSize), so a Reshape to [0, 3, 0x5555555555555556] (0
// copying the input's 1) of a 2-element tensor passed its size check with
// a product wrapped to 2, and the next operators indexed by the dims:
// Softmax's goroutines out of range (a panic no recover reaches, which
// ends the process) and ReduceMean's sum into a 64 GiB slice (a fatal
// out-of-memory; review, 2026-12-07). The model checks refuse such dims
// in a model's own tensors and constant shapes; this catches those that
// a client's tensor or a computed shape brings, before each operator runs
// and after it.
func badShape(t tensor.Tensor) string {
	if r := len(t.Shape()); r > maxRank {
		return fmt.Sprintf("has rank %d, past the engine's bound of %d dimensions", r, maxRank)
	}
	n := int64(1) // the product of the dims other than 0
	empty := false
	for _, d := range t.Shape() {
		switch {
		case d < 0:
			return fmt.Sprintf("has shape %v, with a negative dimension", t.Shape())
		case d == 0:
			empty = true
		case n > math.MaxInt64/int64(d):
			return fmt.Sprintf("has shape %v, more than 2^63 elements", t.Shape())
		default:
			n *= int64(d)
		}
	}
	if empty {
		n = 0
	}
	if d, ok := t.(*tensor.Dense); ok && !d.IsScalar() && n > int64(d.DataSize()) {
		return fmt.Sprintf("has shape %v (%d elements) but holds %d", t.Shape(), n, d.DataSize())
	}
	return ""
}

// sizer is implemented by the operators whose output size their
// attributes or an input's values decide (Conv and MaxPool: pads;
// ConvTranspose: strides, dilations, output_padding, output_shape; Pad):
// outputElems bounds the elements of their output for these inputs,
// saturating at MaxInt64.
type sizer interface {
	outputElems(in []tensor.Tensor) int64
}

// scratcher is implemented by the operators of ops.go that leave some
// cases to gonnx, whose code allocates more than the output on the way
// (Conv: a padded copy of the input and a dilated copy of the kernel):
// scratchElems bounds the largest such tensor, saturating at MaxInt64.
type scratcher interface {
	scratchElems(in []tensor.Tensor) int64
}

// spatialElems bounds a Conv's or a pool's output: n x c times, for each
// spatial dimension of x, (size + pads) / stride + 1 (the kernel only
// shrinks it). pads are begins then ends; nil pads and strides mean 0 and
// 1.
func spatialElems(x []int, c int64, pads, strides []int) int64 {
	if len(x) < 3 {
		return 0
	}
	n := mul(int64(x[0]), c)
	spatial := x[2:]
	for i, d := range spatial {
		size := int64(d)
		if len(pads) == 2*len(spatial) {
			size = add(add(size, int64(max(pads[i], 0))), int64(max(pads[i+len(spatial)], 0)))
		}
		stride := int64(1)
		if i < len(strides) && strides[i] > 0 {
			stride = int64(strides[i])
		}
		n = mul(n, size/stride+1)
	}
	return n
}

// runBudget bounds what one run's operators make all together. gonnx
// keeps every tensor a run makes until the run ends, so the bound on each
// tensor (checkOutput) alone let many large ones add up past the heap: the
// run is stopped at the operator whose outputs pass the bound, which
// therefore holds the run to at most the bound plus one tensor. An output
// that is a view of its input (Reshape) is counted as a copy: the count
// errs on the safe side. The bound is the engine's across the runs under
// way (inFlight), not each run's: threads-per-queue runs go at once, and
// two runs of 1.9 GB each under a 2 GiB bound per run took the server to
// 3.9 GB (review).
type runBudget struct {
	max, used int64
}

// inFlight is what the runs under way in this process have made so far,
// together (runBudget.add, done).
var inFlight atomic.Int64

// add counts an operator's outputs against the budget.
func (b *runBudget) add(opType string, outs []tensor.Tensor) error {
	var n int64
	for _, t := range outs {
		if t != nil {
			n += int64(t.Shape().TotalSize()) * int64(t.Dtype().Size())
		}
	}
	b.used += n
	if all := inFlight.Add(n); all > b.max {
		return fmt.Errorf("%s: the run's tensors would total %d bytes, %d with the other runs under way, past the engine's bound of %d bytes (maxmemory's headroom, else %d)",
			opType, b.used, all, b.max, int64(DefaultMaxTensorBytes))
	}
	return nil
}

// done gives back what the run made, once it is over.
func (b *runBudget) done() { inFlight.Add(-b.used) }

// left is what the runs under way leave of bound: the most one tensor an
// operator makes may take (checkOutput).
func left(bound int64) int64 { return bound - inFlight.Load() }

// checkOutput refuses to run op (of type opType) when the tensor it would
// make passes maxBytes.
func checkOutput(opType string, op any, node *gonnxproto.NodeProto, in []tensor.Tensor, maxBytes int64) error {
	n, ok := outputElems(opType, in)
	if !ok {
		n, ok = recurrentElems(opType, node, in)
	}
	if !ok {
		n, ok = gatherElems(opType, node, in)
	}
	if sz, isSizer := op.(sizer); isSizer {
		n, ok = sz.outputElems(in), true
	}
	if sc, isScratcher := op.(scratcher); isScratcher {
		n, ok = max(n, sc.scratchElems(in)), true
	}
	if !ok {
		return nil
	}
	copies := broadcastCopies(opType, node, in)
	if add(n, copies) <= maxBytes/elemSize(opType, node, in) {
		return nil
	}
	if copies > 0 {
		return fmt.Errorf("%s would make a tensor of %d elements and copies of its inputs broadcast to its shape, %d elements in all, past the engine's bound of %d bytes, what the runs under way leave (of maxmemory's headroom, else %d)",
			opType, n, add(n, copies), maxBytes, int64(DefaultMaxTensorBytes))
	}
	return fmt.Errorf("%s would make a tensor of %d elements, past the engine's bound of %d bytes, what the runs under way leave (of maxmemory's headroom, else %d)",
		opType, n, maxBytes, int64(DefaultMaxTensorBytes))
}

// broadcastCopies is how many elements gonnx's copies of op's inputs hold
// beside its output. Its binary operators (ops/multidir_broadcast.go),
// and PRelu and Gemm for slope and C (ops/unidir_broadcast.go), repeat
// each input whose shape is not the result's to that shape
// (tensor.Repeat) before they compute: Add of [5000, 1] and [1, 5000]
// made two copies of 100 MB beside its 100 MB output, 305 MB under a
// maxmemory of 128 MB (review). Each such input counts at the result's
// size. (MatMul broadcasts without copies: ops.go.)
func broadcastCopies(op string, node *gonnxproto.NodeProto, in []tensor.Tensor) int64 {
	shape := func(i int) []int64 {
		if i >= len(in) || in[i] == nil {
			return nil
		}
		out := make([]int64, len(in[i].Shape()))
		for j, d := range in[i].Shape() {
			out[j] = int64(d)
		}
		return out
	}
	// copied is the size of the result when input i is not already of its
	// shape (aligned on the right, 1s before it).
	copied := func(i int, result []int64) int64 {
		s := shape(i)
		if s == nil || len(s) > len(result) {
			return 0
		}
		for j := range result {
			d := int64(1)
			if k := j - (len(result) - len(s)); k >= 0 {
				d = s[k]
			}
			if d != result[j] {
				return product(result)
			}
		}
		return 0
	}
	var n int64
	switch op {
	case "Add", "Sub", "Mul", "Div", "Equal", "Greater", "GreaterOrEqual", "Less", "LessOrEqual", "And", "Or", "Xor":
		var result []int64
		for i := range in {
			result = broadcast(result, shape(i))
		}
		for i := range in {
			n = add(n, copied(i, result))
		}
	case "PRelu":
		n = copied(1, shape(0))
	case "Gemm":
		a, b := shape(0), shape(1)
		if len(a) != 2 || len(b) != 2 {
			return 0
		}
		rows, cols := a[0], b[1]
		for _, at := range node.GetAttribute() {
			switch {
			case at.GetName() == "transA" && at.GetI() != 0:
				rows = a[1]
			case at.GetName() == "transB" && at.GetI() != 0:
				cols = b[0]
			}
		}
		n = copied(2, []int64{rows, cols})
	}
	return n
}

// elemSize is the most bytes an element of what op makes takes: for Cast
// the size of the type it casts to, else the widest of its inputs' (at
// least 4).
func elemSize(op string, node *gonnxproto.NodeProto, in []tensor.Tensor) int64 {
	if op == "Cast" {
		for _, a := range node.GetAttribute() {
			if a.GetName() == "to" {
				return castSize(a.GetI())
			}
		}
	}
	size := int64(4)
	for _, t := range in {
		if t != nil {
			size = max(size, int64(t.Dtype().Size()))
		}
	}
	return size
}

// castSize is the size of an element of type to (an ONNX
// TensorProto.DataType), 8 for a type gonnx does not cast to: none is
// wider.
func castSize(to int64) int64 {
	switch gonnxproto.TensorProto_DataType(to) {
	case gonnxproto.TensorProto_INT8, gonnxproto.TensorProto_UINT8:
		return 1
	case gonnxproto.TensorProto_INT16, gonnxproto.TensorProto_UINT16:
		return 2
	case gonnxproto.TensorProto_FLOAT, gonnxproto.TensorProto_INT32, gonnxproto.TensorProto_UINT32:
		return 4
	}
	return 8
}

// recurrentElems bounds what RNN, GRU and LSTM make: their outputs and
// gates are [seq, directions, batch, hidden_size x gates], hidden_size an
// attribute (the sanitizer allows up to 2^24) and batch the input's: 16M
// hidden units for a batch of 1000 ended the process.
func recurrentElems(op string, node *gonnxproto.NodeProto, in []tensor.Tensor) (int64, bool) {
	var gates int64
	switch op {
	case "RNN":
		gates = 1
	case "GRU":
		gates = 3
	case "LSTM":
		gates = 4
	}
	if gates == 0 || node == nil || len(in) == 0 || in[0] == nil {
		return 0, false
	}
	hidden, dirs := int64(1), int64(1)
	for _, a := range node.GetAttribute() {
		switch a.GetName() {
		case "hidden_size":
			hidden = max(a.GetI(), 1)
		case "direction":
			if string(a.GetS()) == "bidirectional" {
				dirs = 2
			}
		}
	}
	x := in[0].Shape()
	if len(x) < 2 {
		return 0, false
	}
	return mul(mul(mul(mul(int64(x[0]), int64(x[1])), dirs), hidden), gates), true
}

// gatherElems bounds what Gather makes: a row of the data (its elements
// over its dimension axis) for each index. 8192 indices into a [1,
// 1048576] tensor asked gonnx for 32 GiB (review, 2026-12-07).
func gatherElems(op string, node *gonnxproto.NodeProto, in []tensor.Tensor) (int64, bool) {
	if op != "Gather" || len(in) < 2 || in[0] == nil || in[1] == nil {
		return 0, false
	}
	data := in[0].Shape()
	axis := int64(0)
	for _, a := range node.GetAttribute() {
		if a.GetName() == "axis" {
			axis = a.GetI()
		}
	}
	r := int64(len(data))
	if axis < 0 {
		axis += r
	}
	if axis < 0 || axis >= r {
		return 0, false // gonnx refuses it before it allocates
	}
	n := int64(1)
	for i, d := range data {
		if int64(i) != axis {
			n = mul(n, int64(d))
		}
	}
	for _, d := range in[1].Shape() {
		n = mul(n, int64(d))
	}
	return n, true
}

// broadcast is the shape two shapes broadcast to, as ONNX does: aligned on
// the right, each dimension the larger (a 1 takes the other's).
func broadcast(a, b []int64) []int64 {
	if len(a) < len(b) {
		a, b = b, a
	}
	out := append([]int64(nil), a...)
	for i := range b {
		j := len(out) - len(b) + i
		out[j] = max(out[j], b[i])
	}
	return out
}

func trim(s []int64, n int) []int64 {
	if len(s) <= n {
		return nil
	}
	return s[:len(s)-n]
}

// values reads input i, an integer tensor of a shape or of repeats, as
// int64 (negative values as 0: the operator refuses them itself).
func values(in []tensor.Tensor, i int) []int64 {
	if i >= len(in) || in[i] == nil {
		return nil
	}
	nums := numbers(in[i])
	out := make([]int64, len(nums))
	for j, v := range nums {
		switch {
		case v >= math.MaxInt64:
			out[j] = math.MaxInt64
		case v > 0:
			out[j] = int64(v)
		}
	}
	return out
}

// floats reads Range's three scalar inputs.
func floats(in []tensor.Tensor) []float64 {
	var out []float64
	for _, t := range in {
		if t == nil {
			return nil
		}
		v := numbers(t)
		if len(v) != 1 {
			return nil
		}
		out = append(out, v[0])
	}
	return out
}

// numbers is a tensor's data, scalar or not, of an integer or float type,
// as float64 (nil for another type).
func numbers(t tensor.Tensor) []float64 {
	switch d := t.Data().(type) {
	case float32:
		return []float64{float64(d)}
	case float64:
		return []float64{d}
	case int32:
		return []float64{float64(d)}
	case int64:
		return []float64{float64(d)}
	case []float32:
		return widen(d)
	case []float64:
		return d
	case []int32:
		return widen(d)
	case []int64:
		return widen(d)
	}
	return nil
}

func widen[T int32 | int64 | float32](d []T) []float64 {
	out := make([]float64, len(d))
	for i, v := range d {
		out[i] = float64(v)
	}
	return out
}

func product(s []int64) int64 {
	n := int64(1)
	for _, d := range s {
		n = mul(n, d)
	}
	return n
}

// mul and add saturate at math.MaxInt64 (the operands are not negative).
func mul(a, b int64) int64 {
	if a == 0 || b == 0 {
		return 0
	}
	if a > math.MaxInt64/b {
		return math.MaxInt64
	}
	return a * b
}

func add(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}
