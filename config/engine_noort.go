//go:build !cgo || noort

package config

// HasONNXRuntime: this build (CGO_ENABLED=0, or the enclave's noort tag)
// has no ONNX Runtime binding.
const HasONNXRuntime = false

// DefaultInferenceEngine is inference-engine's default in this build.
const DefaultInferenceEngine = EngineGo
