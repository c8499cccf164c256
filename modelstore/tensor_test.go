package modelstore

import (
	"errors"
	"math"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"testing"
)

// at is the file:line of the table row that calls it.
func at() string {
	_, file, line, _ := runtime.Caller(1)
	return filepath.Base(file) + ":" + strconv.Itoa(line)
}

func TestParseDType(t *testing.T) {
	for _, name := range []string{"FLOAT", "float", "Double", "INT8", "INT16", "INT32", "INT64", "UINT8", "UINT16", "UINT32", "UINT64", "BOOL", "STRING"} {
		d, ok := ParseDType([]byte(name))
		if !ok || !equalFold(d.String(), name) {
			t.Errorf("ParseDType(%q) = %v %v", name, d, ok)
		}
	}
	for _, name := range []string{"", "INVALID", "FLOAT16", "INT", "INT128", "FLOAT32", "FLOAT ", "BOOLEAN"} {
		if d, ok := ParseDType([]byte(name)); ok {
			t.Errorf("ParseDType(%q) = %v, want refused", name, d)
		}
	}
	if DType(200).String() != "INVALID" || DType(200).Size() != 0 {
		t.Error("an unknown DType must read INVALID, size 0")
	}
}

func equalFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i]|0x20, b[i]|0x20
		if x != y {
			return false
		}
	}
	return true
}

func TestShapeLen(t *testing.T) {
	rows := []struct {
		at    string
		shape []int64
		want  int64
	}{
		{at(), nil, 1},
		{at(), []int64{}, 1},
		{at(), []int64{3}, 3},
		{at(), []int64{2, 3, 4}, 24},
		{at(), []int64{0, 5}, 0},
		{at(), []int64{-1}, -1},
		{at(), []int64{1 << 62, 2}, -1}, // overflow
		{at(), []int64{1 << 31, 1 << 31, 2}, -1},
		{at(), []int64{1 << 31, 1 << 31, 1}, 1 << 62},
		{at(), []int64{math.MaxInt64, 1}, math.MaxInt64},
		{at(), []int64{math.MaxInt64, 2}, -1},
		{at(), []int64{3037000500, 3037000500}, -1},
		{at(), []int64{3037000499, 3037000499}, 3037000499 * 3037000499},
	}
	for _, r := range rows {
		if got := ShapeLen(r.shape); got != r.want {
			t.Errorf("%s: ShapeLen(%v) = %d, want %d", r.at, r.shape, got, r.want)
		}
	}
	if got := ByteSize(Float, []int64{1 << 61}); got != -1 {
		t.Errorf("ByteSize overflowing the element size = %d, want -1", got)
	}
	if got := ByteSize(Double, []int64{3, 2}); got != 48 {
		t.Errorf("ByteSize(DOUBLE, 3x2) = %d", got)
	}
	if got := ByteSize(String, []int64{3}); got != -1 {
		t.Errorf("ByteSize(STRING) = %d, want -1", got)
	}
}

func TestNewTensorFromBlob(t *testing.T) {
	rows := []struct {
		at    string
		dt    DType
		shape []int64
		blob  string
		err   error
	}{
		{at(), Float, []int64{2}, "12345678", nil},
		{at(), Float, []int64{2}, "1234567", ErrDataLength},
		{at(), Float, []int64{2}, "123456789", ErrDataLength},
		{at(), Float, []int64{}, "1234", nil},
		{at(), Float, []int64{0}, "", nil},
		{at(), Int16, []int64{1 << 62, 4}, "", ErrDataLength},
		{at(), Double, []int64{1 << 61}, "", ErrDataLength},
		{at(), Uint8, []int64{2, 2}, "abcd", nil},
		{at(), Uint8, []int64{1, 1, 1, 2}, "ab", nil},
		{at(), Uint8, []int64{1, 1, 1, 1, 2}, "ab", nil},
		{at(), Bool, []int64{3}, "\x00\x01\x00", nil},
		{at(), Bool, []int64{2}, "\x01\x02", ErrBoolValue},
		{at(), Bool, []int64{1}, "\xff", ErrBoolValue},
		{at(), String, []int64{2}, "a\x00b\x00", nil},
		{at(), String, []int64{3}, "\x00\x00\x00", nil},
		{at(), String, []int64{}, "abc\x00", nil},
		{at(), String, []int64{2}, "a\x00b", ErrStringElements},
		{at(), String, []int64{1}, "a\x00b\x00", ErrStringElements},
		{at(), String, []int64{1}, "", ErrStringElements},
		// No elements: an empty blob, as a STRING tensor of a dimension 0
		// is stored (AI.TENSORSET t STRING 0) and must load again.
		{at(), String, []int64{0}, "", nil},
		{at(), String, []int64{2, 0}, "", nil},
		{at(), String, []int64{0}, "\x00", ErrStringElements},
		{at(), String, []int64{}, "", ErrStringElements},
		{at(), String, []int64{1 << 62, 4}, "a\x00", ErrDataLength},
	}
	for _, r := range rows {
		blob := []byte(r.blob)
		tn, err := NewTensorFromBlob(r.dt, r.shape, blob)
		if !errors.Is(err, r.err) || (err == nil) != (r.err == nil) {
			t.Errorf("%s: %v %v %q: %v, want %v", r.at, r.dt, r.shape, r.blob, err, r.err)
			continue
		}
		if err == nil && (len(tn.Data) != len(blob) || (len(blob) > 0 && &tn.Data[0] != &blob[0])) {
			t.Errorf("%s: the blob was copied, not kept", r.at)
		}
		// The shape is copied: AI.TENSORSET parses it into memory the
		// connection reuses.
		if err == nil && (!slices.Equal(tn.Shape, r.shape) || (len(r.shape) > 0 && &tn.Shape[0] == &r.shape[0])) {
			t.Errorf("%s: shape %v (aliased: %v), want a copy of %v", r.at, tn.Shape, len(r.shape) > 0 && &tn.Shape[0] == &r.shape[0], r.shape)
		}
	}
}

func TestNewTensorFromValues(t *testing.T) {
	rows := []struct {
		at     string
		dt     DType
		values []string
		blob   string // "" with err
		err    error
	}{
		{at(), Int8, []string{"-128", "127", "0"}, "\x80\x7f\x00", nil},
		{at(), Int8, []string{"128"}, "", ErrInvalidValue},
		{at(), Int8, []string{"+1"}, "", ErrInvalidValue},
		{at(), Int8, []string{"01"}, "", ErrInvalidValue},
		{at(), Int8, []string{"-0"}, "", ErrInvalidValue},
		{at(), Int8, []string{"1.0"}, "", ErrInvalidValue},
		{at(), Int8, []string{" 1"}, "", ErrInvalidValue},
		{at(), Int8, []string{""}, "", ErrInvalidValue},
		{at(), Uint8, []string{"255", "0"}, "\xff\x00", nil},
		{at(), Uint8, []string{"-1"}, "", ErrInvalidValue},
		{at(), Int16, []string{"-2"}, "\xfe\xff", nil},
		{at(), Uint16, []string{"65535"}, "\xff\xff", nil},
		{at(), Uint16, []string{"65536"}, "", ErrInvalidValue},
		{at(), Int32, []string{"-2147483648"}, "\x00\x00\x00\x80", nil},
		{at(), Uint32, []string{"4294967295"}, "\xff\xff\xff\xff", nil},
		{at(), Uint32, []string{"4294967296"}, "", ErrInvalidValue},
		{at(), Int64, []string{"9223372036854775807"}, "\xff\xff\xff\xff\xff\xff\xff\x7f", nil},
		{at(), Uint64, []string{"18446744073709551615"}, "\xff\xff\xff\xff\xff\xff\xff\xff", nil},
		{at(), Bool, []string{"1", "0"}, "\x01\x00", nil},
		{at(), Bool, []string{"2"}, "", ErrInvalidValue},
		{at(), Float, []string{"1"}, "\x00\x00\x80\x3f", nil},
		{at(), Float, []string{"-0"}, "\x00\x00\x00\x80", nil},
		{at(), Float, []string{"1e39"}, "\x00\x00\x80\x7f", nil}, // +inf in float32
		{at(), Float, []string{"inf"}, "\x00\x00\x80\x7f", nil},
		{at(), Double, []string{"1.5"}, "\x00\x00\x00\x00\x00\x00\xf8\x3f", nil},
		{at(), Double, []string{"5e-324"}, "\x01\x00\x00\x00\x00\x00\x00\x00", nil}, // denormal: valid
		{at(), Double, []string{"nan"}, "", ErrInvalidValue},
		{at(), Double, []string{"NaN"}, "", ErrInvalidValue},
		{at(), Double, []string{"1e309"}, "", ErrInvalidValue},
		{at(), Double, []string{"1e-400"}, "", ErrInvalidValue},
		{at(), Double, []string{"1_000"}, "", ErrInvalidValue},
		{at(), Double, []string{"0x"}, "", ErrInvalidValue},
		// strtod's hexadecimal floats, the binary exponent optional.
		{at(), Double, []string{"0x10"}, "\x00\x00\x00\x00\x00\x00\x30\x40", nil},
		{at(), Double, []string{"-0X1.8p1"}, "\x00\x00\x00\x00\x00\x00\x08\xc0", nil},
		{at(), Double, []string{"0x0"}, "\x00\x00\x00\x00\x00\x00\x00\x00", nil},
		{at(), Double, []string{"0x1p-2000"}, "", ErrInvalidValue}, // underflows to 0
		{at(), Double, []string{"0xe"}, "\x00\x00\x00\x00\x00\x00\x2c\x40", nil},
		{at(), Double, []string{"0xp0"}, "", ErrInvalidValue},
		{at(), Double, []string{"1 "}, "", ErrInvalidValue},
		{at(), Double, []string{""}, "", ErrInvalidValue},
		{at(), String, []string{"ab", "", "c\x00"}, "ab\x00\x00c\x00", nil},
		{at(), String, []string{"a\x00b"}, "", ErrNullInString},
		{at(), String, []string{"\x00\x00"}, "", ErrNullInString},
		{at(), String, []string{}, "", nil},
	}
	for _, r := range rows {
		vs := make([][]byte, len(r.values))
		for i, v := range r.values {
			vs[i] = []byte(v)
		}
		tn, err := NewTensorFromValues(r.dt, []int64{int64(len(vs))}, vs)
		if !errors.Is(err, r.err) || (err == nil) != (r.err == nil) {
			t.Errorf("%s: %v %q: %v, want %v", r.at, r.dt, r.values, err, r.err)
			continue
		}
		if err == nil && string(tn.Data) != r.blob {
			t.Errorf("%s: %v %q: blob %q, want %q", r.at, r.dt, r.values, tn.Data, r.blob)
		}
	}
}

func TestAccessors(t *testing.T) {
	tn, _ := NewTensorFromValues(Int16, []int64{2}, [][]byte{[]byte("-5"), []byte("7")})
	if tn.Int(0) != -5 || tn.Int(1) != 7 || tn.Len() != 2 {
		t.Errorf("Int16 accessors: %d %d %d", tn.Int(0), tn.Int(1), tn.Len())
	}
	u, _ := NewTensorFromValues(Uint64, []int64{1}, [][]byte{[]byte("18446744073709551615")})
	if uint64(u.Int(0)) != math.MaxUint64 {
		t.Errorf("Uint64 wraps through Int: %d", u.Int(0))
	}
	f, _ := NewTensorFromValues(Float, []int64{1}, [][]byte{[]byte("0.1")})
	if f.Float(0) != float64(float32(0.1)) || FormatDouble(f.Float(0)) != "0.10000000149011612" {
		t.Errorf("Float accessors: %v %s", f.Float(0), FormatDouble(f.Float(0)))
	}
	s, _ := NewTensorFromBlob(String, []int64{3}, []byte("a\x00\x00bc\x00"))
	var got []string
	for _, e := range s.Strings() {
		got = append(got, string(e))
	}
	if !slices.Equal(got, []string{"a", "", "bc"}) {
		t.Errorf("Strings() = %q", got)
	}
	z := NewZeroTensor(String, []int64{2, 2})
	if string(z.Data) != "\x00\x00\x00\x00" || len(z.Strings()) != 4 {
		t.Errorf("zero STRING tensor: %q", z.Data)
	}
	if z := NewZeroTensor(Double, []int64{3}); len(z.Data) != 24 {
		t.Errorf("zero DOUBLE tensor of %d bytes", len(z.Data))
	}
	if z := NewZeroTensor(Bool, []int64{}); len(z.Data) != 1 {
		t.Errorf("zero BOOL scalar of %d bytes", len(z.Data))
	}
}

// FormatDouble is Redis 7.2's d2string: shortest round-trip digits laid
// out as fpconv_dtoa lays them out.
func TestFormatDouble(t *testing.T) {
	rows := []struct {
		at   string
		f    float64
		want string
	}{
		{at(), 0, "0"},
		{at(), math.Copysign(0, -1), "-0"},
		{at(), math.NaN(), "nan"},
		{at(), math.Inf(1), "inf"},
		{at(), math.Inf(-1), "-inf"},
		{at(), 1, "1"},
		{at(), -17, "-17"},
		{at(), 1e6, "1000000"},
		{at(), 1 << 62, "4611686018427387904"},
		{at(), -(1 << 62), "-4611686018427387904"},
		{at(), 1 << 63, "9223372036854776000"},
		{at(), 1e20, "1e+20"},
		{at(), 1.5e20, "1.5e+20"},
		{at(), 1.5e15, "1500000000000000"},
		{at(), 1.5e18, "1500000000000000000"},
		{at(), 1e21, "1e+21"},
		{at(), 1.7976931348623157e308, "1.7976931348623157e+308"},
		{at(), 0.1, "0.1"},
		{at(), float64(float32(0.1)), "0.10000000149011612"},
		{at(), -2.5, "-2.5"},
		{at(), 123456.789, "123456.789"},
		{at(), 0.000015, "0.000015"},
		{at(), 0.000001, "0.000001"},
		{at(), 1e-7, "1e-7"},
		{at(), 1.5e-7, "1.5e-7"},
		{at(), 0.0012345678, "0.0012345678"},
		{at(), 1234.5678e-10, "1.2345678e-7"},
		{at(), 5e-324, "5e-324"},
		{at(), 2.5e-100, "2.5e-100"},
		{at(), 12345678.5, "12345678.5"},
	}
	for _, r := range rows {
		if got := FormatDouble(r.f); got != r.want {
			t.Errorf("%s: FormatDouble(%v) = %s, want %s", r.at, r.f, got, r.want)
		}
	}
	// Any value reads back exactly.
	for _, bits := range []uint64{1, 0x3fb999999999999a, 0x7fefffffffffffff, 0x0010000000000000, 0xc00921fb54442d18, 0x44b52d02c7e14af6} {
		f := math.Float64frombits(bits)
		back, err := strconv.ParseFloat(FormatDouble(f), 64)
		if err != nil || back != f {
			t.Errorf("FormatDouble(%v) = %s reads back as %v", f, FormatDouble(f), back)
		}
	}
}

// AppendDouble allocates nothing into a buffer that has room (AI.TENSORGET
// VALUES formats every element: a string each made 25 MiB of garbage for
// 5 million elements), and writes FormatDouble's text.
func TestAppendDoubleAllocs(t *testing.T) {
	buf := make([]byte, 0, 64)
	for _, f := range []float64{0.1, -2.5e-308, 1.7976931348623157e308, 3, math.NaN(), 123456.789, 1e-7} {
		if got := testing.AllocsPerRun(100, func() { buf = AppendDouble(buf[:0], f) }); got != 0 {
			t.Errorf("AppendDouble(%v): %.0f allocations", f, got)
		}
		if string(AppendDouble([]byte("x"), f)) != "x"+FormatDouble(f) {
			t.Errorf("AppendDouble(%v) = %q", f, AppendDouble([]byte("x"), f))
		}
	}
}

// Float formatting round-trips for every float32 class: the text of a
// FLOAT element parses back to the same float32.
func FuzzFormatDouble(f *testing.F) {
	for _, v := range []uint64{0, 1, 0x3fb999999999999a, 0x7ff0000000000000, 0x8000000000000000, 0x000fffffffffffff} {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, bits uint64) {
		v := math.Float64frombits(bits)
		s := FormatDouble(v)
		back, err := strconv.ParseFloat(s, 64)
		switch {
		case math.IsNaN(v):
			if s != "nan" {
				t.Fatalf("NaN reads %s", s)
			}
		case err != nil || back != v || math.Signbit(back) != math.Signbit(v):
			t.Fatalf("FormatDouble(%v) = %s reads back as %v (%v)", v, s, back, err)
		}
	})
}

// CheckTensor takes what AI.TENSORSET takes and refuses the rest, an
// unknown type first (its element size is 0).
func TestCheckTensor(t *testing.T) {
	for _, c := range []struct {
		t    Tensor
		want error
	}{
		{Tensor{DType: Float, Shape: []int64{2}, Data: make([]byte, 8)}, nil},
		{Tensor{DType: Float, Shape: []int64{100_000_000}, Data: make([]byte, 4)}, ErrDataLength},
		{Tensor{DType: Float, Shape: []int64{-1}, Data: nil}, ErrDataLength},
		{Tensor{DType: String, Shape: []int64{2}, Data: []byte("a\x00b\x00")}, nil},
		{Tensor{DType: String, Shape: []int64{3}, Data: []byte("a\x00b\x00")}, ErrStringElements},
		{Tensor{DType: Bool, Shape: []int64{1}, Data: []byte{2}}, ErrBoolValue},
		{Tensor{DType: DTypeInvalid, Shape: []int64{1}, Data: []byte{0}}, ErrUnsupportedDType},
		{Tensor{DType: Uint64 + 1, Shape: []int64{1}, Data: []byte{0}}, ErrUnsupportedDType},
	} {
		if err := CheckTensor(&c.t); !errors.Is(err, c.want) || (c.want == nil) != (err == nil) {
			t.Errorf("%s %v %d bytes: %v, want %v", c.t.DType, c.t.Shape, len(c.t.Data), err, c.want)
		}
	}
}
