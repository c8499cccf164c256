package main

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
)

// npyTypes maps numpy's little-endian type strings to server tensor types.
var npyTypes = map[string]string{
	"<f4": "FLOAT", "<f8": "DOUBLE", "|i1": "INT8", "<i2": "INT16", "<i4": "INT32", "<i8": "INT64",
	"|u1": "UINT8", "<u2": "UINT16", "<u4": "UINT32", "<u8": "UINT64", "|b1": "BOOL",
}

var npyMagic = []byte("\x93NUMPY")

// npyArray is a C-ordered array read from or written to a .npy file.
type npyArray struct {
	dtype string // server tensor type
	shape []int64
	data  []byte
}

var (
	reDescr   = regexp.MustCompile(`'descr':\s*'([^']*)'`)
	reFortran = regexp.MustCompile(`'fortran_order':\s*(True|False)`)
	reShape   = regexp.MustCompile(`'shape':\s*\(([^)]*)\)`)
)

// readNpy reads a .npy file (format 1.0 to 3.0) of a type the server knows.
func readNpy(path string) (*npyArray, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if len(b) < 10 || !bytes.Equal(b[:6], npyMagic) {
		return nil, fmt.Errorf("%s: not a .npy file", path)
	}
	var hlen, off int
	switch b[6] {
	case 1:
		hlen, off = int(binary.LittleEndian.Uint16(b[8:])), 10
	case 2, 3:
		if len(b) < 12 {
			return nil, fmt.Errorf("%s: truncated", path)
		}
		hlen, off = int(binary.LittleEndian.Uint32(b[8:])), 12
	default:
		return nil, fmt.Errorf("%s: .npy version %d", path, b[6])
	}
	if off+hlen > len(b) {
		return nil, fmt.Errorf("%s: truncated header", path)
	}
	header := string(b[off : off+hlen])
	d, f, s := reDescr.FindStringSubmatch(header), reFortran.FindStringSubmatch(header), reShape.FindStringSubmatch(header)
	if d == nil || f == nil || s == nil {
		return nil, fmt.Errorf("%s: unreadable header %q", path, header)
	}
	a := &npyArray{dtype: npyTypes[d[1]]}
	if a.dtype == "" {
		return nil, fmt.Errorf("%s: numpy type %s has no server tensor type", path, d[1])
	}
	if f[1] == "True" {
		return nil, fmt.Errorf("%s: Fortran order: save np.ascontiguousarray(x)", path)
	}
	n := int64(1)
	for _, dim := range strings.Split(s[1], ",") {
		if dim = strings.TrimSpace(dim); dim == "" {
			continue
		}
		v, err := strconv.ParseInt(dim, 10, 64)
		if err != nil || v < 0 {
			return nil, fmt.Errorf("%s: bad shape %q", path, s[1])
		}
		a.shape = append(a.shape, v)
		n *= v
	}
	a.data = b[off+hlen:]
	if size := typeSize(a.dtype); int64(len(a.data)) != n*size {
		return nil, fmt.Errorf("%s: %d data bytes for shape %v of %s", path, len(a.data), a.shape, a.dtype)
	}
	return a, nil
}

func typeSize(t string) int64 {
	switch t {
	case "INT8", "UINT8", "BOOL":
		return 1
	case "INT16", "UINT16":
		return 2
	case "FLOAT", "INT32", "UINT32":
		return 4
	}
	return 8
}

// writeNpy writes a in .npy format 1.0.
func writeNpy(path string, a *npyArray) error {
	descr := ""
	for k, v := range npyTypes {
		if v == a.dtype {
			descr = k
		}
	}
	if descr == "" {
		return errors.New("no numpy type for " + a.dtype)
	}
	dims := make([]string, len(a.shape))
	for i, d := range a.shape {
		dims[i] = strconv.FormatInt(d, 10)
	}
	shape := strings.Join(dims, ", ")
	if len(dims) == 1 {
		shape += ","
	}
	header := fmt.Sprintf("{'descr': '%s', 'fortran_order': False, 'shape': (%s), }", descr, shape)
	// The header is padded with spaces to a multiple of 64 and ends in \n.
	pad := 64 - (10+len(header)+1)%64
	header += strings.Repeat(" ", pad%64) + "\n"
	var b bytes.Buffer
	b.Write(npyMagic)
	b.Write([]byte{1, 0})
	binary.Write(&b, binary.LittleEndian, uint16(len(header)))
	b.WriteString(header)
	b.Write(a.data)
	return os.WriteFile(path, b.Bytes(), 0o644)
}
