package server

import "github.com/enclaveai/enclaveai/goengine"

// useGoEngine makes the pure-Go engine compile and run every model: no
// ONNX Runtime, no worker processes (what an enclave build runs).
func (s *Server) useGoEngine() {
	s.Cmds.Models.SetEngine(goengine.Engine{})
	s.log.Info("models run in the pure-Go engine (inference-engine go): ONNX opset 13, no ONNX Runtime",
		"engine", goengine.Engine{}.Name())
}
