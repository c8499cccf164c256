package modelstore

import (
	"bytes"
	"slices"
	"sync"
	"time"
)

// batcher implements RedisAI's auto-batching for one model (BATCHSIZE,
// MINBATCHSIZE, MINBATCHTIMEOUT): concurrent requests whose inputs agree
// in everything but dimension 0 are concatenated along it, run once, and
// the outputs are split back. A goroutine per batched model forms batches.
type batcher struct {
	m       *Model
	mu      sync.Mutex
	wake    chan struct{} // capacity 1: a new request or stop
	pending []*batchReq
	stopped bool
	started bool
}

type batchReq struct {
	*RunRequest
	runner *Runner
	size   int64 // dim 0 of the inputs; 0 when they disagree or are scalars
	done   chan batchResult
}

type batchResult struct {
	outs []*Tensor
	err  error
}

func newBatcher(m *Model) *batcher {
	return &batcher{m: m, wake: make(chan struct{}, 1)}
}

func (b *batcher) signal() {
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

func (b *batcher) stop() {
	b.mu.Lock()
	b.stopped = true
	b.mu.Unlock()
	b.signal()
}

// submit queues a request and waits for its result.
func (b *batcher) submit(r *Runner, req *RunRequest) ([]*Tensor, error) {
	br := &batchReq{RunRequest: req, runner: r, size: batchDim(req.Inputs), done: make(chan batchResult, 1)}
	b.mu.Lock()
	if b.stopped {
		b.mu.Unlock()
		return nil, ErrNoModel
	}
	b.pending = append(b.pending, br)
	if !b.started {
		b.started = true
		go b.loop()
	}
	b.mu.Unlock()
	b.signal()
	res := <-br.done
	return res.outs, res.err
}

func batchDim(inputs []*Tensor) int64 {
	var n int64
	for i, t := range inputs {
		if len(t.Shape) == 0 {
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

// compatible: same number of inputs, each with the same dtype, rank and
// dimensions except dimension 0.
func compatible(a, b *batchReq) bool {
	if len(a.Inputs) != len(b.Inputs) || b.size == 0 {
		return false
	}
	for i := range a.Inputs {
		x, y := a.Inputs[i], b.Inputs[i]
		if x.DType != y.DType || len(x.Shape) != len(y.Shape) || !slices.Equal(x.Shape[1:], y.Shape[1:]) {
			return false
		}
	}
	return true
}

// poll is how often a batch waiting for MINBATCHSIZE re-checks timeouts,
// like RedisAI's worker that re-queues a request and yields for 1 ms.
const poll = 2 * time.Millisecond

func (b *batcher) loop() {
	for {
		batch, wait := b.next()
		if batch == nil && wait < 0 {
			return
		}
		if batch != nil {
			b.execute(batch)
			continue
		}
		t := time.NewTimer(wait)
		select {
		case <-b.wake:
		case <-t.C:
		}
		t.Stop()
	}
}

// next picks the batch to run now, or how long to wait (-1: stopped and
// idle, the loop ends).
func (b *batcher) next() ([]*batchReq, time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := time.Now()
	// Requests whose TIMEOUT passed while queued are answered TIMEDOUT.
	live := b.pending[:0]
	for _, r := range b.pending {
		if r.Timeout > 0 && now.Sub(r.Queued) > r.Timeout {
			r.done <- batchResult{err: ErrTimedOut}
			continue
		}
		live = append(live, r)
	}
	b.pending = live
	if len(b.pending) == 0 {
		if b.stopped {
			b.started = false
			return nil, -1
		}
		return nil, time.Hour
	}
	front := b.pending[0]
	max := b.m.BatchSize
	if front.size == 0 || front.size >= max {
		b.pending = b.pending[1:]
		return []*batchReq{front}, 0
	}
	batch := []*batchReq{front}
	acc := front.size
	for _, r := range b.pending[1:] {
		if acc >= max {
			break
		}
		if compatible(front, r) {
			batch = append(batch, r)
			acc += r.size
		}
	}
	if min := b.m.MinBatchSize; min > 0 && acc < min && !b.stopped {
		to := time.Duration(b.m.MinBatchTimeout) * time.Millisecond
		if to <= 0 || now.Sub(front.Queued) < to {
			return nil, poll
		}
	}
	rest := b.pending[:0]
	for _, r := range b.pending {
		if !slices.Contains(batch, r) {
			rest = append(rest, r)
		}
	}
	b.pending = rest
	return batch, 0
}

func (b *batcher) execute(batch []*batchReq) {
	m := b.m
	if err := batch[0].runner.acquire(&RunRequest{}); err != nil {
		for _, r := range batch {
			r.done <- batchResult{err: err}
		}
		return
	}
	defer batch[0].runner.release()
	start := time.Now()
	if len(batch) == 1 {
		outs, err := m.runSession(batch[0].Inputs, batch[0].ExecTimeout)
		m.account(start, outs, err)
		batch[0].done <- batchResult{outs, err}
		return
	}
	inputs := make([]*Tensor, len(batch[0].Inputs))
	var total int64
	for _, r := range batch {
		total += r.size
	}
	for i := range inputs {
		parts := make([][]byte, len(batch))
		for j, r := range batch {
			parts[j] = r.Inputs[i].Data
		}
		first := batch[0].Inputs[i]
		shape := append([]int64{total}, first.Shape[1:]...)
		inputs[i] = &Tensor{DType: first.DType, Shape: shape, Data: bytes.Join(parts, nil)}
	}
	outs, err := m.runSession(inputs, batch[0].ExecTimeout)
	elapsed := time.Since(start).Microseconds()
	var split [][]*Tensor
	if err == nil {
		split, err = splitOutputs(outs, batch, total)
	}
	for j, r := range batch {
		m.Stats.Calls.Add(1)
		if err != nil {
			m.Stats.Errors.Add(1)
			r.done <- batchResult{err: err}
			continue
		}
		m.Stats.Duration.Add(elapsed)
		m.Stats.Samples.Add(r.size)
		r.done <- batchResult{outs: split[j]}
	}
}

// splitOutputs cuts each output along dimension 0 back into the requests'
// shares. Every output must keep the batch dimension.
func splitOutputs(outs []*Tensor, batch []*batchReq, total int64) ([][]*Tensor, error) {
	res := make([][]*Tensor, len(batch))
	for j := range res {
		res[j] = make([]*Tensor, len(outs))
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
		for j, r := range batch {
			var n int
			if o.DType == String {
				n = stringBytes(o.Data[off:], r.size*rowElems)
			} else {
				n = int(r.size * rowElems * int64(o.DType.Size()))
			}
			shape := append([]int64{r.size}, o.Shape[1:]...)
			res[j][i] = &Tensor{DType: o.DType, Shape: shape, Data: o.Data[off : off+n : off+n]}
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
