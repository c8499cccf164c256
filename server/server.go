// Package server is EnclaveAI's network front end: it accepts RESP
// connections, reads commands with limits enforced before allocation, hands
// each to the command layer and writes the replies back, batching the
// replies of pipelined commands into one write.
//
// Why not redcon's server: redcon's reader (the loop behind redcon.Serve)
// buffers each whole command, doubling its buffer as the bytes come and then
// copying every argument into Command.Raw and Args, and it cannot refuse a
// `$600000000` length header before allocating for it, nor read a 500 MB
// BLOB chunk into memory the caller chose. Reading one AI.MODELSTORE of
// three 500 MB chunks peaks at 5165 MB of RSS through
// redcon.Reader.ReadCommand (3.44x the model) and at 1510 MB (1.01x)
// through this package's Reader with the upload Sink (`go run
// ./bench/readers`, docs/BENCHMARKS.md). So this package reads RESP itself
// (reader.go), checking every length against its limit first, while replies
// are encoded with redcon's Append* functions (commands/writer.go).
//
// Concurrency: one goroutine per connection runs that connection's commands
// in order; a ticker goroutine drives periodic work (expiry, idle clients).
package server

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/enclaveai/enclaveai/commands"
	"github.com/enclaveai/enclaveai/config"
	"github.com/enclaveai/enclaveai/modelstore"
	"github.com/enclaveai/enclaveai/persistence"
)

// Server listens for clients and serves them.
type Server struct {
	Cmds *commands.App
	opts *config.Options
	log  *slog.Logger

	ln       net.Listener
	tlsLn    net.Listener // nil without tls-port
	metrics  *http.Server // nil without metrics-port
	wg       sync.WaitGroup
	done     chan struct{} // closed when Stop begins
	stopped  chan struct{} // closed when Stop has ended (Done)
	stopOnce sync.Once
	endOnce  sync.Once
	// closeEngine stops the engine workers; nil when there are none.
	closeEngine func()
	// unlockDir gives back the lock on the data directory (Start).
	unlockDir func()
}

// New creates a server over a fresh command layer.
func New(opts *config.Options, log *slog.Logger) *Server {
	s := &Server{opts: opts, log: log, done: make(chan struct{}), stopped: make(chan struct{})}
	s.Cmds = commands.NewApp(opts, log)
	return s
}

// Listen binds the configured address.
func (s *Server) Listen() error {
	addr := net.JoinHostPort(s.opts.Bind, strconv.FormatInt(s.opts.Port.Load(), 10))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	s.ln = ln
	return nil
}

// Addr is the bound address.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Done is closed once the server has stopped: its connections ended, its
// log written, fsynced and closed (a rewrite under way stopped first), its
// engine stopped. The process must not exit before: SHUTDOWN stops the
// server from another goroutine, and a main that returned when the stop
// began exited in the middle of the log's last write, and a clean
// SHUTDOWN left a log that the next start refused (durability review).
func (s *Server) Done() <-chan struct{} { return s.stopped }

// Serve accepts connections on every listener until Stop.
func (s *Server) Serve() error {
	go s.tick()
	if s.tlsLn != nil {
		go func() {
			if err := s.accept(s.tlsLn); err != nil {
				s.log.Error("TLS accept loop ended", "err", err)
			}
		}()
	}
	return s.accept(s.ln)
}

// fitMaxClients lowers maxclients to what the process's open-file limit
// leaves for clients, as Redis does at start, and says so: connections
// past it would otherwise fail to be accepted, not refused with Redis's
// "max number of clients reached".
func (s *Server) fitMaxClients() {
	fit, limit, ok := config.ClientsLimit()
	if !ok {
		return // not known here (an enclave), or no real limit
	}
	if want := s.opts.MaxClients.Load(); want > fit {
		s.opts.MaxClients.Store(fit)
		s.log.Warn("maxclients lowered to fit the open-file limit", "requested", want, "maxclients", fit,
			"open_files_limit", limit, "reserved", config.ReservedFDs)
	}
}

// accept serves ln's connections until the server stops or ln closes. A
// failed accept is retried after a pause that doubles up to a second, as
// net/http's server does: out of file descriptors (EMFILE, which enough
// idle connections or stored models reach) it ended the loop for good,
// and the server took no new connection again (resource review).
func (s *Server) accept(ln net.Listener) error {
	var pause time.Duration
	for {
		conn, err := ln.Accept()
		if err != nil {
			select {
			case <-s.done:
				return nil
			default:
			}
			if errors.Is(err, net.ErrClosed) {
				return err
			}
			if pause == 0 {
				s.log.Warn("accept failed: retrying", "err", err)
			}
			pause = min(max(2*pause, 5*time.Millisecond), time.Second)
			time.Sleep(pause)
			continue
		}
		pause = 0
		s.wg.Add(1)
		go s.handle(conn)
	}
}

// Stop closes the listener and every connection, and waits for their
// goroutines to finish.
func (s *Server) Stop() {
	s.stopOnce.Do(func() {
		close(s.done)
		if s.ln != nil {
			s.ln.Close()
		}
		if s.tlsLn != nil {
			s.tlsLn.Close()
		}
		if s.metrics != nil {
			s.metrics.Close()
		}
		for _, c := range s.Cmds.ClientList() {
			c.Kill()
		}
	})
	s.wg.Wait()
	s.Cmds.Queue.Close() // no connection is left to run a model
	s.Cmds.CloseLog()
	if s.unlockDir != nil {
		s.unlockDir()
	}
	if s.closeEngine != nil {
		s.closeEngine()
	}
	s.endOnce.Do(func() { close(s.stopped) })
}

func (s *Server) tick() {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-s.done:
			return
		case <-t.C:
			s.Cmds.Tick()
		}
	}
}

func (s *Server) handle(conn net.Conn) {
	defer s.wg.Done()
	defer conn.Close()
	if tc, ok := conn.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	c := s.Cmds.NewClient(conn.RemoteAddr().String(), conn.LocalAddr().String(), killer{conn})
	defer s.Cmds.RemoveClient(c)
	defer c.W.Reset() // replies not sent release what they hold (Writer.Later)
	if int64(s.Cmds.NumClients()) > s.opts.MaxClients.Load() {
		s.Cmds.Stats().Rejected.Add(1)
		io.WriteString(conn, "-ERR max number of clients reached\r\n")
		return
	}
	st := s.Cmds.Stats()
	rd := newReader(conn, func(n int) {
		st.NetInput.Add(c.ID, int64(n))
		s.Cmds.Touch(c)
	})
	defer rd.Close()
	rd.ReportBuffer(c.SetQueryBuf)
	skipping := false
	rd.OnRefuse = func() {
		skipping = true
		conn.SetReadDeadline(time.Now().Add(skipTimeout))
	}
	up := &ingest{cmds: s.Cmds, client: c, log: s.log}
	defer up.done()
	// spec is the command's table entry, looked up by classify once its
	// name is read (inline commands skip classify: nil, and Dispatch
	// looks it up).
	var spec, last *commands.Spec // last: the previous command's entry
	classify := func(name []byte) Limits {
		if last == nil || !last.Is(name) {
			last = commands.Commands().Lookup(name)
		}
		spec = last
		l := toLimits(s.Cmds.CommandLimits(c, spec))
		if l.Unauth {
			return l // refused with NOAUTH once read: no upload buffer for it
		}
		return up.limits(spec, l)
	}
	// Large bulk replies (MODELGET's chunks) are written straight from
	// where they lie, with the pending replies before them.
	c.W.SetStream(func(bufs ...[]byte) error {
		var size int64
		for _, b := range bufs {
			size += int64(len(b))
		}
		c.SetPending(size)
		n, err := writeTouching(conn, bufs, func() { s.Cmds.Touch(c) })
		c.SetPending(0)
		st.NetOutput.Add(c.ID, n)
		return err
	})
	flush := func() bool {
		s.Cmds.CommitClient(c) // what the replies acknowledge is logged first
		if c.W.Len() == 0 {
			return true
		}
		if c.W.HasLater() {
			return c.W.WriteOut() == nil // through SetStream's function, above
		}
		c.SetReplyBuf(c.W.Cap()) // a write the client does not read may wait
		c.SetPending(int64(c.W.Len()))
		var n int
		var err error
		if c.W.Len() <= touchEvery {
			n, err = conn.Write(c.W.Bytes())
		} else { // a large reply (an EXEC of many) marks the client active as it moves
			var n64 int64
			n64, err = writeTouching(conn, [][]byte{c.W.Bytes()}, func() { s.Cmds.Touch(c) })
			n = int(n64)
		}
		c.SetPending(0)
		st.NetOutput.Add(c.ID, int64(n))
		c.W.Reset()
		return err == nil
	}
	// Replies to the commands read so far go out before the reader waits
	// for the rest of a command (Redis writes its replies before it
	// waits for events, too).
	rd.BeforeWait(func() {
		if c.W.Len() > 0 {
			flush()
		}
	})
	// rest: the replies to all the client sent are written and it waits
	// for input. It holds no reply buffer meanwhile (Writer.Release), and
	// its commands stop counting as working: they are executing
	// (modelstore.BeginWork, which also notes whose they are) from the
	// first that arrives until rest: engine-reply-poll and the log's
	// group commit read that.
	working := false
	rest := func() {
		if working {
			modelstore.EndWork()
			working = false
		}
		c.W.Release()
		c.SetReplyBuf(c.W.Cap())
	}
	defer rest()
	for {
		spec = nil
		cmd, err := rd.ReadCommand(toLimits(s.Cmds.PreLimits(c)), classify)
		if err == nil && !working {
			modelstore.BeginWork(c.ID)
			working = true
		}
		if skipping {
			skipping = false
			conn.SetReadDeadline(time.Time{})
		}
		if err != nil {
			up.done() // a refused or cut-off upload frees its buffer here
			var pe *ProtocolError
			var re *RefusedError
			var ne net.Error
			switch {
			case errors.As(err, &pe):
				// Debug, as Redis logs them at verbose: any client
				// that can connect could otherwise fill the log, a line
				// a connection (security review).
				s.log.Debug("protocol error, closing client", "addr", c.Addr, "err", pe.Msg)
				s.Cmds.ReplyError(c, commands.Reply("ERR "+pe.Error()))
				flush()
				s.linger(conn, rd, c)
				return
			case errors.As(err, &re) && re.Close:
				s.log.Warn("command refused while its bytes arrive, too large to skip: closing client",
					"addr", c.Addr, "err", re.Err, "max-skip", 2*s.opts.MaxModelSize.Load())
				s.Cmds.ReplyError(c, re.Err)
				flush()
				s.linger(conn, rd, c)
				return
			case errors.As(err, &re):
				s.log.Info("command refused while its bytes arrived; the rest was skipped", "addr", c.Addr, "err", re.Err)
				s.Cmds.ReplyError(c, re.Err)
				if rd.Buffered() == 0 && !flush() {
					return
				}
				if rd.Buffered() == 0 {
					rest()
				}
				continue
			case errors.As(err, &ne) && ne.Timeout():
				s.log.Warn("refused command not sent in time to skip it: closing client", "addr", c.Addr,
					"timeout", skipTimeout)
			}
			flush() // EOF or a dead connection: nothing more to read
			return
		}
		// Replies held for Writer.Later (a transaction's AI.MODELGET, a
		// large AI.TENSORGET) go out before the next command runs, which
		// may write to the connection itself.
		if c.W.HasLater() && !flush() {
			return
		}
		buf := up.take()
		c.W.Acquire()
		c.SetReplyBuf(c.W.Cap())
		s.Cmds.DispatchUpload(c, spec, cmd.Args, cmd, buf)
		if buf != nil {
			buf.Unref() // the model took its own reference if it kept it
		}
		up.done()
		if c.W.StreamErr() != nil {
			return // the connection failed under a streamed reply
		}
		if rd.Buffered() == 0 || c.W.Len() > 64<<10 || c.CloseAfterReply() {
			if !flush() {
				return
			}
		}
		if rd.Buffered() == 0 {
			rest()
		}
		if c.CloseAfterReply() {
			return
		}
	}
}

// touchEvery is how many bytes of a large reply writeTouching writes
// between two marks of the client's activity: a client reading at least
// that much a second is never idle under the least `timeout` (1 s), while
// a writev of 256 KB still moves far more than it costs.
const touchEvery = 256 << 10

// writeTouching writes bufs to w as one writev per touchEvery bytes at
// most, calling touch after each: a client reading a large reply counts as
// active while the reply moves, and one that stops reading goes idle.
func writeTouching(w io.Writer, bufs [][]byte, touch func()) (int64, error) {
	var total int64
	var group net.Buffers
	size := 0
	send := func() error {
		n, err := group.WriteTo(w) // WriteTo consumes group
		total += n
		size = 0
		touch()
		return err
	}
	for _, b := range bufs {
		for len(b) > 0 {
			k := min(len(b), touchEvery-size)
			group = append(group, b[:k])
			b, size = b[k:], size+k
			if size == touchEvery {
				if err := send(); err != nil {
					return total, err
				}
			}
		}
	}
	if size > 0 {
		return total, send()
	}
	return total, nil
}

// killer is a connection as CLIENT KILL and shutdown close it (Client.Kill):
// without waiting. net.Conn's Close wakes the connection's reads and
// writes at once, then waits until nothing holds its descriptor, and the
// reader's poll holds it until the connection's goroutine reads again,
// after the command it runs (fdSource).
type killer struct{ net.Conn }

// Close closes the connection in the background.
func (k killer) Close() error {
	go k.Conn.Close()
	return nil
}

// PeerClosed reports whether the client has closed its side of the
// connection (or reset it): the socket polls POLLRDHUP, without reading,
// so that bytes the client sent before it closed stay to be read. A
// connection without a descriptor says false.
func (k killer) PeerClosed() bool {
	c := k.Conn
	if t, ok := c.(*tls.Conn); ok {
		c = t.NetConn()
	}
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	closed := false
	rc.Control(func(fd uintptr) {
		p := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLRDHUP}}
		if n, err := unix.Poll(p, 0); err == nil && n > 0 {
			closed = p[0].Revents&(unix.POLLRDHUP|unix.POLLHUP|unix.POLLERR) != 0
		}
	})
	return closed
}

// A command refused while its bytes are still arriving is answered only
// once the client has sent them: a client (redis-py) writes a whole
// command before it reads, so a connection closed under it loses the
// reply to a reset. skipTimeout bounds the time the rest of a refused
// command may take to arrive; lingerTimeout and lingerMax bound what is
// read and dropped after a reply that closes the connection (a client
// sending more than that gets a reset).
const (
	skipTimeout   = 60 * time.Second
	lingerTimeout = 10 * time.Second
	lingerMax     = 1 << 30
)

// linger closes conn after its last reply the way a client can read it:
// our side of the connection is shut (the client reads the reply, then
// EOF), and what the client still sends is read and dropped, for at most
// lingerTimeout and lingerMax bytes, before the socket is closed.
// A client that has not authenticated gets no such courtesy.
func (s *Server) linger(conn net.Conn, rd *Reader, c *commands.Client) {
	// linger reads conn itself: the reader lets it go first.
	rd.Close()
	hc, ok := conn.(interface{ CloseWrite() error }) // TCP and TLS
	if !ok || s.Cmds.PreLimits(c).Unauth || hc.CloseWrite() != nil {
		return
	}
	conn.SetReadDeadline(time.Now().Add(lingerTimeout))
	io.CopyN(io.Discard, conn, lingerMax)
}

func toLimits(l commands.Limits) Limits { return Limits{Limits: l} }

// Start loads ONNX Runtime and the startup models, binds the configured
// address and serves in the background.
func (s *Server) Start() (err error) {
	if err := s.startEngine(); err != nil {
		return err
	}
	if err := os.MkdirAll(s.opts.Dir, 0o700); err != nil {
		return fmt.Errorf("dir: %w", err)
	}
	unlock, err := persistence.LockDir(s.opts.Dir)
	switch {
	case errors.Is(err, persistence.ErrNoLock):
		s.log.Warn("the data directory cannot be locked here: nothing stops a second server from using it", "dir", s.opts.Dir)
	case err != nil:
		return fmt.Errorf("dir: %w", err)
	}
	s.unlockDir = unlock
	s.fitMaxClients()
	if s.opts.UsersEnabled() && *s.opts.Requirepass.Load() == "" {
		s.log.Warn("users are configured but requirepass is not: a client that never sends AUTH is the default user, " +
			"which may run the administrative commands (SHUTDOWN, CONFIG SET, MONITOR, ...); set requirepass")
	}
	defer func() {
		if err != nil {
			unlock()
		}
	}()
	if err := s.setupEnclave(); err != nil {
		return err
	}
	if err := s.Cmds.Prepare(); err != nil {
		return err
	}
	if err := s.Listen(); err != nil {
		return err
	}
	if err := s.listenTLS(); err != nil {
		s.ln.Close()
		return err
	}
	if err := s.listenMetrics(); err != nil {
		s.ln.Close()
		if s.tlsLn != nil {
			s.tlsLn.Close()
		}
		return err
	}
	s.Cmds.Shutdown = func(save bool) error {
		if save {
			if err := s.Cmds.FinalSave(); err != nil {
				return err
			}
		}
		s.log.Info("user requested shutdown", "saved", save)
		// The calling connection is one of those Stop waits for: stop from
		// another goroutine once its reply is out.
		go s.Stop()
		return nil
	}
	// Clients may connect at once; until the snapshot is loaded they are
	// answered -LOADING.
	s.Cmds.SetLoading(true)
	go func() {
		if err := s.Serve(); err != nil {
			s.log.Error("accept loop ended", "err", err)
		}
	}()
	if err := s.Cmds.Load(); err != nil {
		s.Stop()
		return err
	}
	return nil
}

// Shutdown stops the server, saving first when asked: SIGTERM saves when
// `save` rules are configured, as Redis does. A save that fails leaves the
// server serving, and is returned: as Redis ("can't exit"), the writes
// acknowledged since the last snapshot are not thrown away (operator
// review: SIGTERM exited and lost them).
func (s *Server) Shutdown(save bool) error {
	if save {
		if err := s.Cmds.FinalSave(); err != nil {
			return err
		}
	}
	s.Stop()
	return nil
}
