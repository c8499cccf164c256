//go:build cgo && !noort

package modelstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// Hand-built Pad models (padguard.go).

// modelAt is a model of the graph made of parts at the given ai.onnx opset.
func modelAt(opset int64, graph ...[]byte) []byte {
	return bytes.Join([][]byte{pbInt(1, 8), pbMsg(8, pbInt(2, opset)), pbMsg(7, graph...)}, nil)
}

// nodePB is a NodeProto field of a graph.
func nodePB(op, name string, inputs, outputs []string, attrs ...[]byte) []byte {
	parts := [][]byte{pbStr(3, name), pbStr(4, op)}
	for _, in := range inputs {
		parts = append(parts, pbStr(1, in))
	}
	for _, out := range outputs {
		parts = append(parts, pbStr(2, out))
	}
	for _, a := range attrs {
		parts = append(parts, pbMsg(5, a))
	}
	return pbMsg(1, parts...)
}

// valueDecl is a graph input (field 11) or output (12) of the element
// type elem; shape nil leaves the shape out, a dimension of -1 is
// symbolic.
func valueDecl(field int, name string, elem int64, shape []int64) []byte {
	tt := [][]byte{pbInt(1, elem)}
	if shape != nil {
		var dims [][]byte
		for _, d := range shape {
			if d < 0 {
				dims = append(dims, pbMsg(1, pbStr(2, "d")))
			} else {
				dims = append(dims, pbMsg(1, pbInt(1, d)))
			}
		}
		tt = append(tt, pbMsg(2, dims...))
	}
	return pbMsg(field, pbStr(1, name), pbMsg(2, pbMsg(1, tt...)))
}

// int64Init is an INT64 initializer.
func int64Init(name string, vals ...int64) []byte {
	return pbMsg(5, tensor(name, onnxInt64, []int64{int64(len(vals))}, pbPacked(7, vals...)))
}

// padModel is one Pad node "pad" in mode of FLOAT x (declared of shape)
// and INT64 pads: the constant pads (an attribute before opset 11, else an
// initializer), or an input without them; at opset 18 and later the
// constant axes, if any.
func padModel(opset int64, mode string, shape []int64, pads []int64, axes ...int64) []byte {
	var attrs [][]byte
	if mode != "" {
		attrs = append(attrs, strAttrPB("mode", mode))
	}
	graph := [][]byte{valueDecl(11, "x", onnxFloat, shape), valueDecl(12, "y", onnxFloat, nil)}
	in := []string{"x"}
	switch {
	case opset < 11:
		attrs = append(attrs, intsAttr("pads", pads...))
	case pads == nil:
		in = append(in, "pads")
		graph = append(graph, valueDecl(11, "pads", onnxInt64, []int64{-1}))
	default:
		in = append(in, "pads")
		graph = append(graph, int64Init("pads", pads...))
	}
	if axes != nil {
		in = append(in, "", "axes")
		graph = append(graph, int64Init("axes", axes...))
	}
	return modelAt(opset, append([][]byte{nodePB("Pad", "pad", in, []string{"y"}, attrs...)}, graph...)...)
}

// int64Tensor is a 1-D INT64 tensor.
func int64Tensor(vals ...int64) *Tensor {
	t := &Tensor{DType: Int64, Shape: []int64{int64(len(vals))}}
	for _, v := range vals {
		t.Data = binary.LittleEndian.AppendUint64(t.Data, uint64(v))
	}
	return t
}

// Pads known when the model is stored are refused there where they do not
// fit, and need no guard where they do; pads or dimensions not known get a
// guard (ONNX Runtime's sessions only), and a Pad that cannot be guarded
// is refused.
func TestPadRefusedOrGuarded(t *testing.T) {
	const (
		ok = iota
		guarded
		refused
	)
	fn := func(mode string) []byte {
		body := [][]byte{pbStr(1, "f"), pbStr(10, "local"), pbStr(4, "a"), pbStr(4, "p"), pbStr(5, "b"),
			pbMsg(9, pbStr(1, ""), pbInt(2, 13)), pbMsg(7, pbStr(3, "fpad"), pbStr(4, "Pad"), pbStr(1, "a"), pbStr(1, "p"), pbStr(2, "b"), pbMsg(5, strAttrPB("mode", mode)))}
		return append(padModel(13, "constant", []int64{1, 3}, []int64{0, 1, 0, 1}), pbMsg(25, body...)...)
	}
	for _, tc := range []struct {
		name  string
		model []byte
		want  int
		text  string
	}{
		{"reflect pad as large as the axis", padModel(13, "reflect", []int64{1, 3}, []int64{0, 3, 0, 0}), refused,
			`node "pad" (Pad): reflect pads 3 and 0 of axis 1 (of 3 elements, 3 left after negative pads): a pad must be less than what is left of its axis after negative pads, or ONNX Runtime returns memory it never wrote`},
		{"reflect end pad", padModel(13, "reflect", []int64{2, 3}, []int64{0, 0, 0, 3}), refused, "reflect pads 0 and 3 of axis 1"},
		{"reflect after negative pads", padModel(13, "reflect", []int64{1, 3}, []int64{0, -1, 0, 2}), refused, "(of 3 elements, 2 left after negative pads)"},
		{"reflect of an axis cropped whole", padModel(13, "reflect", []int64{1, 3}, []int64{0, -3, 0, 1}), refused, "0 left after negative pads"},
		{"reflect fits", padModel(13, "reflect", []int64{1, 3}, []int64{0, 2, 0, 2}), ok, ""},
		{"reflect of an unknown dimension that is not widened", padModel(13, "reflect", []int64{-1, 3}, []int64{0, 2, -1, 2}), ok, ""},
		{"reflect at opset 10 (pads an attribute)", padModel(10, "reflect", []int64{1, 3}, []int64{0, 3, 0, 0}), refused, "reflect pads 3 and 0 of axis 1"},
		{"reflect at opset 18 with axes", padModel(18, "reflect", []int64{1, 3}, []int64{3, 0}, 1), refused, "reflect pads 3 and 0 of axis 1"},
		{"reflect at opset 18 with negative axes", padModel(18, "reflect", []int64{1, 3}, []int64{0, 3}, -1), refused, "reflect pads 0 and 3 of axis 1"},
		{"reflect at opset 18 with axes that fit", padModel(18, "reflect", []int64{-1, 3}, []int64{2, 2}, -1), ok, ""},
		{"wrap past the axis", padModel(19, "wrap", []int64{1, 3}, []int64{0, 4, 0, 0}), refused,
			"wrap pads 4 and 0 of axis 1 (of 3 elements, 3 left after negative pads): a pad must be at most what is left of its axis after negative pads"},
		{"wrap after the axis", padModel(19, "wrap", []int64{1, 3}, []int64{0, 0, 0, 4}), refused, "wrap pads 0 and 4 of axis 1"},
		{"wrap of the whole axis", padModel(19, "wrap", []int64{1, 3}, []int64{0, 3, 0, 3}), ok, ""},
		{"edge", padModel(13, "edge", []int64{1, 3}, []int64{0, 100, 0, 100}), ok, ""},
		{"constant", padModel(13, "", []int64{1, 3}, []int64{0, 100, 0, 100}), ok, ""},
		{"reflect of an unknown dimension", padModel(13, "reflect", []int64{1, -1}, []int64{0, 1, 0, 1}), guarded, ""},
		{"reflect of an undeclared shape", padModel(13, "reflect", nil, []int64{0, 1, 0, 1}), guarded, ""},
		{"reflect of pads fed", padModel(13, "reflect", []int64{1, 3}, nil), guarded, ""},
		{"reflect at opset 9", padModel(9, "reflect", []int64{1, -1}, []int64{0, 1, 0, 1}), guarded, ""},
		{"wrap of pads fed", padModel(19, "wrap", []int64{1, 3}, nil), guarded, ""},
		{"reflect at opset 18 with axes fed", padModel(18, "reflect", []int64{1, 3}, []int64{0, 1}), guarded, ""},
		{"reflect at opset 8", padModel(8, "reflect", []int64{1, -1}, []int64{0, 1, 0, 1}), refused, "reflect pads need opset 9 or later to be checked at run"},
		{"reflect in a function", fn("reflect"), refused, `node "fpad" (Pad): reflect pads in a model-local function cannot be checked`},
		{"edge in a function", fn("edge"), ok, ""},
	} {
		if tc.name == "reflect at opset 18 with axes fed" {
			// axes a graph input, the pads constant.
			tc.model = modelAt(18, nodePB("Pad", "pad", []string{"x", "pads", "", "axes"}, []string{"y"}, strAttrPB("mode", "reflect")),
				valueDecl(11, "x", onnxFloat, []int64{1, 3}), valueDecl(11, "axes", onnxInt64, []int64{1}), int64Init("pads", 0, 1), valueDecl(12, "y", onnxFloat, nil))
		}
		err := CheckModel(tc.model)
		out, padErrs, serr := sanitizeChecked(tc.model, true)
		plain, derr := SanitizeModel(tc.model)
		switch tc.want {
		case refused:
			if err == nil || !errors.Is(err, ErrModelUnsafe) || !strings.Contains(err.Error(), tc.text) {
				t.Errorf("%s: %v, want a refusal with %q", tc.name, err, tc.text)
			}
		case ok:
			if err != nil || serr != nil || out != nil || padErrs != nil {
				t.Errorf("%s: refused (%v) or guarded (%v, %d guards)", tc.name, err, serr, len(padErrs))
			}
		case guarded:
			if err != nil || serr != nil || out == nil || len(padErrs) != 1 {
				t.Errorf("%s: %v %v, %d guards, want one guard", tc.name, err, serr, len(padErrs))
			}
			// The pure-Go engine checks its own Pad: SanitizeModel adds no guard.
			if derr != nil || plain != nil {
				t.Errorf("%s: SanitizeModel: %v, rewritten %v", tc.name, derr, plain != nil)
			}
			if out != nil {
				if _, err := SanitizeModel(out); err != nil {
					t.Errorf("%s: the rewrite is refused: %v", tc.name, err)
				}
			}
		}
	}
}

// padRef is numpy's np.pad of the rows x cols matrix of 1, 2, ... in mode
// (reflect or wrap) by the pads, where negative pads crop first; for pads
// that fit.
func padRef(rows, cols int64, pads []int64, wrap bool) (shape []int64, vals []float32) {
	dims := []int64{rows, cols}
	var idx [2][]int64
	for a, d := range dims {
		b, e := pads[a], pads[a+2]
		lo, kept := max(-b, 0), d+min(b, 0)+min(e, 0)
		for j := -max(b, 0); j < kept+max(e, 0); j++ {
			m := j
			switch {
			case kept == 1:
				m = 0
			case wrap:
				m = ((j % kept) + kept) % kept
			default:
				p := 2 * (kept - 1)
				if m = ((j % p) + p) % p; m >= kept {
					m = p - m
				}
			}
			idx[a] = append(idx[a], lo+m)
		}
	}
	for _, i := range idx[0] {
		for _, j := range idx[1] {
			vals = append(vals, float32(i*cols+j+1))
		}
	}
	return []int64{int64(len(idx[0])), int64(len(idx[1]))}, vals
}

// The guard refuses every run whose reflect or wrap pads reach what is
// left of their axis, and leaves every other run's output as ONNX
// Runtime's own (numpy's), fed pads or fed dimensions, at opsets 9 (pads
// an attribute), 11, 13, 18 (with axes) and 19 (wrap), optimized or not.
// Without the guard ONNX Runtime returned bytes of memory it never wrote
// for the refused ones (padguard.go).
func TestPadGuardRuns(t *testing.T) {
	requireRuntime(t)
	run := func(what string, sess *Session, in []*Tensor, rows, cols int64, pads []int64, wrap bool) {
		t.Helper()
		out, err := sess.Run(context.Background(), in)
		fits := true
		for a, d := range []int64{rows, cols} {
			b, e := pads[a], pads[a+2]
			kept := d + min(b, 0) + min(e, 0)
			for _, p := range []int64{b, e} {
				if p > 0 && (p > kept || p == kept && !wrap) {
					fits = false
				}
			}
		}
		if !fits {
			if !errors.Is(err, ErrModelUnsafe) || !strings.Contains(err.Error(), `node "pad" (Pad)`) || !strings.Contains(err.Error(), "what is left of an axis: a pad must be") {
				t.Errorf("%s: %v, want the guard's refusal (output %v)", what, err, out)
			}
			return
		}
		if err != nil {
			t.Errorf("%s: %v", what, err)
			return
		}
		shape, want := padRef(rows, cols, pads, wrap)
		if got := out[0]; !slices.Equal(got.Shape, shape) || fmt.Sprint(tensorFloats(got)) != fmt.Sprint(want) {
			t.Errorf("%s: %v %v, want %v %v", what, got.Shape, tensorFloats(got), shape, want)
		}
	}
	matrix := func(rows, cols int64) *Tensor {
		v := make([]float32, rows*cols)
		for i := range v {
			v[i] = float32(i + 1)
		}
		return floats([]int64{rows, cols}, v...)
	}
	var padsList [][]int64
	for _, outer := range [][2]int64{{0, 0}, {1, 1}, {-1, 2}} {
		for b := int64(-2); b <= 5; b++ {
			for e := int64(-2); e <= 5; e++ {
				padsList = append(padsList, []int64{outer[0], b, outer[1], e})
			}
		}
	}
	for _, opt := range []bool{false, true} {
		for _, c := range []struct {
			opset int64
			mode  string
		}{{11, "reflect"}, {13, "reflect"}, {19, "reflect"}, {19, "wrap"}} {
			sess, err := NewSession(padModel(c.opset, c.mode, []int64{-1, -1}, nil), SessionOptions{Optimize: opt})
			if err != nil {
				t.Fatal(err)
			}
			for cols := int64(1); cols <= 4; cols++ {
				for _, pads := range padsList {
					if 3+pads[0]+pads[2] <= 0 || cols+pads[1]+pads[3] <= 0 {
						continue // an empty output, which ONNX Runtime makes
					}
					what := fmt.Sprintf("opset %d %s optimized %v: [3 %d] pads %v", c.opset, c.mode, opt, cols, pads)
					run(what, sess, []*Tensor{matrix(3, cols), int64Tensor(pads...)}, 3, cols, pads, c.mode == "wrap")
				}
			}
			sess.Close()
		}
		// Constant pads, the dimensions fed: opset 9 (an attribute) and 18
		// (with axes: the columns only).
		for _, pads := range padsList {
			if pads[0] != 0 || pads[2] != 0 {
				continue
			}
			for _, c := range []struct {
				opset int64
				model []byte
			}{
				{9, padModel(9, "reflect", []int64{-1, -1}, pads)},
				{18, padModel(18, "reflect", []int64{-1, -1}, []int64{pads[1], pads[3]}, -1)},
			} {
				sess, err := NewSession(c.model, SessionOptions{Optimize: opt})
				if err != nil {
					t.Fatalf("opset %d pads %v: %v", c.opset, pads, err)
				}
				for cols := int64(1); cols <= 4; cols++ {
					if cols+pads[1]+pads[3] <= 0 {
						continue
					}
					what := fmt.Sprintf("opset %d optimized %v: [3 %d] pads %v", c.opset, opt, cols, pads)
					run(what, sess, []*Tensor{matrix(3, cols)}, 3, cols, pads, false)
				}
				sess.Close()
			}
		}
	}
}

// A Pad whose input and pads ONNX Runtime folds while the session is
// created (a constant input, its pads made by a Cast the sanitizer does
// not see through) is refused, at the session's creation or at its run,
// when the pads do not fit, and folds to numpy's output when they do; so
// is one inside an If's branch.
func TestPadGuardFoldedAndNested(t *testing.T) {
	requireRuntime(t)
	folded := func(pads ...int64) []byte {
		return modelAt(13,
			nodePB("Cast", "cast", []string{"p32"}, []string{"pads"}, intAttrPB("to", onnxInt64)),
			nodePB("Pad", "pad", []string{"c", "pads"}, []string{"padded"}, strAttrPB("mode", "reflect")),
			nodePB("Add", "add", []string{"padded", "z"}, []string{"y"}),
			pbMsg(5, tensor("c", onnxFloat, []int64{1, 3}, pbMsg(9, floats(nil, 1, 2, 3).Data))),
			pbMsg(5, tensor("p32", onnxInt32, []int64{4}, pbPacked(5, pads...))),
			valueDecl(11, "z", onnxFloat, []int64{1}), valueDecl(12, "y", onnxFloat, nil))
	}
	z := floats([]int64{1}, 0)
	sess, err := NewSession(folded(0, 2, 0, 1), SessionOptions{Optimize: true})
	if err != nil {
		t.Fatal(err)
	}
	out, err := sess.Run(context.Background(), []*Tensor{z})
	sess.Close()
	if err != nil || fmt.Sprint(tensorFloats(out[0])) != "[3 2 1 2 3 2]" {
		t.Errorf("folded reflect pads that fit: %v %v", out, err)
	}
	sess, err = NewSession(folded(0, 3, 0, 0), SessionOptions{Optimize: true})
	if err == nil {
		out, err = sess.Run(context.Background(), []*Tensor{z})
		sess.Close()
	}
	if !errors.Is(err, ErrModelUnsafe) || !strings.Contains(err.Error(), `node "pad" (Pad): reflect pads reach what is left of an axis`) {
		t.Errorf("folded reflect pads that do not fit: %v, want the guard's refusal (output %v)", err, out)
	}

	// y = If(cond) then Pad(x, pads) reflect else x.
	branch := func(name string, nodes ...[]byte) []byte {
		return bytes.Join([][]byte{pbStr(1, name), pbInt(20, attrGraph), pbMsg(6, append(append([][]byte{pbStr(2, name)}, nodes...), valueDecl(12, "b_"+name, onnxFloat, nil))...)}, nil)
	}
	nested := modelAt(13,
		nodePB("If", "if", []string{"cond"}, []string{"y"},
			branch("then_branch", nodePB("Pad", "pad", []string{"x", "pads"}, []string{"b_then_branch"}, strAttrPB("mode", "reflect"))),
			branch("else_branch", nodePB("Identity", "id", []string{"x"}, []string{"b_else_branch"}))),
		valueDecl(11, "cond", onnxBool, []int64{}), valueDecl(11, "x", onnxFloat, []int64{1, -1}), valueDecl(11, "pads", onnxInt64, []int64{4}),
		valueDecl(12, "y", onnxFloat, nil))
	sess, err = NewSession(nested, SessionOptions{Optimize: true})
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	yes := &Tensor{DType: Bool, Shape: []int64{}, Data: []byte{1}}
	out, err = sess.Run(context.Background(), []*Tensor{yes, floats([]int64{1, 3}, 1, 2, 3), int64Tensor(0, 1, 0, 2)})
	if err != nil || fmt.Sprint(tensorFloats(out[0])) != "[2 1 2 3 2 1]" {
		t.Errorf("reflect pads that fit in an If: %v %v", out, err)
	}
	out, err = sess.Run(context.Background(), []*Tensor{yes, floats([]int64{1, 3}, 1, 2, 3), int64Tensor(0, 0, 0, 1000)})
	if !errors.Is(err, ErrModelUnsafe) {
		t.Errorf("reflect pads that do not fit in an If: %v, want the guard's refusal (output %v)", err, out)
	}
}
