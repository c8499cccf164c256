//go:build !cgo || noort

package modelstore

// Builds without ONNX Runtime (CGO_ENABLED=0, or the noort tag that the
// enclave build sets): the binding of onnx.go and extinit_cgo.go is absent,
// and these stand in for it so that the model layer builds unchanged.
// InitRuntime fails, so a server built this way runs the pure-Go engine
// (package goengine) and never compiles a Session.

import (
	"context"
	"errors"
)

// ErrNoRuntime is InitRuntime's error in a build without ONNX Runtime.
var ErrNoRuntime = errors.New("this build has no ONNX Runtime (built with CGO_ENABLED=0 or the noort tag): use inference-engine go")

// InitRuntime fails: there is no ONNX Runtime to load.
func InitRuntime(string) error { return ErrNoRuntime }

// HasRuntime reports whether this build can load ONNX Runtime.
const HasRuntime = false

// RuntimeVersion is "": no ONNX Runtime is loaded.
func RuntimeVersion() string { return "" }

// Session is the ONNX Runtime session's name in a build without it; none is
// ever created.
type Session struct{}

// NewSharedSession fails with ErrNoRuntime.
func NewSharedSession([]byte, *ModelBuffer, SessionOptions) (*Session, error) {
	return nil, ErrNoRuntime
}

// Inputs implements EngineSession.
func (*Session) Inputs() []IOInfo { return nil }

// Outputs implements EngineSession.
func (*Session) Outputs() []IOInfo { return nil }

// Run implements EngineSession: it always fails.
func (*Session) Run(context.Context, []*Tensor) ([]*Tensor, error) { return nil, ErrNoRuntime }

// Weights implements EngineSession.
func (*Session) Weights() (WeightsMode, int64) { return WeightsCopied, 0 }

// Close implements EngineSession.
func (*Session) Close() error { return nil }
