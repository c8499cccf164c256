//go:build cgo && !noort

package main

import (
	"github.com/enclaveai/enclaveai/server"
	"github.com/enclaveai/enclaveai/worker"
)

// tuneGC paces the collector, with the smaller headroom in an engine
// worker (server/gc.go).
func tuneGC() {
	if worker.IsWorker() {
		server.TuneGC(server.WorkerGCHeadroom)
	} else {
		server.TuneGC(server.ServerGCHeadroom)
	}
}

// runIfWorker runs the process as an engine worker when the server
// re-executed itself as one (package worker): nothing of the server runs
// in it, and it never returns.
func runIfWorker() {
	if worker.IsWorker() {
		worker.Main()
	}
}
