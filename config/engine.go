package config

// The inference engines (the inference-engine directive).
const (
	// EngineONNXRuntime is ONNX Runtime, in worker processes or in the
	// server process as engine-isolation says.
	EngineONNXRuntime = "onnxruntime"
	// EngineGo is the pure-Go engine (package goengine).
	EngineGo = "go"
)
