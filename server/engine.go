//go:build cgo && !noort

package server

import (
	"fmt"
	"os"
	"runtime"
	"time"

	"golang.org/x/sys/unix"

	"github.com/enclaveai/enclaveai/commands"
	"github.com/enclaveai/enclaveai/config"
	"github.com/enclaveai/enclaveai/modelstore"
	"github.com/enclaveai/enclaveai/worker"
)

// startEngine sets up where models are compiled and run: the pure-Go
// engine when inference-engine is go; else ONNX Runtime as
// engine-isolation says, in worker processes (the server process then
// never loads it), or in this process ("off").
func (s *Server) startEngine() error {
	o := s.opts
	if o.InferenceEngine == config.EngineGo {
		s.useGoEngine()
		return nil
	}
	lib, err := modelstore.FindRuntimeLibrary(o.ONNXRuntimeLibrary)
	if err != nil {
		return err
	}
	if o.EngineIsolation == "off" {
		if err := modelstore.InitRuntime(lib); err != nil {
			return fmt.Errorf("loading ONNX Runtime from %s: %w", lib, err)
		}
		s.log.Info("ONNX Runtime loaded in the server process (engine-isolation off)",
			"library", lib, "version", modelstore.RuntimeVersion())
		commands.RegisterInfoSection(commands.InfoSection{Name: "Engine",
			Fields: func(*commands.App) [][2]string {
				return [][2]string{{"engine", modelstore.InProcess{}.Name()}, {"engine_isolation", "off"}}
			}})
		return nil
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("engine workers: finding this executable: %w", err)
	}
	workers := EngineWorkers(o.EngineWorkers, o.EngineIsolation == worker.PerTenant && o.UsersEnabled())
	pool, err := worker.NewPool(worker.Config{
		Exe: exe, Lib: lib, Workers: workers, Memory: EngineWorkerMemory(o.EngineWorkerMemory),
		Isolation: o.EngineIsolation, CompileTimeout: time.Duration(o.EngineStoreTimeout) * time.Second,
		ReplyPoll: time.Duration(o.EngineReplyPoll) * time.Microsecond,
		TestHooks: os.Getenv("ENCLAVEAI_ENGINE_TEST_HOOKS") == "1", Log: s.log,
	})
	if err != nil {
		return err
	}
	modelstore.ShareBuffers(true)
	s.Cmds.Models.SetEngine(pool)
	s.closeEngine = pool.Close
	commands.RegisterInfoSection(commands.InfoSection{Name: "Engine",
		Fields: func(*commands.App) [][2]string { return pool.Info() }})
	s.log.Info("ONNX Runtime runs in engine worker processes", "library", lib, "isolation", o.EngineIsolation,
		"workers_per_group", workers, "worker_memory", EngineWorkerMemory(o.EngineWorkerMemory))
	return nil
}

// EngineWorkers resolves engine-workers: n, or when 0 one worker per 8
// cores, at least 1 and at most 8, for the one group of all models; with
// a group per tenant (perTenant) one per tenant. One worker already runs a
// model's operators on every core (ONNX Runtime's thread pool) and many
// runs at once; more workers add control channels and smaller blast radii,
// and each costs its own ONNX Runtime (tens of MB).
func EngineWorkers(n int64, perTenant bool) int {
	switch {
	case n > 0:
		return int(n)
	case perTenant:
		return 1
	}
	return min(8, max(1, runtime.NumCPU()/8))
}

// EngineWorkerMemory resolves engine-worker-memory: n, or when 0 half the
// machine's memory.
func EngineWorkerMemory(n int64) int64 {
	if n > 0 {
		return n
	}
	var si unix.Sysinfo_t
	if unix.Sysinfo(&si) != nil {
		return 0
	}
	return int64(si.Totalram) * int64(si.Unit) / 2
}
