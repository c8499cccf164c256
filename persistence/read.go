package persistence

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"io"
	"slices"

	"github.com/klauspost/compress/zstd"
)

// Read verifies the snapshot in r and hands its records to sink. No tensor
// data or model blob may be larger than maxBlob bytes: their sizes are
// checked before anything is allocated, and each blob is allocated once at
// its recorded size. Strings are bounded by MaxStringLen and allocated as
// their bytes arrive.
//
// Read returns nil only when the whole file has been verified, up to and
// including the checksum and the absence of trailing data. Otherwise the
// error wraps ErrNotSnapshot, ErrVersion, ErrWrongKey, ErrCorrupt,
// ErrTruncated or ErrTooLarge, or is an I/O error from r or the error of a
// Sink callback.
func Read(r io.Reader, sealKey []byte, maxBlob int64, sink Sink) error {
	return read(r, sealKey, maxBlob, sink, -1)
}

func read(r io.Reader, sealKey []byte, maxBlob int64, sink Sink, total int64) error {
	if err := checkSealKey(sealKey); err != nil {
		return err
	}
	if maxBlob <= 0 {
		return fmt.Errorf("persistence: maxBlob must be positive, not %d", maxBlob)
	}
	h, err := readHeader(r, sealKey)
	if err != nil {
		return err
	}
	var progress func(done, total int64)
	if p, ok := sink.(ProgressSink); ok {
		progress = p.Progress
	}
	fr, err := newFrameReader(r, h, total, progress)
	if err != nil {
		return err
	}
	zr, err := zstd.NewReader(fr, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true),
		zstd.WithDecoderMaxWindow(maxWindow))
	if err != nil {
		return err
	}
	defer zr.Close()
	if err := decodeRecords(zr, h.version, maxBlob, sink); err != nil {
		var se sinkError
		switch {
		case errors.As(err, &se):
			return se.err
		case fr.err != nil:
			// The root cause: a frame that failed verification, a
			// short file or an I/O error, whatever zstd made of it.
			return fr.err
		case errors.Is(err, ErrCorrupt), errors.Is(err, ErrTooLarge):
			return err
		}
		return fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	return fr.finish()
}

// sinkError carries a Sink's error through the decoder unchanged.
type sinkError struct{ err error }

func (e sinkError) Error() string { return e.err.Error() }

// decoder reads records. Its first error sticks: later reads return zero
// values and allocate nothing, so a record is decoded straight through and
// checked once at its end.
type decoder struct {
	r       *bufio.Reader
	version uint16 // the file's format version
	sum     hash.Hash
	maxBlob int64
	alloc   BlobAllocator // nil: blobs are Go allocations
	blobs   [][]byte
	sums    [][32]byte // the verified SHA-256 of each blob
	count   uint64
	tmp     [32]byte
	err     error
}

// decodeRecords decodes the record stream of a file of the given format
// version from r into sink, up to and including the END record and the end
// of the stream.
func decodeRecords(r io.Reader, version uint16, maxBlob int64, sink Sink) error {
	d := &decoder{r: bufio.NewReaderSize(r, 64<<10), sum: sha256.New(), maxBlob: maxBlob, version: version}
	d.alloc, _ = sink.(BlobAllocator)
	for {
		typ, err := d.r.ReadByte()
		if err != nil {
			return d.eof(err)
		}
		if typ == recEnd {
			return d.end()
		}
		d.sum.Write([]byte{typ})
		switch typ {
		case recTensor:
			err = d.tensor(sink)
		case recBlob:
			err = d.blob()
		case recModel:
			err = d.model(sink)
		default:
			err = d.corrupt("unknown record type %#02x", typ)
		}
		if err != nil {
			return err
		}
		d.count++
	}
}

func (d *decoder) corrupt(format string, args ...any) error {
	return fmt.Errorf("%w: record %d: %s", ErrCorrupt, d.count, fmt.Sprintf(format, args...))
}

// eof turns an end of stream inside a record into ErrCorrupt: every frame
// was authentic, so the writer itself stopped short.
func (d *decoder) eof(err error) error {
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return d.corrupt("stream ends before the END record")
	}
	return err
}

// full fills p and feeds it to the checksum.
func (d *decoder) full(p []byte) {
	if d.err != nil {
		clear(p)
		return
	}
	if _, err := io.ReadFull(d.r, p); err != nil {
		d.err = d.eof(err)
		clear(p)
		return
	}
	d.sum.Write(p)
}

func (d *decoder) u8() byte {
	d.full(d.tmp[:1])
	return d.tmp[0]
}

func (d *decoder) u32() uint32 {
	d.full(d.tmp[:4])
	return binary.BigEndian.Uint32(d.tmp[:4])
}

func (d *decoder) u64() uint64 {
	d.full(d.tmp[:8])
	return binary.BigEndian.Uint64(d.tmp[:8])
}

func (d *decoder) str(what string) string {
	n := d.u32()
	if d.err != nil {
		return ""
	}
	if n > MaxStringLen {
		d.err = d.corrupt("%s is %d bytes, the limit is %d", what, n, MaxStringLen)
		return ""
	}
	// Read a chunk at a time, so that memory follows the bytes actually
	// present rather than the length claimed.
	var b []byte
	for rest := int(n); rest > 0 && d.err == nil; {
		c := min(rest, 64<<10)
		b = slices.Grow(b, c)
		d.full(b[len(b) : len(b)+c])
		b = b[:len(b)+c]
		rest -= c
	}
	return string(b)
}

// size reads a data length and checks it against maxBlob.
func (d *decoder) size(what string) int64 {
	n := d.u64()
	if d.err == nil && n > uint64(d.maxBlob) {
		d.err = fmt.Errorf("%w: record %d: %s is %d bytes, the limit is %d", ErrTooLarge, d.count, what, n, d.maxBlob)
	}
	return int64(n)
}

func (d *decoder) tensor(sink Sink) error {
	var t TensorRecord
	t.Key = d.str("tensor key")
	if d.version >= 2 {
		t.Owner = d.str("tensor owner")
	}
	t.ExpireAtUnixMs = int64(d.u64())
	t.DType = d.u8()
	rank := d.u8() // at most MaxRank by construction
	if d.err == nil {
		t.Shape = make([]int64, rank)
	}
	for i := range t.Shape {
		if t.Shape[i] = int64(d.u64()); t.Shape[i] < 0 {
			return d.corrupt("tensor %q has a negative dimension", t.Key)
		}
	}
	n := d.size("tensor data")
	if d.err != nil {
		return d.err
	}
	t.Data = make([]byte, n)
	d.full(t.Data)
	if d.err != nil {
		return d.err
	}
	if err := sink.Tensor(t); err != nil {
		return sinkError{err}
	}
	return nil
}

// BlobAllocator is implemented by a Sink that gives the memory each model
// blob is read into (a model buffer the engine can share, so that a model
// is held once): AllocBlob returns exactly n bytes, which the blob fills
// before the records that use it reach the sink.
type BlobAllocator interface {
	AllocBlob(n int64) ([]byte, error)
}

func (d *decoder) blob() error {
	id := d.u32()
	var sum [32]byte
	d.full(sum[:])
	n := d.size("model blob")
	if d.err != nil {
		return d.err
	}
	if int(id) != len(d.blobs)+1 {
		return d.corrupt("blob id %d, expected %d", id, len(d.blobs)+1)
	}
	// Hash each chunk on another core while the next one is decrypted and
	// decompressed, rather than in a second pass over a blob that may no
	// longer be in cache.
	var blob []byte
	if d.alloc != nil {
		var err error
		if blob, err = d.alloc.AllocBlob(n); err != nil {
			return sinkError{err}
		}
	} else {
		blob = make([]byte, n)
	}
	chunks := make(chan []byte, 4)
	hashed := make(chan []byte)
	go func() {
		h := sha256.New()
		for c := range chunks {
			h.Write(c)
		}
		hashed <- h.Sum(nil)
	}()
	var err error
	for off := 0; off < len(blob) && err == nil; {
		chunk := blob[off:min(off+1<<20, len(blob))]
		_, err = io.ReadFull(d.r, chunk)
		chunks <- chunk
		off += len(chunk)
	}
	close(chunks)
	got := <-hashed
	if err != nil {
		return d.eof(err)
	}
	if !bytes.Equal(got, sum[:]) {
		return d.corrupt("blob %d does not match its SHA-256", id)
	}
	d.blobs = append(d.blobs, blob)
	d.sums = append(d.sums, sum)
	return nil
}

func (d *decoder) model(sink Sink) error {
	var m ModelRecord
	m.Key = d.str("model key")
	m.ExpireAtUnixMs = int64(d.u64())
	id := d.u32()
	m.Backend = d.str("backend")
	m.Device = d.str("device")
	m.Tag = d.str("tag")
	m.BatchSize = d.u32()
	m.MinBatchSize = d.u32()
	m.MinBatchTimeoutMs = d.u64()
	opt := d.u8()
	m.ID = d.str("model id")
	m.CreatedUnixMs = int64(d.u64())
	m.Owner = d.str("owner")
	n := d.u32()
	if d.err != nil {
		return d.err
	}
	if opt > 1 {
		return d.corrupt("model %q: optimize flag %d", m.Key, opt)
	}
	m.Optimize = opt == 1
	if id == 0 || int(id) > len(d.blobs) {
		return d.corrupt("model %q refers to blob %d, which is not defined", m.Key, id)
	}
	if n > MaxExtra {
		return d.corrupt("model %q has %d extra attributes, the limit is %d", m.Key, n, MaxExtra)
	}
	prev := ""
	for i := range n {
		k, v := d.str("extra attribute name"), d.str("extra attribute value")
		if d.err != nil {
			return d.err
		}
		if i > 0 && k <= prev {
			return d.corrupt("model %q: extra attributes out of order", m.Key)
		}
		if m.Extra == nil {
			m.Extra = make(map[string]string, n)
		}
		m.Extra[k] = v
		prev = k
	}
	m.BlobSHA256 = &d.sums[id-1]
	if err := sink.Model(m, d.blobs[id-1]); err != nil {
		return sinkError{err}
	}
	return nil
}

// end checks the END record and that nothing follows it.
func (d *decoder) end() error {
	want := d.sum.Sum(nil)
	var rec [40]byte
	if _, err := io.ReadFull(d.r, rec[:]); err != nil {
		return d.eof(err)
	}
	if n := binary.BigEndian.Uint64(rec[:8]); n != d.count {
		return d.corrupt("END record counts %d records", n)
	}
	if !bytes.Equal(rec[8:], want) {
		return d.corrupt("checksum mismatch")
	}
	switch _, err := d.r.ReadByte(); err {
	case nil:
		return d.corrupt("data after the END record")
	case io.EOF:
		return nil
	default:
		return err
	}
}
