package server

import "github.com/enclaveai/enclaveai/goengine"

// useGoEngine makes the pure-Go engine compile and run every model: no
// ONNX Runtime, no worker processes (what an enclave build runs).
func (s *Server) useGoEngine() {
	// The bound on what the runs under way make together: maxmemory's
	// headroom when it is set (an allocation past what the process can
	// have ends it, and in an enclave that is every tenant's state).
	s.Cmds.Models.SetEngine(goengine.Engine{MaxTensorBytes: s.goEngineBound})
	s.log.Info("models run in the pure-Go engine (inference-engine go): ONNX opset 13, no ONNX Runtime",
		"engine", goengine.Engine{}.Name())
}

// goEngineBound is what the pure-Go engine's runs may make together: what
// maxmemory leaves of the memory in use, or 0 (the engine's default)
// without maxmemory. The whole of maxmemory let runs take it again on top
// of what the keyspace held (review: RSS 1.7 GB under maxmemory 600mb).
func (s *Server) goEngineBound() int64 {
	if m := s.opts.MaxMemory.Load(); m > 0 {
		return max(1, m-s.Cmds.UsedMemory())
	}
	return 0
}
