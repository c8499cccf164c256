package modelstore

// The engine seam: the model layer (Registry, Blob, Model, the batcher and
// every command) compiles and runs models only through these two small
// interfaces, unaware of which engine does the work. Two engines sit behind
// it today: ONNX Runtime in this process (InProcess, the ORT binding of
// onnx.go) and ONNX Runtime in supervised worker processes (package worker),
// which keeps a model that crashes, hangs or bloats native code away from
// the server process.

import "context"

// ModelSource is what an Engine compiles: a model's bytes and where they
// came from.
type ModelSource struct {
	// Data is the model. It does not change while a session compiled from
	// it lives.
	Data []byte
	// Buf holds Data when the model came in through a ModelBuffer (nil
	// otherwise). A session that keeps reading Data takes a reference.
	Buf *ModelBuffer
	Origin
	// SHA256 is the model's digest in hex when already known ("" if not),
	// for logs.
	SHA256 string
}

// Origin says who stores a model, and where.
type Origin struct {
	// Owner is the user who stored the model ("" = default user), for
	// placement (Engine.Group) and logs.
	Owner string
	// Key is the key it is stored at, for logs; a session shared by
	// several keys is named by the first.
	Key string
	// Loaded: the model was stored before and is read back (a snapshot,
	// the log, a migrating node). It compiled within the store deadline
	// once; an engine with a deadline gives it longer now (LoadedCompileFactor),
	// since a model stored near the deadline that overran it on a busier
	// start stopped the start.
	Loaded bool
}

// LoadedCompileFactor is how many times the store deadline a Loaded
// model's compilation may take.
const LoadedCompileFactor = 4

// Engine compiles models into sessions.
type Engine interface {
	// Compile checks and compiles a model. Errors that ONNX Runtime reports
	// come back as *ORTError, as from NewSession.
	Compile(src ModelSource, opts SessionOptions) (EngineSession, error)
	// Name is the engine as INFO shows it ("onnxruntime", "onnxruntime-worker").
	Name() string
}

// EngineSession is a compiled model. Its methods are safe for concurrent
// use. (The in-process ONNX Runtime session keeps the name Session; it is
// one implementation of this interface.)
type EngineSession interface {
	// Inputs describes the model's inputs, in the order Run takes them.
	// The slice must not be modified.
	Inputs() []IOInfo
	// Outputs describes the model's outputs, in the order Run returns them.
	Outputs() []IOInfo
	// Run feeds inputs by position and returns the outputs in model order
	// (nil for an output that is not a tensor). ctx bounds the run: when
	// it is done, the engine stops the run (ORT's terminate flag) or, if
	// that does not work, the process running it.
	Run(ctx context.Context, inputs []*Tensor) ([]*Tensor, error)
	// Weights says how the session holds the model's large initializers.
	Weights() (WeightsMode, int64)
	// Close releases the session once the runs in flight end; later Runs
	// fail with ErrSessionClosed.
	Close() error
}

// GroupRunner is implemented by sessions whose every run is a round trip
// to another process (engine workers): RunGroup runs several independent
// requests in one trip, back to back, and calls each one's Done, in order,
// as its outputs arrive. The run queue hands it the requests for one
// unbatched model that wait together (queue.go).
type GroupRunner interface {
	RunGroup(runs []GroupRun)
}

// GroupRun is one request of a RunGroup: Ctx bounds its run as Run's ctx
// does, and Done receives what Run would return.
type GroupRun struct {
	Ctx    context.Context
	Inputs []*Tensor
	Done   func(outs []*Tensor, err error)
}

// Quarantiner is implemented by sessions that can be refused after their
// model crashed the engine: Quarantined returns the error runs get then, or
// nil. The Registry never hands out a quarantined session to a new store of
// the same bytes: storing the model again compiles it anew.
type Quarantiner interface {
	Quarantined() error
}

// InProcess is ONNX Runtime loaded into this process (InitRuntime must have
// succeeded): a model that crashes ORT crashes the process.
type InProcess struct{}

// Compile implements Engine with NewSharedSession.
func (InProcess) Compile(src ModelSource, opts SessionOptions) (EngineSession, error) {
	s, err := NewSharedSession(src.Data, src.Buf, opts)
	if err != nil {
		return nil, err // not a typed nil in the interface
	}
	return s, nil
}

// Name implements Engine.
func (InProcess) Name() string { return "onnxruntime" }

// EngineError is a failure of the engine itself rather than of the model
// or its inputs (the worker process running it died, say); Msg is the
// error text clients get, after "ERR ".
type EngineError struct{ Msg string }

// Error returns Msg, the text clients get.
func (e *EngineError) Error() string { return e.Msg }
