//go:build !cgo || noort

package main

// runIfWorker does nothing: a build without ONNX Runtime (the enclave's)
// has no engine workers, and links no code that starts processes.
func runIfWorker() {}
