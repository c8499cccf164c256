//go:build !cgo || noort

package main

import "github.com/enclaveai/enclaveai/server"

// tuneGC paces the collector (server/gc.go); there are no engine workers.
func tuneGC() { server.TuneGC(server.ServerGCHeadroom) }

// runIfWorker does nothing: a build without ONNX Runtime (the enclave's)
// has no engine workers, and links no code that starts processes.
func runIfWorker() {}
