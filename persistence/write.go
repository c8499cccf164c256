package persistence

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"hash"
	"io"
	"slices"
	"time"

	"github.com/klauspost/compress/zstd"
)

// Write seals the records of src into a snapshot written to w. The tensor
// data and model blobs stream through the compressor and the cipher a frame
// at a time: beside the caller's data, Write holds a few frames' worth of
// buffers whatever the size of the snapshot. On error w holds a partial
// snapshot that Read refuses.
func Write(w io.Writer, sealKey []byte, src Source) error {
	return write(w, sealKey, src, frameSize)
}

func write(w io.Writer, sealKey []byte, src Source, frameSize int) error {
	if err := checkSealKey(sealKey); err != nil {
		return err
	}
	h, err := newHeader(sealKey, time.Now(), frameSize)
	if err != nil {
		return err
	}
	if _, err := w.Write(h.raw[:]); err != nil {
		return err
	}
	fw, err := newFrameWriter(w, h)
	if err != nil {
		return err
	}
	// One encoder goroutine beside the caller's: compression of one block
	// overlaps hashing and encryption of the previous one.
	enc, err := zstd.NewWriter(fw, zstd.WithEncoderLevel(zstd.SpeedFastest),
		zstd.WithWindowSize(4<<20), zstd.WithEncoderConcurrency(2))
	if err != nil {
		return err
	}
	e := newEncoder(enc)
	err = src.Tensors(e.tensor)
	if err == nil {
		err = src.Models(e.model)
	}
	if err == nil {
		err = e.end()
	}
	if cerr := enc.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return fw.Close()
}

// blobRef identifies a blob by its backing array, so that models sharing
// one slice are not hashed again.
type blobRef struct {
	p *byte
	n int
}

// encoder writes records. Fixed-size fields are gathered in buf and written
// with one call; tensor data and blobs go to the compressor from the
// caller's slice.
type encoder struct {
	w      io.Writer
	sum    hash.Hash
	buf    []byte
	count  uint64
	byData map[blobRef]uint32
	byHash map[[32]byte]uint32
	blobs  uint32
}

func newEncoder(w io.Writer) *encoder {
	return &encoder{w: w, sum: sha256.New(), byData: map[blobRef]uint32{}, byHash: map[[32]byte]uint32{}}
}

// flush writes buf and then data; hashed says whether data is fed to the
// checksum (everything but blob contents is).
func (e *encoder) flush(data []byte, hashed bool) error {
	e.sum.Write(e.buf)
	if _, err := e.w.Write(e.buf); err != nil {
		return err
	}
	e.buf = e.buf[:0]
	if hashed {
		e.sum.Write(data)
	}
	if len(data) > 0 {
		if _, err := e.w.Write(data); err != nil {
			return err
		}
	}
	e.count++
	return nil
}

func (e *encoder) str(what, s string) error {
	if len(s) > MaxStringLen {
		return fmt.Errorf("persistence: %s is %d bytes, the limit is %d", what, len(s), MaxStringLen)
	}
	e.buf = binary.BigEndian.AppendUint32(e.buf, uint32(len(s)))
	e.buf = append(e.buf, s...)
	return nil
}

func (e *encoder) tensor(t TensorRecord) error {
	if len(t.Shape) > MaxRank {
		return fmt.Errorf("persistence: tensor %q has %d dimensions, the limit is %d", t.Key, len(t.Shape), MaxRank)
	}
	e.buf = append(e.buf[:0], recTensor)
	if err := e.str("tensor key", t.Key); err != nil {
		return err
	}
	if err := e.str("tensor owner", t.Owner); err != nil {
		return err
	}
	e.buf = binary.BigEndian.AppendUint64(e.buf, uint64(t.ExpireAtUnixMs))
	e.buf = append(e.buf, t.DType, byte(len(t.Shape)))
	for _, d := range t.Shape {
		if d < 0 {
			return fmt.Errorf("persistence: tensor %q has a negative dimension", t.Key)
		}
		e.buf = binary.BigEndian.AppendUint64(e.buf, uint64(d))
	}
	e.buf = binary.BigEndian.AppendUint64(e.buf, uint64(len(t.Data)))
	return e.flush(t.Data, true)
}

func (e *encoder) model(m ModelRecord, blob []byte) error {
	id, err := e.blob(blob, m.BlobSHA256)
	if err != nil {
		return err
	}
	if len(m.Extra) > MaxExtra {
		return fmt.Errorf("persistence: model %q has %d extra attributes, the limit is %d", m.Key, len(m.Extra), MaxExtra)
	}
	e.buf = append(e.buf[:0], recModel)
	if err := e.str("model key", m.Key); err != nil {
		return err
	}
	e.buf = binary.BigEndian.AppendUint64(e.buf, uint64(m.ExpireAtUnixMs))
	e.buf = binary.BigEndian.AppendUint32(e.buf, id)
	for _, f := range []struct{ what, s string }{{"backend", m.Backend}, {"device", m.Device}, {"tag", m.Tag}} {
		if err := e.str(f.what, f.s); err != nil {
			return err
		}
	}
	e.buf = binary.BigEndian.AppendUint32(e.buf, m.BatchSize)
	e.buf = binary.BigEndian.AppendUint32(e.buf, m.MinBatchSize)
	e.buf = binary.BigEndian.AppendUint64(e.buf, m.MinBatchTimeoutMs)
	e.buf = append(e.buf, boolByte(m.Optimize))
	if err := e.str("model id", m.ID); err != nil {
		return err
	}
	e.buf = binary.BigEndian.AppendUint64(e.buf, uint64(m.CreatedUnixMs))
	if err := e.str("owner", m.Owner); err != nil {
		return err
	}
	e.buf = binary.BigEndian.AppendUint32(e.buf, uint32(len(m.Extra)))
	names := make([]string, 0, len(m.Extra))
	for k := range m.Extra {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		if err := e.str("extra attribute name", k); err != nil {
			return err
		}
		if err := e.str("extra attribute value", m.Extra[k]); err != nil {
			return err
		}
	}
	return e.flush(nil, true)
}

// blob returns the id of blob's content, writing a BLOB record the first
// time the content is seen. known is blob's SHA-256 if the caller has it.
func (e *encoder) blob(blob []byte, known *[32]byte) (uint32, error) {
	var ref blobRef
	if len(blob) > 0 {
		ref = blobRef{&blob[0], len(blob)}
		if id, ok := e.byData[ref]; ok {
			return id, nil
		}
	}
	var sum [32]byte
	if known != nil {
		sum = *known
	} else {
		sum = sha256.Sum256(blob)
	}
	id, ok := e.byHash[sum]
	if !ok {
		e.blobs++
		id = e.blobs
		e.byHash[sum] = id
		e.buf = append(e.buf[:0], recBlob)
		e.buf = binary.BigEndian.AppendUint32(e.buf, id)
		e.buf = append(e.buf, sum[:]...)
		e.buf = binary.BigEndian.AppendUint64(e.buf, uint64(len(blob)))
		if err := e.flush(blob, false); err != nil {
			return 0, err
		}
	}
	if ref.p != nil {
		e.byData[ref] = id
	}
	return id, nil
}

func (e *encoder) end() error {
	sum := e.sum.Sum(nil)
	e.buf = append(e.buf[:0], recEnd)
	e.buf = binary.BigEndian.AppendUint64(e.buf, e.count)
	e.buf = append(e.buf, sum...)
	_, err := e.w.Write(e.buf)
	return err
}

func boolByte(b bool) byte {
	if b {
		return 1
	}
	return 0
}
