//go:build !linux || !cgo || noort

package server

// prefault does nothing outside the ONNX Runtime build on Linux
// (prefault.go).
func prefault(uint64) {}
