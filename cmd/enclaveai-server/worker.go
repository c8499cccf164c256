//go:build cgo && !noort

package main

import "github.com/enclaveai/enclaveai/worker"

// runIfWorker runs the process as an engine worker when the server
// re-executed itself as one (package worker): nothing of the server runs
// in it, and it never returns.
func runIfWorker() {
	if worker.IsWorker() {
		worker.Main()
	}
}
