//go:build !cgo

package worker

// landlock: a build without cgo starts no engine workers (it has no ONNX
// Runtime), and has no constructor to enter a domain with (landlock.go).
func landlock() (int, error) { return 0, nil }
