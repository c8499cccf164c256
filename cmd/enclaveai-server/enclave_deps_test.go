package main

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// The enclave build (the noort tag, with EGo's cgo) and the cgo-free build
// link neither ONNX Runtime's binding nor the engine workers nor anything
// that starts processes: EGo enclaves cannot load shared objects or run
// other programs (docs/ENCLAVE.md).
func TestEnclaveBuildLinksNoProcessesNorORT(t *testing.T) {
	forbidden := []string{"os/exec", "plugin", "github.com/yalue/onnxruntime_go", "github.com/enclaveai/enclaveai/worker"}
	for _, b := range []struct {
		cgo  string
		args []string
	}{
		{"0", nil},
		{"1", []string{"-tags=noort"}},
	} {
		cmd := exec.Command("go", append(append([]string{"list", "-deps"}, b.args...), ".")...)
		cmd.Env = append(os.Environ(), "CGO_ENABLED="+b.cgo)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list (CGO_ENABLED=%s %v): %v", b.cgo, b.args, err)
		}
		deps := strings.Fields(string(out))
		for _, f := range forbidden {
			for _, d := range deps {
				if d == f || strings.HasPrefix(d, f+"/") {
					t.Errorf("CGO_ENABLED=%s %v links %s", b.cgo, b.args, d)
				}
			}
		}
		if !slices.Contains(deps, "github.com/enclaveai/enclaveai/goengine") {
			t.Errorf("CGO_ENABLED=%s %v: no pure-Go engine", b.cgo, b.args)
		}
	}
}
