package modelstore

import (
	"bytes"
	"slices"
	"time"
)

// Auto-batching (RedisAI's BATCHSIZE, MINBATCHSIZE, MINBATCHTIMEOUT): when
// a RunQueue worker takes a request for a batched model, it also takes the
// queued requests for the same model whose inputs agree in everything but
// dimension 0, concatenates them along it, runs them once and splits the
// outputs back. A batch is whatever the queue holds when a worker is free,
// once the goroutines ready to run have had their turn to queue
// (settleLocked), with one wait: under load, a request that would run
// alone waits a little for company (companyWait). Otherwise nothing waits
// for a batch to fill unless MINBATCHSIZE asks it to.

// batchDim is dimension 0 shared by every input, or 0 when they disagree
// or one is a scalar (such a request runs alone).
func batchDim(inputs []*Tensor) int64 {
	var n int64
	for i, t := range inputs {
		if t == nil || len(t.Shape) == 0 {
			return 0
		}
		if i == 0 {
			n = t.Shape[0]
		} else if t.Shape[0] != n {
			return 0
		}
	}
	return n
}

// compatible: b may join a batch led by a (same model, same number of
// inputs, each with the same dtype, rank and dimensions but dimension 0).
func compatible(a, b *job) bool {
	if a.m != b.m || len(a.req.Inputs) != len(b.req.Inputs) || b.size == 0 {
		return false
	}
	for i := range a.req.Inputs {
		x, y := a.req.Inputs[i], b.req.Inputs[i]
		if x.DType != y.DType || len(x.Shape) != len(y.Shape) || !slices.Equal(x.Shape[1:], y.Shape[1:]) {
			return false
		}
	}
	return true
}

// gather forms the batch led by the job at pending[i] (a batched model's),
// adding compatible jobs behind it until BATCHSIZE is reached. ready is
// false when MINBATCHSIZE is not reached and its timeout (if any) has not
// passed since the leader was queued, or when the leader would run alone
// while the server is busy (Busy) and its wait for company has not passed
// (companyWait); then at is when to look again.
func gather(pending []*job, i int, now time.Time, busy bool) (batch []*job, ready bool, at time.Time) {
	front := pending[i]
	m := front.m
	batch = append(batch, front)
	acc := front.size
	for _, j := range pending[i+1:] {
		if acc >= m.BatchSize {
			break
		}
		if compatible(front, j) {
			batch = append(batch, j)
			acc += j.size
		}
	}
	if min := m.MinBatchSize; min > 0 && acc < min && !m.released.Load() {
		if m.MinBatchTimeout <= 0 {
			// No timeout: look again now and then, as RedisAI's workers
			// do (a deleted model runs what it has at once).
			return batch, false, now.Add(poll)
		}
		at = front.req.Queued.Add(time.Duration(m.MinBatchTimeout) * time.Millisecond)
		if now.Before(at) {
			return batch, false, at
		}
	}
	if len(batch) == 1 && acc < m.BatchSize && m.MinBatchSize <= 0 && busy && !m.released.Load() {
		if mean, ok := m.meanRun(); ok {
			if at := front.req.Queued.Add(min(mean, companyWait)); now.Before(at) {
				return batch, false, at
			}
		}
	}
	return batch, true, time.Time{}
}

// companyWait bounds how long a batched model's request that would run
// alone waits for another to join it while the server executes other
// clients' commands (Busy); it waits at most as long as the model's mean
// run takes. A batch of one costs about what a batch of four does (a
// matrix-vector product reads every weight for one row: the MLP of
// docs/BENCHMARKS.md takes 46 µs for 1 row, 46 for 4, 90 for 10), and
// with runs short, a worker freed by one run found the queue empty and ran
// the next request alone: 62% of the MLP's runs at 32 clients were of one
// row, 14% with this wait (docs/BENCHMARKS.md, "Waiting for company"). A
// request joined by another runs at once, and a lone client's request
// never waits: Busy is false while its command is the only one executing.
const companyWait = 100 * time.Microsecond

// poll is how often a batch waiting for MINBATCHSIZE without a timeout is
// looked at again, like RedisAI's worker that re-queues such a request
// and yields for 1 ms.
const poll = 2 * time.Millisecond

// runBatch runs several requests as one (the worker holds no lock).
func runBatch(batch []*job) {
	m := batch[0].m
	first := batch[0].req
	start := time.Now()
	var total int64
	for _, j := range batch {
		total += j.size
	}
	inputs := make([]*Tensor, len(first.Inputs))
	parts := make([][]byte, len(batch))
	for i := range inputs {
		for k, j := range batch {
			parts[k] = j.req.Inputs[i].Data
		}
		in := first.Inputs[i]
		shape := append([]int64{total}, in.Shape[1:]...)
		inputs[i] = &Tensor{DType: in.DType, Shape: shape, Data: bytes.Join(parts, nil)}
	}
	// The batch's outputs may take what its requests' may together.
	var maxOutput int64
	for _, j := range batch {
		if j.req.MaxOutput <= 0 {
			maxOutput = 0
			break
		}
		maxOutput += j.req.MaxOutput
	}
	outs, err := m.runSession(inputs, first.ExecTimeout, maxOutput)
	elapsed := time.Since(start).Microseconds()
	var split [][]*Tensor
	if err == nil {
		split, err = splitOutputs(outs, batch, total)
	}
	for k, j := range batch {
		m.Stats.Calls.Add(1)
		if err != nil {
			m.Stats.Errors.Add(1)
			j.finish(nil, err)
			continue
		}
		m.Stats.Duration.Add(elapsed)
		m.Stats.Samples.Add(j.size)
		j.finish(split[k], nil)
	}
}

// splitOutputs cuts each output along dimension 0 back into the requests'
// shares. Every output must keep the batch dimension.
func splitOutputs(outs []*Tensor, batch []*job, total int64) ([][]*Tensor, error) {
	res := make([][]*Tensor, len(batch))
	for k := range res {
		res[k] = make([]*Tensor, len(outs))
	}
	for i, o := range outs {
		if o == nil {
			continue
		}
		if len(o.Shape) == 0 || o.Shape[0] != total {
			return nil, ErrBatchSize
		}
		rowElems := ShapeLen(o.Shape[1:])
		off := 0
		for k, j := range batch {
			var n int
			if o.DType == String {
				n = stringBytes(o.Data[off:], j.size*rowElems)
			} else {
				n = int(j.size * rowElems * int64(o.DType.Size()))
			}
			shape := append([]int64{j.size}, o.Shape[1:]...)
			res[k][i] = &Tensor{DType: o.DType, Shape: shape, Data: o.Data[off : off+n : off+n]}
			off += n
		}
	}
	return res, nil
}

// stringBytes is the length of the first n NUL-terminated elements of b.
func stringBytes(b []byte, n int64) int {
	off := 0
	for ; n > 0; n-- {
		off += bytes.IndexByte(b[off:], 0) + 1
	}
	return off
}
