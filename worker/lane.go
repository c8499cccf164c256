package worker

import (
	"context"
	"runtime"
	"time"

	"golang.org/x/sys/unix"

	"github.com/enclaveai/enclaveai/modelstore"
)

// Runs travel on lanes beside the control channel, one run at a time
// each. A lane is two socket pairs, one per direction. The goroutine that
// runs a model in the server writes its request on the lane's request
// socket (a blocking write, which never waits: the worker's queue holds a
// group) and reads the reply itself from the reply socket (through the
// network poller: a goroutine blocked in recvmsg instead measured slower,
// 100-160 µs per round trip, as returning from the system call takes a
// processor back); in the worker one thread, locked to the lane, waits in
// recvmsg, runs the session and writes the reply, all on the thread the
// kernel woke. A run costs two wake-ups, one each way, and no thread
// polls (unless engine-reply-poll says so: below).
//
// Why two pairs: the network poller watches a socket for writability too
// (edge-triggered, always), and a Unix socket becomes writable again each
// time its peer reads a message. On one pair, the worker's read of each
// request woke the server's poller for nothing, 5% of the worker's CPU
// (`perf record -g`, unix_write_space under recvmsg) and a wake-up of a
// server thread in the middle of every run. The request socket is not in
// the poller, so nobody waits on its writability.
//
// On the control channel a run cost a hand-off to a reader goroutine on
// each side and a new reader started while the model ran: 8.5 context
// switches and 105-130 µs per round trip of linear.onnx, against 4.2 and
// 45-70 µs on a lane, and 6 µs for the run in the server's own process
// (`go test -bench Run ./worker`, 2-core VM, both builds interleaved).
//
// A proc makes lanes as runs need them, up to maxLanes, and hands each new
// one's worker end over the control channel (opLane). A lane read that
// fails means the worker is gone: the run then reports its death as the
// control channel's calls do.

// A run alone polls (Config.ReplyPoll, the engine-reply-poll directive,
// 200 µs by default). A message that wakes a thread asleep on an idle CPU
// costs what waking that CPU costs, which on a virtual machine is dear: on
// the 2-vCPU VM of docs/BENCHMARKS.md, AI.MODELEXECUTE of the mlp at one
// client took 103 µs at p50 with the server and its worker pinned to one
// CPU against 183 µs spread over two, and a profile of the worker put 10%
// of its CPU in waking the server's thread (sock_def_readable: the
// interrupt to the idle CPU) and 12% in its own switches back from sleep.
// So a run that is all the server is doing (modelstore.Alone: one client,
// the only one to send commands for modelstore.SoloAfter, its commands
// executing, one request in the run queues) polls its lane for the reply
// for at most ReplyPoll, yielding its CPU between polls, and stops as soon
// as anything else arrives; its request tells the worker's thread to poll
// for the next request as long once it has replied (putPoll), so that the
// client's next run finds it awake. Past that, each side sleeps, as every
// run does when several clients send commands. With both polls (200 µs),
// MODELEXECUTE at one client (`redis-benchmark -c 1`) took 79 µs at p50
// against 159-175 µs, and bench/loop's mlp loop at one client ran at
// 0.79-0.85x the floor (five runs, polls of 100 to 300 µs) against
// 0.60-0.62x, its server and worker using about 90 µs more CPU a loop; at
// 8 clients nothing polls and the loop ran as fast as without. (The
// machine has since changed under the same code: on 2026-12-06 that
// commit's build ran the loop at 0.48-0.55x, and polling gave 0.51x
// against 0.37x without it; docs/BENCHMARKS.md.) (An earlier poll, on the reply only and
// allowed whenever one client's commands were executing, cost that loop
// 5-7% at 8 clients: their commands often took turns without
// overlapping.) On one CPU nothing polls: the worker needs that CPU.
var multiCPU = runtime.NumCPU() > 1

// alone is modelstore.Alone (tests replace it).
var alone = modelstore.Alone

// maxLanes bounds the lanes of one worker (its runs at once); the run
// queue (modelstore's THREADS_PER_QUEUE) bounds them first.
const maxLanes = 16

// lane is the server's end of a lane: req, a blocking socket it writes
// requests on, and ch, the socket it reads replies from.
type lane struct {
	req int
	ch  *channel
	rb  *recvBuf
}

// send writes one request on l (the fds' numbers stay the caller's).
func (l *lane) send(msg []byte, fds ...int) error {
	return sendMsg(l.req, msg, fds)
}

// close closes both of l's sockets.
func (l *lane) close() {
	unix.Close(l.req)
	l.ch.close()
}

// sendMsg writes msg with fds on the blocking socket fd.
func sendMsg(fd int, msg []byte, fds []int) error {
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	for {
		err := unix.Sendmsg(fd, msg, oob, nil, unix.MSG_NOSIGNAL)
		if err != unix.EINTR {
			return err
		}
	}
}

// lane returns an idle lane of p, or a new one, or waits for one.
func (p *proc) lane(ctx context.Context) (*lane, error) {
	select {
	case l := <-p.lanes:
		return l, nil
	default:
	}
	p.mu.Lock()
	if p.pending == nil {
		p.mu.Unlock()
		return nil, p.deathError("run")
	}
	if p.nlanes < maxLanes {
		p.nlanes++
		p.mu.Unlock()
		l, err := p.newLane()
		if err != nil {
			p.mu.Lock()
			p.nlanes--
			p.mu.Unlock()
		}
		return l, err
	}
	p.mu.Unlock()
	select {
	case l := <-p.lanes:
		return l, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-p.dead:
		return nil, p.deathError("run")
	}
}

// newLane makes a lane and hands its worker ends (request, reply) to the
// worker.
func (p *proc) newLane() (*lane, error) {
	req, err := seqpacketPair()
	if err != nil {
		return nil, err
	}
	parent, child, err := socketPair()
	if err != nil {
		closeAll(req[:])
		return nil, err
	}
	e := &enc{}
	e.head(opLane, 0)
	err = p.ch.send(e.b, req[1], int(child.Fd()))
	unix.Close(req[1])
	child.Close()
	if err != nil {
		unix.Close(req[0])
		parent.Close()
		return nil, err
	}
	ch, err := newChannel(parent)
	if err != nil {
		unix.Close(req[0])
		return nil, err
	}
	return &lane{req: req[0], ch: ch, rb: newRecvBuf()}, nil
}

// putLane makes l idle again; a dead worker's lanes are closed.
func (p *proc) putLane(l *lane) {
	if p.isDead() {
		l.close()
		return
	}
	p.lanes <- l // never blocks: at most maxLanes exist
}

// closeLanes closes the idle lanes of a dead worker.
func (p *proc) closeLanes() {
	for {
		select {
		case l := <-p.lanes:
			l.close()
		default:
			return
		}
	}
}

// laneCall is a run's call on a lane: the call the worker's death answers,
// and what the watchdog needs to stop the run once its context ends.
type laneCall struct {
	call
	p  *proc
	id uint64
	// finished is closed once the run's reply is in (nil: not watched).
	finished chan struct{}
	w        modelstore.Watched
}

// Stop implements modelstore.Stopper: the run is asked to stop, and its
// worker killed if it has not stopped KillGrace later (cancelRun, on a
// goroutine of its own: Stop must not block).
func (c *laneCall) Stop() { go c.p.cancelRun(c.id, c.finished) }

// end takes c off the watchdog once its run is over.
func (c *laneCall) end() {
	if c.finished != nil {
		modelstore.Unwatch(&c.w)
		close(c.finished)
	}
}

// laneRun is one run's request for proc.runs: msg is a whole opRun
// message (its id is filled in), fds go with it.
type laneRun struct {
	ctx context.Context
	msg []byte
	fds []int
}

// runs sends runs on one lane, back to back, and reads their replies in
// order, calling done with each as it arrives (done owns the fds it is
// given). The lane's thread in the worker finds the next request waiting
// when it finishes one, so a group costs one wake-up each way rather than
// one per run, and its runs follow each other on a warm core. The group's
// requests must fit the socket's buffers together (maxGroupBytes): they
// are all written before the first reply is read. When a run's ctx ends
// first, the run is asked to stop within modelstore's watchTick (the
// watchdog; opCancel, on the control channel; one still queued is
// answered without running) and gets KillGrace more before its worker is
// killed.
func (p *proc) runs(runs []laneRun, sess *session, done func(i int, msg []byte, fds []int, err error)) {
	if sess.probation.Load() {
		p.alone.Lock()
		defer func() {
			if !p.isDead() {
				sess.probation.Store(false) // it ran alone, and the worker lives
			}
			p.alone.Unlock()
		}()
	} else {
		p.alone.RLock()
		defer p.alone.RUnlock()
	}
	l, err := p.lane(runs[0].ctx)
	if err != nil {
		for i := range runs {
			done(i, nil, nil, err)
		}
		return
	}
	calls := make([]*laneCall, len(runs))
	p.mu.Lock()
	if p.pending == nil {
		p.mu.Unlock()
		l.close()
		err := p.deathError("run")
		for i := range runs {
			done(i, nil, nil, err)
		}
		return
	}
	for i := range runs {
		p.nextID++
		c := &laneCall{call: call{sess: sess, stage: "run", reply: make(chan reply, 1), on: l, seq: p.nextID}, p: p, id: p.nextID}
		calls[i] = c
		p.addPendingLocked(c.id, &c.call) // so that the worker's death answers and blames it
	}
	p.mu.Unlock()
	// A run alone asks the worker's thread to poll for the next request
	// too: the same client's next run then finds it awake.
	poll := p.slot.pool.cfg.ReplyPoll
	if poll <= 0 || !multiCPU || !alone() {
		poll = 0
	}
	for i, r := range runs {
		c := calls[i]
		putID(r.msg, c.id)
		putPoll(r.msg, poll)
		if modelstore.Watchable(r.ctx) {
			c.finished = make(chan struct{})
			modelstore.Watch(&c.w, r.ctx, c)
		}
	}
	i, ok, why := 0, true, ""
	for _, r := range runs {
		if err := l.send(r.msg, r.fds...); err != nil {
			ok, why = false, sendFailure(err)
			break
		}
	}
	for ; ok && i < len(runs); i++ {
		if poll > 0 && alone() {
			deadline := time.Now().Add(poll)
			l.ch.awaitPolling(func() bool { return alone() && time.Now().Before(deadline) })
		}
		rmsg, rfds, err := l.ch.recv(l.rb)
		if ok = err == nil; !ok {
			break
		}
		p.mu.Lock()
		p.donePendingLocked(calls[i].id)
		p.mu.Unlock()
		calls[i].end()
		d := &dec{b: rmsg}
		if op, rid := d.u8(), d.u64(); d.err == nil && op == opReply && rid == calls[i].id {
			done(i, d.b, rfds, nil)
		} else {
			closeAll(rfds)
			done(i, nil, nil, errShort)
		}
	}
	if ok {
		p.putLane(l)
		return
	}
	// The lane failed: the worker is gone, or will be.
	l.close()
	p.kill(why)
	for ; i < len(runs); i++ {
		r := <-calls[i].reply
		calls[i].end()
		done(i, r.msg, r.fds, r.err)
	}
}

// maxGroupBytes bounds the requests of one group on a lane, which are all
// written before any reply is read: the socket's send buffer
// (seqpacketPair's, 384 KiB on a default kernel) must hold them even while
// the worker's replies wait in the other direction. maxGroup bounds their
// number below the queue of a Unix socket (net.unix.max_dgram_qlen, 10 by
// default), so that neither side's writes wait for the other's reads.
const (
	maxGroupBytes = 64 << 10
	maxGroup      = 8
)

// cancelRun asks the worker to stop run id, and kills the worker if the
// run has not finished KillGrace later.
func (p *proc) cancelRun(id uint64, finished <-chan struct{}) {
	e := &enc{}
	e.head(opCancel, id)
	p.ch.send(e.b)
	t := time.NewTimer(p.slot.pool.cfg.KillGrace)
	defer t.Stop()
	select {
	case <-finished:
	case <-t.C:
		p.kill("timeout")
	}
}

// deathError is what a call on p gets once p is dead or dying.
func (p *proc) deathError(stage string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return deathError(stage, p.cause, p.reason)
}

// rawLane is the worker's end of a lane's reply socket: blocking, written
// by the one thread locked to the lane.
type rawLane struct{ fd int }

func (l rawLane) send(msg []byte, fds ...int) error { return sendMsg(l.fd, msg, fds) }

// serveLane runs the runs that arrive on the lane's request socket req,
// replying on rep, until the server closes it.
func (w *child) serveLane(req, rep int) {
	runtime.LockOSThread() // the thread the kernel wakes runs the model
	defer unix.Close(req)
	defer unix.Close(rep)
	l := rawLane{fd: rep}
	rb := newRecvBuf()
	var out []byte // the replies' buffer (replyTensors)
	for {
		n, oobn, flags, _, err := unix.Recvmsg(req, rb.buf, rb.oob, unix.MSG_CMSG_CLOEXEC)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return
		}
		// Not copied: the run is over, its inputs (located in the
		// message) no longer used, before the lane reads again.
		msg, fds, err := rb.view(n, oobn, flags)
		if err != nil {
			return
		}
		d := &dec{b: msg}
		op, id, poll := d.u8(), d.u64(), time.Duration(d.u32())*time.Microsecond
		if d.err != nil || op != opRun {
			closeAll(fds)
			w.reply(l, id, errShort, nil)
			continue
		}
		ctx, cancel := context.WithCancel(context.Background())
		w.mu.Lock()
		if _, ok := w.early[id]; ok {
			delete(w.early, id)
			cancel()
		}
		w.runs[id] = cancel
		w.mu.Unlock()
		w.run(ctx, l, &out, id, d, fds)
		cancel()
		if poll > 0 {
			awaitPolling(req, poll)
		}
	}
}
