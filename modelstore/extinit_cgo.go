//go:build cgo && !noort

package modelstore

// The cgo shim behind shared weights: the binding (onnxruntime_go) does not
// wrap OrtApi::AddInitializer, so this file calls it, and the few functions
// around it, through the OrtApi table of the library the binding loaded.
// The C header (onnxruntime_c_api.h, API version 24) is kept in ortapi/,
// a copy of the binding's own, so that a fresh clone builds with plain
// `go build` (see ortapi/README.md).

/*
#cgo CFLAGS: -I${SRCDIR}/ortapi
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include "onnxruntime_c_api.h"

static const OrtApi *eai_api;

// eai_init finds the OrtApi table of lib, which must already be loaded.
static int eai_init(const char *lib) {
	void *h = dlopen(lib, RTLD_NOW | RTLD_NOLOAD);
	if (h == NULL) return 1;
	const OrtApiBase *(*get)(void) = (const OrtApiBase *(*)(void))dlsym(h, "OrtGetApiBase");
	if (get != NULL) eai_api = get()->GetApi(ORT_API_VERSION);
	dlclose(h); // the binding's own handle keeps the library loaded
	return eai_api == NULL ? 2 : 0;
}

// eai_message returns a copy of the status's message and releases it.
static char *eai_message(OrtStatus *st) {
	char *m = strdup(eai_api->GetErrorMessage(st));
	eai_api->ReleaseStatus(st);
	return m;
}

// eai_add_initializers wraps n regions as tensors (vals[i]) and adds each to
// the session options under names[i]. dims holds the shapes one after the
// other. On error the values made so far are left in vals for the caller
// to release, and the message is returned (to be freed).
static char *eai_add_initializers(OrtSessionOptions *o, size_t n, char **names, void **data,
		size_t *lens, int64_t *dims, size_t *ranks, int *types, OrtValue **vals) {
	OrtMemoryInfo *mi;
	OrtStatus *st = eai_api->CreateCpuMemoryInfo(OrtArenaAllocator, OrtMemTypeDefault, &mi);
	if (st != NULL) return eai_message(st);
	const int64_t *d = dims;
	for (size_t i = 0; i < n && st == NULL; i++) {
		st = eai_api->CreateTensorWithDataAsOrtValue(mi, data[i], lens[i], d, ranks[i],
			(ONNXTensorElementDataType)types[i], &vals[i]);
		if (st == NULL) st = eai_api->AddInitializer(o, names[i], vals[i]);
		d += ranks[i];
	}
	eai_api->ReleaseMemoryInfo(mi);
	return st == NULL ? NULL : eai_message(st);
}

static void eai_release_values(OrtValue **vals, size_t n) {
	for (size_t i = 0; i < n; i++) {
		if (vals[i] != NULL) eai_api->ReleaseValue(vals[i]);
	}
}
*/
import "C"

import (
	"errors"
	"reflect"
	"runtime"
	"sync"
	"unsafe"

	ort "github.com/yalue/onnxruntime_go"
)

// errShareUnavailable: shared weights cannot be used with this runtime.
var errShareUnavailable = errors.New("shared weights unavailable")

var shareAPI struct {
	once sync.Once
	err  error
}

// sessionOptionsLayoutOK: the binding's SessionOptions is a struct whose
// only field is the OrtSessionOptions pointer, which AddInitializer needs
// and the binding does not export. If a later version changes that, weights
// are simply not shared.
var sessionOptionsLayoutOK = func() bool {
	t := reflect.TypeFor[ort.SessionOptions]()
	return t.NumField() == 1 && t.Field(0).Type.Kind() == reflect.Pointer &&
		t.Size() == unsafe.Sizeof(uintptr(0))
}()

func initShareAPI() error {
	shareAPI.once.Do(func() {
		if !runtimeState.ready.Load() || !sessionOptionsLayoutOK {
			shareAPI.err = errShareUnavailable
			return
		}
		lib := C.CString(runtimeState.libPath)
		defer C.free(unsafe.Pointer(lib))
		if C.eai_init(lib) != 0 {
			shareAPI.err = errShareUnavailable
		}
	})
	return shareAPI.err
}

// sharedWeights are the OrtValues a session's shared initializers live in,
// and the hold on their memory. release frees them, after the session.
type sharedWeights struct {
	vals   **C.OrtValue // C array of n values
	n      int
	buf    *ModelBuffer   // referenced, if the model is in one
	pins   runtime.Pinner // pins the model when it is Go memory
	pinned bool
	bytes  int64
}

// attach adds the plan's initializers, in place in model (which is buf's
// bytes when buf is not nil), to the session options, and turns off
// prepacking. The caller must release the result once the session made
// with o is destroyed, or at once if none is made. The model's memory is
// held meanwhile: a reference to buf, and a pin if it is Go memory (a heap
// ModelBuffer, or none), which cgo requires of memory C keeps pointers to.
func (p *sharePlan) attach(o *ort.SessionOptions, model []byte, buf *ModelBuffer) (*sharedWeights, error) {
	if err := initShareAPI(); err != nil {
		return nil, err
	}
	if err := o.AddSessionConfigEntry("session.disable_prepacking", "1"); err != nil {
		return nil, newORTError(err)
	}
	n := len(p.inits)
	w := &sharedWeights{n: n, buf: buf, bytes: p.bytes}
	if buf != nil {
		buf.Ref()
	}
	if buf == nil || !buf.Mapped() {
		w.pins.Pin(unsafe.SliceData(model))
		w.pinned = true
		pinnedWeights.Store(w, struct{}{})
	}
	ranks := 0
	for _, in := range p.inits {
		ranks += len(in.dims)
	}
	// The argument arrays live in C memory: they hold pointers into the
	// model, which may be (pinned) Go memory.
	names, data, lens := cArray[*C.char](n), cArray[unsafe.Pointer](n), cArray[C.size_t](n)
	rk, types, dims := cArray[C.size_t](n), cArray[C.int](n), cArray[C.int64_t](ranks)
	defer func() {
		for _, s := range names {
			C.free(unsafe.Pointer(s))
		}
		cFree(names)
		cFree(data)
		cFree(lens)
		cFree(rk)
		cFree(types)
		cFree(dims)
	}()
	w.vals = unsafe.SliceData(cArray[*C.OrtValue](n))
	d := 0
	for i, in := range p.inits {
		names[i] = C.CString(in.name)
		data[i] = unsafe.Pointer(&model[in.off])
		lens[i] = C.size_t(in.size)
		rk[i] = C.size_t(len(in.dims))
		types[i] = C.int(in.dtype)
		for _, v := range in.dims {
			dims[d] = C.int64_t(v)
			d++
		}
	}
	opts := *(**C.OrtSessionOptions)(unsafe.Pointer(o))
	if msg := C.eai_add_initializers(opts, C.size_t(n), unsafe.SliceData(names), unsafe.SliceData(data),
		unsafe.SliceData(lens), unsafe.SliceData(dims), unsafe.SliceData(rk), unsafe.SliceData(types), w.vals); msg != nil {
		defer C.free(unsafe.Pointer(msg))
		w.release()
		return nil, &ORTError{Msg: cleanMessage(C.GoString(msg))}
	}
	return w, nil
}

// release frees the values and lets go of the memory they point into.
// It may be called more than once.
func (w *sharedWeights) release() {
	if w.vals != nil {
		C.eai_release_values(w.vals, C.size_t(w.n))
		C.free(unsafe.Pointer(w.vals))
		w.vals = nil
	}
	if w.pinned {
		w.pins.Unpin()
		w.pinned = false
		pinnedWeights.Delete(w)
	}
	if w.buf != nil {
		w.buf.Unref()
		w.buf = nil
	}
}

// pinnedWeights keeps every sharedWeights that pins Go memory reachable
// until it is released: a Pinner collected while pinning is a fatal error,
// and a session leaked by mistake should cost memory, not the process.
var pinnedWeights sync.Map

// cArray allocates a zeroed C array of n elements (at least one, so that
// its address is never nil) for the caller to cFree.
func cArray[T any](n int) []T {
	var zero T
	p := C.calloc(C.size_t(max(n, 1)), C.size_t(unsafe.Sizeof(zero)))
	return unsafe.Slice((*T)(p), n)
}

func cFree[T any](s []T) { C.free(unsafe.Pointer(unsafe.SliceData(s))) }

// NewSharedSession compiles model like NewSession, but lets ONNX Runtime
// read the model's large initializers where they lie in model instead of
// copying them. model must not change while the session lives: it is buf's
// bytes when buf is not nil (the session then holds a reference to buf),
// else Go memory, which the session pins until it is freed.
//
// When the weights cannot be shared (too few of them, an ORT that refuses
// the arrangement), the model is compiled the usual way: Weights tells
// which happened. A model that ORT cannot load at all fails both ways, and
// the error is the usual way's.
func NewSharedSession(model []byte, buf *ModelBuffer, opts SessionOptions) (*Session, error) {
	plan, err := planSharedWeights(model)
	if err != nil || plan == nil || initShareAPI() != nil {
		return NewSession(model, opts)
	}
	if s, err := newSession(model, opts, plan, buf); err == nil {
		return s, nil
	}
	return NewSession(model, opts)
}

// Weights says how the session holds the model's large initializers, and
// how many bytes of them it reads in place.
func (s *Session) Weights() (WeightsMode, int64) {
	if s.shared == nil {
		return WeightsCopied, 0
	}
	return WeightsShared, s.shared.bytes
}
