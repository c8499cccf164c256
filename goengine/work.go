package goengine

import (
	"fmt"
	"slices"
	"sync"
	"time"

	"gorgonia.org/tensor"
)

// A pure-Go operator cannot be stopped once it runs: the run's deadline
// (TIMEOUT, else MODEL_EXECUTION_TIMEOUT) is checked between operators,
// and in the enclave build there is no worker process to kill. The memory
// bounds (bound.go) leave room for operators whose work grows faster than
// their tensors: a MatMul of three 12000x12000 matrices holds 1.7 GB but
// does 1.7e12 multiply-adds, many minutes here. So before an operator
// whose work is a product of its dimensions runs (MatMul, Gemm, Conv,
// ConvTranspose, RNN, GRU, LSTM; MaxPool and AveragePool, whose window
// their attributes size, counting a comparison or an addition as a
// multiply-add; Pow, whose every element takes a logarithm and an
// exponential, powWork; MatMul's batches and the
// recurrent operators' steps besides, batchWork and stepWork), its work is
// counted from its inputs, and it is refused when the engine could not
// do them in the time left before the deadline even at workFactor times
// the rate it measured at its first such check. An operator is thus never
// refused for want of time it could have finished in (Pow aside,
// powWork), and none overruns the deadline by more than about workFactor
// times what was left.

// workFactor is the margin over the measured rate (caches, a faster
// kernel than the calibration's, a quiet machine).
const workFactor = 4

// stepWork is what gonnx's RNN, GRU and LSTM cost a step of the sequence
// beyond their multiply-adds, counted in multiply-adds at the rate of
// matrix products: each step slices the input, transposes the weights and
// makes a dozen small tensors, so an LSTM of hidden size 2 over 1M steps
// took 340 s where its 3.2e7 multiply-adds counted for milliseconds
// (review). Measured here (2000 steps of hidden size 2, best of 3, in 4
// runs at 4.2e9 to 5.6e9 multiply-adds a second): RNN 16 to 29 us a step,
// GRU 49 to 109, LSTM 59 to 117, so at least 6.8e4, 2.1e5 and 2.9e5
// multiply-adds; rounded down, as the rates are measured at their best,
// and workFactor is the margin.
var stepWork = map[string]int64{"RNN": 5e4, "GRU": 2e5, "LSTM": 2.5e5}

// batchWork is what MatMul costs a matrix of its batch beyond its
// multiply-adds, counted as stepWork is: each is a call into gorgonia on
// tensor headers of its own (ops.go), so a MatMul of [N, 1, 1] by itself
// counted N multiply-adds and took about 2 us each. Measured here
// (100,000 batches of 1x1 and 4x4 matrices, best of 3, in 3 runs): 1.5 to
// 2.1 us a batch, at least 9.2e3 multiply-adds; rounded down.
const batchWork = 8e3

// tapWork and rowWork are what ConvTranspose costs beyond its
// multiply-adds (convtranspose.go), counted in multiply-adds at the
// convolution's rate: for each kernel tap of each pair of input and
// output channels, scatter works out which input positions land inside
// the output (a division an axis), and for each row of those it works
// out their offsets. Counted by its multiply-adds alone, a ConvTranspose
// of [100, 100, 1] by [100, 100, 1] (one tap, one row and one
// multiply-add a pair) took 16 to 34 times what they counted for, so a
// run overran its deadline by that much times workFactor. Measured here
// (best rates 9.8e8 a second): 16 to 17 multiply-adds a pair of that
// one, 7 to 10 a tap that lands nowhere ([1, 10, 1] by [10, 10, 1000],
// dilation 1000), 5 to 7 a row of one element ([1, 1, 1000, 1] by [1,
// 100, 10, 1]); rounded down, as stepWork is.
const (
	tapWork = 10
	rowWork = 6
)

// powWork is what Pow costs an element, counted in multiply-adds at the
// rate of the direct convolution: cPow's double-double logarithm and
// exponential took 0.4 to 0.6 us an element here (200,000 of them, 3
// runs), at least 250 multiply-adds at the best rate measured. Small
// integer powers (exactPow) take 15 ns: a Pow of those only is counted
// 40 times dearer than it is, and may be refused with time enough left.
const powWork = 250

// opWork is how many multiply-adds op does on these inputs, at most, and
// false when op is not one whose work grows faster than its tensors. It
// saturates at math.MaxInt64.
func opWork(opType string, op any, in []tensor.Tensor) (int64, bool) {
	dims := func(i int) []int {
		if i >= len(in) || in[i] == nil {
			return nil
		}
		return in[i].Shape()
	}
	elems := func(i int) int64 {
		n := int64(1)
		for _, d := range dims(i) {
			n = mul(n, int64(d))
		}
		return n
	}
	switch opType {
	case "MatMul":
		a := dims(0)
		out, ok := outputElems(opType, in)
		if !ok || len(a) == 0 {
			return 0, false
		}
		batches := int64(1)
		for _, d := range broadcast(trim(shape64(a), 2), trim(shape64(dims(1)), 2)) {
			batches = mul(batches, d)
		}
		return add(mul(out, int64(a[len(a)-1])), mul(batches, batchWork)), true
	case "Gemm":
		c := dims(1)
		if len(dims(0)) != 2 || len(c) != 2 {
			return 0, false
		}
		// M x K is A's size whichever way it is transposed; N is at most
		// B's larger dimension.
		return mul(elems(0), int64(max(c[0], c[1]))), true
	case "Conv":
		sz, ok := op.(sizer)
		w := dims(1)
		if !ok || len(w) < 2 || w[0] == 0 {
			return 0, false
		}
		// Each output element is a dot product over one group's input
		// channels and the kernel: W's size over its output channels.
		return mul(sz.outputElems(in), elems(1)/int64(w[0])), true
	case "ConvTranspose":
		x, w := dims(0), dims(1)
		if len(x) < 3 || len(w) < 2 || w[0] == 0 || slices.Contains(x, 0) {
			return 0, false
		}
		// Each input plane meets each tap of its group's kernels (W's
		// size over its input channels): a tap costs tapWork, and at most
		// each row of the plane rowWork and each of its elements a
		// multiply-add (scatter visits only those that land inside the
		// output).
		plane := elems(0) / (int64(x[0]) * int64(x[1]))
		rows := plane / int64(x[len(x)-1])
		taps := mul(int64(x[0])*int64(x[1]), elems(1)/int64(w[0]))
		return mul(taps, add(add(tapWork, mul(rows, rowWork)), plane)), true
	case "MaxPool", "AveragePool":
		if p, ok := op.(interface {
			work([]tensor.Tensor) (int64, bool)
		}); ok {
			return p.work(in)
		}
		return 0, false
	case "Pow":
		out, ok := outputElems(opType, in)
		return mul(out, powWork), ok
	case "RNN", "GRU", "LSTM":
		x := dims(0)
		if len(x) < 2 {
			return 0, false
		}
		// Each step of each sequence multiplies by W and R, and each step
		// costs stepWork besides.
		return add(mul(mul(int64(x[0]), int64(x[1])), add(elems(1), elems(2))), mul(int64(x[0]), stepWork[opType])), true
	}
	return 0, false
}

// checkWork refuses op when its work cannot be done in the time left at
// workFactor times r's rate for it.
func checkWork(opType string, op any, in []tensor.Tensor, left time.Duration, r rates) error {
	w, ok := opWork(opType, op, in)
	rate := r.matMul
	if opType == "Conv" || opType == "ConvTranspose" || opType == "MaxPool" || opType == "AveragePool" || opType == "Pow" || opType == "MatMul" && len(in) > 0 && in[0] != nil && intTypes[in[0].Dtype()] {
		rate = r.conv // loops of the same kind, in ops.go
	}
	if !ok || float64(w) <= left.Seconds()*workFactor*rate {
		return nil
	}
	return fmt.Errorf("%s would do %d multiply-adds: more than this engine can do in the %v left before the run's deadline (TIMEOUT, else MODEL_EXECUTION_TIMEOUT)",
		opType, w, left.Round(time.Millisecond))
}

// rates are the engine's multiply-adds per second on this machine: its
// matrix products (MatMul, Gemm and the recurrent operators use gonum's)
// and its direct 2-D convolution (ops.go), whose rate is an order of
// magnitude lower here, both counted as opWork counts them. An integer
// MatMul (mulInts, loops like the convolution's) counts at the
// convolution's rate: measured here (256x256 products, best of 3, in 3
// runs), it does 1.4e9 to 2.3e9 multiply-adds a second where the
// convolution does 6.2e8 to 9.2e8 and gonum's float products 1.4e9 to
// 4.7e9, so at the float rate it could overrun by 3 times workFactor.
type rates struct{ matMul, conv float64 }

var (
	rateOnce sync.Once
	measured rates
)

// workRate measures the rates once (a 256x256 product and a 16-channel
// 32x32 convolution, best of 3 each, about 20 ms), at least 1e8 per
// second.
func workRate() rates {
	rateOnce.Do(func() {
		// Not zeros: gonum's kernels skip a zero factor's whole row.
		vals := func(n int) []float32 {
			v := make([]float32, n)
			for i := range v {
				v[i] = 1 + float32(i%7)
			}
			return v
		}
		best := func(f func() error) time.Duration {
			d := time.Duration(1<<63 - 1)
			for range 3 {
				start := time.Now()
				if f() != nil {
					return d
				}
				d = min(d, time.Since(start))
			}
			return d
		}
		rate := func(work int64, d time.Duration) float64 { return max(1e8, float64(work)/max(d.Seconds(), 1e-9)) }

		const n = 256
		a := tensor.New(tensor.WithShape(n, n), tensor.WithBacking(vals(n*n)))
		b := tensor.New(tensor.WithShape(n, n), tensor.WithBacking(vals(n*n)))
		mm := best(func() error { _, err := tensor.MatMul(a, b); return err })
		measured.matMul = rate(n*n*n, mm)

		c := &conv{group: 1, pads: []int{1, 1, 1, 1}}
		in := []tensor.Tensor{
			tensor.New(tensor.WithShape(1, 16, 32, 32), tensor.WithBacking(vals(16*32*32))),
			tensor.New(tensor.WithShape(16, 16, 3, 3), tensor.WithBacking(vals(16*16*9))),
		}
		cv := best(func() error { _, _, err := c.direct2D(in); return err })
		w, _ := opWork("Conv", c, in)
		measured.conv = rate(w, cv)
	})
	return measured
}

// shape64 is a shape as int64.
func shape64(s []int) []int64 {
	out := make([]int64, len(s))
	for i, d := range s {
		out[i] = int64(d)
	}
	return out
}
