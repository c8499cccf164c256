package server

import "github.com/enclaveai/enclaveai/goengine"

// useGoEngine makes the pure-Go engine compile and run every model: no
// ONNX Runtime, no worker processes (what an enclave build runs).
func (s *Server) useGoEngine() {
	// The bound on one tensor an operator makes: maxmemory when set (an
	// allocation past what the process can have ends it, and in an
	// enclave that is every tenant's state).
	s.Cmds.Models.SetEngine(goengine.Engine{MaxTensorBytes: s.opts.MaxMemory.Load})
	s.log.Info("models run in the pure-Go engine (inference-engine go): ONNX opset 13, no ONNX Runtime",
		"engine", goengine.Engine{}.Name())
}
