// Command enclaveai-server is the EnclaveAI server: a Redis-protocol ONNX
// model server. Usage, as redis-server:
//
//	enclaveai-server [enclaveai.conf] [--directive value ...]
//	enclaveai-server --help | --version
package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"

	"github.com/enclaveai/enclaveai/commands"
	"github.com/enclaveai/enclaveai/config"
	"github.com/enclaveai/enclaveai/server"
)

func main() {
	// The collector is paced by a memory limit that follows the live heap
	// (server/gc.go); GOGC or GOMEMLIMIT in the environment wins. The
	// engine workers too: their heap is each run's tensors, and
	// under Go's default of 100 the collector, whose mark workers are a
	// quarter of the worker's GOMAXPROCS (sized for its lanes), took 11%
	// of a worker's CPU running the transformer, on the cores ONNX Runtime
	// needs (perf, 300 runs at one client); 3% with this policy and no
	// payload buffer per message (worker.putInline).
	tuneGC()
	runIfWorker()
	if infoFlag(os.Args[1:], os.Stdout) {
		return
	}
	commands.Revision = buildRevision()
	opts, err := config.Load(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "enclaveai-server: configuration:", err, "(enclaveai-server --help lists the directives)")
		os.Exit(1)
	}
	log, err := newLogger(opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, "enclaveai-server:", err)
		os.Exit(1)
	}
	slog.SetDefault(log)
	// ENCLAVEAI_CPUPROFILE=file writes a CPU profile until shutdown (make bench).
	if path := os.Getenv("ENCLAVEAI_CPUPROFILE"); path != "" {
		f, err := os.Create(path)
		if err == nil && pprof.StartCPUProfile(f) == nil {
			defer pprof.StopCPUProfile()
		}
	}
	if err := run(opts, log); err != nil {
		log.Error("fatal", "err", err)
		pprof.StopCPUProfile()
		os.Exit(1)
	}
}

func run(opts *config.Options, log *slog.Logger) error {
	// Signals are caught from the first instant: a SIGTERM during start
	// (loading a big snapshot) must still stop the server cleanly.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	srv := server.New(opts, log)
	started := make(chan error, 1)
	go func() { started <- srv.Start() }()
	select {
	case err := <-started:
		if err != nil {
			return err
		}
	case s := <-sig:
		log.Info("received signal during start, shutting down", "signal", s.String())
		srv.Stop()
		return nil
	}
	if opts.UsersEnabled() {
		log.Info("users configured: each model belongs to the user who stored it", "users", len(opts.Users))
	}
	log.Info("Ready to accept connections", "addr", srv.Addr().String())
	for {
		select {
		case s := <-sig:
			log.Info("received signal, shutting down", "signal", s.String())
			if err := srv.Shutdown(srv.Cmds.SaveRulesConfigured()); err != nil {
				// As Redis: the data since the last snapshot would be lost.
				log.Error("error trying to save the DB, can't exit", "err", err)
				continue
			}
			return nil
		case <-srv.Done():
			return nil
		}
	}
}

func newLogger(opts *config.Options) (*slog.Logger, error) {
	var w io.Writer = os.Stderr
	if opts.LogFile != "" {
		f, err := os.OpenFile(opts.LogFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			return nil, err
		}
		w = f
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: opts.SlogLevel()})), nil
}
