package modelstore

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// DType is a tensor element type, named as RedisAI names it.
type DType uint8

// The element types. The numeric values are persisted in snapshots: never
// renumber them, only append.
const (
	DTypeInvalid DType = iota
	Float
	Double
	Int8
	Int16
	Int32
	Int64
	Uint8
	Uint16
	Bool
	String
	Uint32
	Uint64
)

var dtypeNames = [...]string{
	DTypeInvalid: "INVALID",
	Float:        "FLOAT",
	Double:       "DOUBLE",
	Int8:         "INT8",
	Int16:        "INT16",
	Int32:        "INT32",
	Int64:        "INT64",
	Uint8:        "UINT8",
	Uint16:       "UINT16",
	Bool:         "BOOL",
	String:       "STRING",
	Uint32:       "UINT32",
	Uint64:       "UINT64",
}

var dtypeSizes = [...]int{
	Float: 4, Double: 8, Int8: 1, Int16: 2, Int32: 4, Int64: 8,
	Uint8: 1, Uint16: 2, Bool: 1, String: 0, Uint32: 4, Uint64: 8,
}

// String returns the upper-case RedisAI name of the type.
func (d DType) String() string {
	if int(d) < len(dtypeNames) {
		return dtypeNames[d]
	}
	return "INVALID"
}

// Size is the element size in bytes; 0 for STRING (variable length).
func (d DType) Size() int {
	if int(d) < len(dtypeSizes) {
		return dtypeSizes[d]
	}
	return 0
}

// IsFloat reports whether VALUES of this type are floating point.
func (d DType) IsFloat() bool { return d == Float || d == Double }

// ParseDType parses a type name case-insensitively.
func ParseDType(name []byte) (DType, bool) {
	for i := Float; i <= Uint64; i++ {
		if len(name) == len(dtypeNames[i]) && strings.EqualFold(string(name), dtypeNames[i]) {
			return i, true
		}
	}
	return DTypeInvalid, false
}

// Tensor is an immutable n-dimensional array. Data holds the elements in
// C order, little-endian; for STRING tensors each element is terminated by a
// NUL byte. A stored Tensor must never be modified: writers build a new one.
type Tensor struct {
	DType DType
	Shape []int64
	Data  []byte
	// Owner is the user who stored the tensor at its key, when users are
	// configured ("" = the default user; commands/owner.go). Inference
	// ignores it.
	Owner string
	// hold counts the holders of a buffer that goes back to the pool once
	// none is left (tensorbuf.go); nil for a tensor whose memory is Go's.
	hold *holders
}

// WithOwner returns a copy of t that names owner. Both share the data
// (values are immutable), which then never goes back to the pool
// (tensorbuf.go).
func (t *Tensor) WithOwner(owner string) *Tensor {
	t.pin()
	c := *t
	c.Owner = owner
	return &c
}

// Len is the number of elements (the product of the dimensions; 1 for a scalar).
func (t *Tensor) Len() int64 { return ShapeLen(t.Shape) }

// ShapeLen is the product of the dimensions, or -1 on overflow.
func ShapeLen(shape []int64) int64 {
	n := int64(1)
	for _, d := range shape {
		if d < 0 {
			return -1
		}
		if d != 0 && n > math.MaxInt64/d {
			return -1
		}
		n *= d
	}
	return n
}

// InlineRank is the most dimensions a Tensor holds within its own
// allocation (newTensor); AI.TENSORSET parses that many without one too.
const InlineRank = 4

// tensorDims is a Tensor allocated together with room for its shape.
type tensorDims struct {
	t    Tensor
	dims [InlineRank]int64
}

// heldTensor is a tensorDims whose buffer goes back to the pool.
type heldTensor struct {
	tensorDims
	h holders
}

// newTensor returns a Tensor of a copy of shape and data: one allocation
// up to InlineRank dimensions rather than two (AI.TENSORSET's, issue 9).
func newTensor(dt DType, shape []int64, data []byte) *Tensor {
	if len(shape) > InlineRank {
		return &Tensor{DType: dt, Shape: slices.Clone(shape), Data: data}
	}
	w := &tensorDims{}
	w.init(dt, shape, data)
	return &w.t
}

func (w *tensorDims) init(dt DType, shape []int64, data []byte) {
	n := copy(w.dims[:], shape)
	w.t = Tensor{DType: dt, Shape: w.dims[:n:n], Data: data}
}

// NewTensorFromBlob validates a raw blob against dtype and shape and wraps it.
// The blob is kept, not copied; the shape is copied.
func NewTensorFromBlob(dt DType, shape []int64, blob []byte) (*Tensor, error) {
	if err := checkBlob(dt, shape, blob); err != nil {
		return nil, err
	}
	return newTensor(dt, shape, blob), nil
}

// CheckTensor reports whether t is a tensor the server can hold: a known
// type, no negative dimension, and data of the length they give (STRING:
// that many NUL-terminated elements; BOOL: 0 or 1), as AI.TENSORSET and
// the log's replay require. What an engine worker returns is checked so:
// a worker taken over by a hostile model returned a FLOAT output of
// 100,000,000 elements with 4 bytes of data, which was stored and logged,
// and AI.TENSORGET VALUES of it ended the server, whose next start then
// refused the log (red-team review).
func CheckTensor(t *Tensor) error {
	if t.DType < Float || t.DType > Uint64 {
		return fmt.Errorf("%w: %d", ErrUnsupportedDType, t.DType)
	}
	return checkBlob(t.DType, t.Shape, t.Data)
}

// checkBlob reports whether blob holds a tensor of dt and shape.
func checkBlob(dt DType, shape []int64, blob []byte) error {
	n := ShapeLen(shape)
	if n < 0 {
		return ErrDataLength
	}
	if dt == String {
		// NUL-terminated elements; none at all (a dimension 0) is an
		// empty blob, as NewZeroTensor and the engines make it.
		if (len(blob) > 0 && blob[len(blob)-1] != 0) || int64(bytes.Count(blob, []byte{0})) != n {
			return ErrStringElements
		}
		return nil
	}
	size := int64(dt.Size())
	if n > math.MaxInt64/size || int64(len(blob)) != n*size {
		return ErrDataLength
	}
	if dt == Bool {
		for _, b := range blob {
			if b > 1 {
				return ErrBoolValue
			}
		}
	}
	return nil
}

// NewZeroTensor returns a tensor of zeros (STRING: empty strings), of a
// copy of shape. The caller must have checked that the size is within limits.
func NewZeroTensor(dt DType, shape []int64) *Tensor {
	n := ShapeLen(shape)
	size := int64(dt.Size())
	if dt == String {
		size = 1
	}
	return newTensor(dt, shape, make([]byte, n*size))
}

// ByteSize is the number of data bytes a numeric tensor of this shape needs,
// or -1 on overflow. STRING tensors report -1.
func ByteSize(dt DType, shape []int64) int64 {
	n := ShapeLen(shape)
	size := int64(dt.Size())
	if n < 0 || size == 0 || n > math.MaxInt64/size {
		return -1
	}
	return n * size
}

// NewTensorFromValues parses VALUES arguments into a tensor of a copy of
// shape. len(values) must equal the shape's element count (checked by the
// caller, which owns the error text).
func NewTensorFromValues(dt DType, shape []int64, values [][]byte) (*Tensor, error) {
	if dt == String {
		var buf []byte
		for _, v := range values {
			if i := bytes.IndexByte(v, 0); i >= 0 && i != len(v)-1 {
				return nil, ErrNullInString
			}
			v = bytes.TrimSuffix(v, []byte{0})
			buf = append(buf, v...)
			buf = append(buf, 0)
		}
		if buf == nil {
			buf = []byte{}
		}
		return newTensor(dt, shape, buf), nil
	}
	size := dt.Size()
	data := make([]byte, len(values)*size)
	for i, v := range values {
		b := data[i*size : (i+1)*size]
		if dt.IsFloat() {
			f, ok := parseDouble(string(v))
			if !ok {
				return nil, ErrInvalidValue
			}
			if dt == Float {
				binary.LittleEndian.PutUint32(b, math.Float32bits(float32(f)))
			} else {
				binary.LittleEndian.PutUint64(b, math.Float64bits(f))
			}
			continue
		}
		if err := putInt(dt, b, v); err != nil {
			return nil, err
		}
	}
	return newTensor(dt, shape, data), nil
}

// parseDouble parses a float VALUES element as RedisModule_StringToDouble
// (strtod) does: NaN, values beyond the double range and values that
// underflow to zero are invalid; "inf" is valid (and a FLOAT beyond the
// float32 range becomes inf); a hexadecimal float may leave out its
// binary exponent ("0x10" is 16), which Go's parser requires. Go's digit
// separators are not numbers.
func parseDouble(s string) (float64, bool) {
	unsigned := strings.TrimPrefix(strings.TrimPrefix(s, "-"), "+")
	hex := len(unsigned) > 1 && unsigned[0] == '0' && unsigned[1]|0x20 == 'x'
	exp, digits := "e", "123456789"
	if hex {
		exp, digits = "p", "123456789abcdef"
		if !strings.ContainsAny(s, "pP") {
			s += "p0"
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(f) || strings.ContainsRune(s, '_') {
		return 0, false
	}
	if f == 0 {
		mant, _, _ := strings.Cut(strings.ToLower(s), exp)
		if strings.ContainsAny(mant, digits) {
			return 0, false
		}
	}
	return f, true
}

// strictInt reports whether s is written as Redis's string2ll requires: an
// optional '-', digits, no '+' and no leading zero ("0" alone excepted).
func strictInt(s string) bool {
	d := strings.TrimPrefix(s, "-")
	return d != "" && d[0] >= '0' && d[0] <= '9' && (d[0] != '0' || len(s) == 1)
}

func putInt(dt DType, b []byte, v []byte) error {
	s := string(v)
	if !strictInt(s) {
		return ErrInvalidValue
	}
	switch dt {
	case Uint8, Uint16, Uint32, Uint64, Bool:
		bits := map[DType]int{Uint8: 8, Uint16: 16, Uint32: 32, Uint64: 64, Bool: 1}[dt]
		u, err := strconv.ParseUint(s, 10, 64)
		if err != nil || (bits < 64 && u >= 1<<bits) {
			return ErrInvalidValue
		}
		switch dt.Size() {
		case 1:
			b[0] = byte(u)
		case 2:
			binary.LittleEndian.PutUint16(b, uint16(u))
		case 4:
			binary.LittleEndian.PutUint32(b, uint32(u))
		default:
			binary.LittleEndian.PutUint64(b, u)
		}
	default:
		n, err := strconv.ParseInt(s, 10, dt.Size()*8)
		if err != nil {
			return ErrInvalidValue
		}
		switch dt.Size() {
		case 1:
			b[0] = byte(int8(n))
		case 2:
			binary.LittleEndian.PutUint16(b, uint16(int16(n)))
		case 4:
			binary.LittleEndian.PutUint32(b, uint32(int32(n)))
		default:
			binary.LittleEndian.PutUint64(b, uint64(n))
		}
	}
	return nil
}

// Float returns element i of a FLOAT or DOUBLE tensor as float64.
func (t *Tensor) Float(i int) float64 {
	if t.DType == Float {
		return float64(math.Float32frombits(binary.LittleEndian.Uint32(t.Data[i*4:])))
	}
	return math.Float64frombits(binary.LittleEndian.Uint64(t.Data[i*8:]))
}

// FormatDouble writes f as Redis 7.2 replies a double (d2string): "nan",
// "inf", "-inf", "0" or "-0"; an integral value within ±2^62 as an integer;
// otherwise the shortest digits that parse back to f, laid out as
// fpconv_dtoa does (plain unless the exponent is far from the digits, then
// d.ddde±x with no padding of the exponent).
func FormatDouble(f float64) string { return string(AppendDouble(nil, f)) }

// AppendDouble appends FormatDouble's text of f to dst, allocating nothing
// but what dst's growth needs (AI.TENSORGET VALUES formats every element).
func AppendDouble(dst []byte, f float64) []byte {
	switch {
	case math.IsNaN(f):
		return append(dst, "nan"...)
	case math.IsInf(f, 1):
		return append(dst, "inf"...)
	case math.IsInf(f, -1):
		return append(dst, "-inf"...)
	case f == 0 && math.Signbit(f):
		return append(dst, "-0"...)
	case f >= -(1<<62) && f <= 1<<62 && f == math.Trunc(f):
		return strconv.AppendInt(dst, int64(f), 10)
	}
	if f < 0 {
		dst = append(dst, '-')
	}
	var sci [32]byte
	e := strconv.AppendFloat(sci[:0], math.Abs(f), 'e', -1, 64) // d.ddde±xx
	at := bytes.IndexByte(e, 'e')
	var dig [24]byte
	digits := append(dig[:0], e[0]) // the mantissa's digits, without its point
	if at > 2 {
		digits = append(digits, e[2:at]...)
	}
	x := 0 // the exponent of the first digit
	for _, c := range e[at+2:] {
		x = 10*x + int(c-'0')
	}
	if e[at+1] == '-' {
		x = -x
	}
	nd := len(digits)
	k := x - nd + 1 // f = digits × 10^k
	ax := x
	if ax < 0 {
		ax = -ax
	}
	switch {
	case k >= 0 && ax < nd+7:
		dst = append(dst, digits...)
		dst = appendZeros(dst, k)
	case k < 0 && (k > -7 || ax < 4):
		if off := nd + k; off <= 0 {
			dst = append(dst, "0."...)
			dst = appendZeros(dst, -off)
			dst = append(dst, digits...)
		} else {
			dst = append(dst, digits[:off]...)
			dst = append(dst, '.')
			dst = append(dst, digits[off:]...)
		}
	default:
		dst = append(dst, digits[0])
		if nd > 1 {
			dst = append(dst, '.')
			dst = append(dst, digits[1:]...)
		}
		dst = append(dst, 'e')
		if x < 0 {
			dst = append(dst, '-')
		} else {
			dst = append(dst, '+')
		}
		dst = strconv.AppendInt(dst, int64(ax), 10)
	}
	return dst
}

func appendZeros(dst []byte, n int) []byte {
	for ; n > 0; n-- {
		dst = append(dst, '0')
	}
	return dst
}

// Int returns element i of an integer or BOOL tensor. UINT64 values above
// MaxInt64 wrap; callers that need them use Uint.
func (t *Tensor) Int(i int) int64 {
	b := t.Data
	switch t.DType {
	case Int8:
		return int64(int8(b[i]))
	case Uint8, Bool:
		return int64(b[i])
	case Int16:
		return int64(int16(binary.LittleEndian.Uint16(b[i*2:])))
	case Uint16:
		return int64(binary.LittleEndian.Uint16(b[i*2:]))
	case Int32:
		return int64(int32(binary.LittleEndian.Uint32(b[i*4:])))
	case Uint32:
		return int64(binary.LittleEndian.Uint32(b[i*4:]))
	default:
		return int64(binary.LittleEndian.Uint64(b[i*8:]))
	}
}

// Strings splits a STRING tensor into its elements (without terminators).
func (t *Tensor) Strings() [][]byte {
	parts := bytes.Split(t.Data, []byte{0})
	if len(parts) > 0 {
		parts = parts[:len(parts)-1]
	}
	return parts
}
