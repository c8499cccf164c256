//go:build !cgo || noort

package server

// startEngine: a build without ONNX Runtime (CGO_ENABLED=0, or the noort
// tag of the enclave build) has only the pure-Go engine, and no engine
// worker processes (package worker is not linked in: an enclave can start
// no process). config refuses inference-engine onnxruntime in such a build.
func (s *Server) startEngine() error {
	s.useGoEngine()
	return nil
}
