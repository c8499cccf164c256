//go:build cgo && !noort

package config

// HasONNXRuntime: this build links the ONNX Runtime binding.
const HasONNXRuntime = true

// DefaultInferenceEngine is inference-engine's default in this build.
const DefaultInferenceEngine = EngineONNXRuntime
