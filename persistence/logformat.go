package persistence

import (
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"
	"time"
)

// The constants of the append-only log's file formats (see doc.go). They
// define the layout: never change them; a new layout takes a new version.
const (
	logMagic   = "EAILOG\x00\x00"
	modelMagic = "EAIMODL\x00"
	// logVersion is the version of the base and incr files this build
	// writes. Version 2 added frameUnitMore: a version 1 reader ignores
	// frame flags, so it would bring back the head of a unit cut short,
	// and its torn-tail check (frameFollows) takes only frames of flags
	// 0 for whole ones. Version 1 files, whose frames all have flags 0,
	// are read as they always were.
	logVersion = uint16(2)
	// modelVersion is the version of model files, whose layout version 2
	// left as it was.
	modelVersion  = uint16(1)
	logHeaderSize = 64
	logFrameHdr   = 9

	// frameUnitMore, a frame flag of an incr file of version 2, says that
	// the frame's records and the next frame's are one atomic unit: a
	// reader holds them until a frame without it, and applies none of
	// them if the file ends first (Log.BeginUnit).
	frameUnitMore = 0x02

	// File kinds (header byte 10).
	KindBase  = 1 // a rewrite's base: TENSOR and MODEL records
	KindIncr  = 2 // the records appended after a base
	kindModel = 3 // a sealed model file

	logKeyIDLabel = "EnclaveAI log seal key id v1"
	logKeyLabel   = "EnclaveAI log frame key v1"

	// Most ciphertext bytes in one frame (L): all that its 4-byte length
	// field says. A frame holds whole records, and a tensor may pass 1 GiB
	// (proto-max-bulk-len): builds before this one wrote frames of up to
	// 1 GiB + 16 and read longer ones as torn, so a tensor over 1 GiB was
	// acknowledged, then cut off at the next start. Those files hold
	// frames of at most 1 GiB, all within this limit. A reader bounds
	// what it allocates for a frame by the bytes left in the file, not by
	// this: a torn tail's garbage length passes them.
	maxLogFrame = 1<<32 - 1

	// modelFramePlain is the plaintext size of every model file frame but
	// the last.
	modelFramePlain = 4 << 20

	// Record types of the log that the snapshot does not have. TENSOR
	// (recTensor) is shared with snapshot format version 2.
	recLogModel  = 0x04
	recLogDel    = 0x10
	recLogExpire = 0x11
	recLogRename = 0x12
	recLogFlush  = 0x13
)

// The log's errors; test with errors.Is. ErrWrongKey and
// ErrTooLarge are shared with the snapshot.
var (
	// ErrLogCorrupt means a log, manifest or model file failed verification
	// somewhere other than a torn tail: it was damaged or tampered with.
	ErrLogCorrupt = errors.New("append-only log corrupt or tampered with")
	// ErrLogTruncated means an incr file ends inside a frame, and the
	// files after it hold no frame (a write cut short by a crash); Replay
	// reports where the last whole frame ends.
	ErrLogTruncated = errors.New("append-only log ends in a torn frame")
	// ErrCutWaiting is BeginRewrite's refusal while the cut of an earlier
	// rewrite still waits behind records that could not be written.
	ErrCutWaiting = errors.New("persistence: an earlier rewrite's switch to a new incr file waits for the records before it")
	// ErrLogClosed: the log was closed (at shutdown) before the call.
	ErrLogClosed = errors.New("persistence: the append-only log is closed")
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// logHeader is a log or model file header.
type logHeader struct {
	raw     [logHeaderSize]byte
	kind    byte
	version uint16
	aead    cipher.AEAD
	hash    [32]byte
}

func logKeyID(sealKey []byte) []byte {
	m := hmac.New(sha256.New, sealKey)
	m.Write([]byte(logKeyIDLabel))
	return m.Sum(nil)[:8]
}

func (h *logHeader) init(sealKey []byte) error {
	key, err := hkdf.Key(sha256.New, sealKey, h.raw[28:60], logKeyLabel, 32)
	if err != nil {
		return err
	}
	h.aead, err = newGCM(key)
	h.hash = sha256.Sum256(h.raw[:])
	return err
}

// newLogHeader draws a fresh salt for a new file of the given kind.
func newLogHeader(sealKey []byte, kind byte) (*logHeader, error) {
	if err := checkSealKey(sealKey); err != nil {
		return nil, err
	}
	h := &logHeader{kind: kind, version: logVersion}
	b := h.raw[:]
	if kind == kindModel {
		copy(b, modelMagic)
		h.version = modelVersion
	} else {
		copy(b, logMagic)
	}
	binary.BigEndian.PutUint16(b[8:], h.version)
	b[10] = kind
	binary.BigEndian.PutUint64(b[12:], uint64(time.Now().UnixMilli()))
	copy(b[20:28], logKeyID(sealKey))
	if _, err := rand.Read(b[28:60]); err != nil {
		return nil, err
	}
	binary.BigEndian.PutUint32(b[60:], crc32.Checksum(b[:60], castagnoli))
	return h, h.init(sealKey)
}

// parseLogHeader verifies a header of the given kind.
func parseLogHeader(b []byte, sealKey []byte, kind byte) (*logHeader, error) {
	if err := checkSealKey(sealKey); err != nil {
		return nil, err
	}
	want, newest := logMagic, logVersion
	if kind == kindModel {
		want, newest = modelMagic, modelVersion
	}
	if len(b) < logHeaderSize {
		return nil, fmt.Errorf("%w: %d bytes, the header is %d", ErrLogTruncated, len(b), logHeaderSize)
	}
	h := &logHeader{kind: kind, version: binary.BigEndian.Uint16(b[8:])}
	copy(h.raw[:], b)
	switch {
	case string(b[:8]) != want:
		return nil, fmt.Errorf("%w: bad magic", ErrLogCorrupt)
	case crc32.Checksum(b[:60], castagnoli) != binary.BigEndian.Uint32(b[60:]):
		return nil, fmt.Errorf("%w: header checksum", ErrLogCorrupt)
	case h.version < 1 || h.version > newest:
		return nil, fmt.Errorf("%w: version %d (this build reads 1 to %d)", ErrVersion, h.version, newest)
	case b[10] != kind || b[11] != 0:
		return nil, fmt.Errorf("%w: kind %d flags %d, expected kind %d", ErrLogCorrupt, b[10], b[11], kind)
	case !hmac.Equal(b[20:28], logKeyID(sealKey)):
		return nil, ErrWrongKey
	}
	return h, h.init(sealKey)
}

// sealFrame appends frame index i holding plaintext pt to dst.
func (h *logHeader) sealFrame(dst []byte, index uint64, flags byte, pt []byte) []byte {
	start := len(dst)
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(pt)+tagSize))
	dst = append(dst, flags, 0, 0, 0, 0)
	var nonce [12]byte
	binary.BigEndian.PutUint64(nonce[4:], index)
	dst = h.aead.Seal(dst, nonce[:], pt, h.frameAD(index, flags))
	binary.BigEndian.PutUint32(dst[start+5:], frameCRC(dst[start:]))
	return dst
}

// sealFrameInPlace seals frame index i in buf, whose first logFrameHdr
// bytes are room for the frame's header and the rest its plaintext, and
// returns the frame: the same bytes as sealFrame's, without a second copy
// of the plaintext (AES-GCM encrypts in place). buf grows by the tag, in
// place when it has room.
func (h *logHeader) sealFrameInPlace(buf []byte, index uint64, flags byte) []byte {
	buf = slices.Grow(buf, tagSize)
	pt := buf[logFrameHdr:]
	binary.BigEndian.PutUint32(buf, uint32(len(pt)+tagSize))
	buf[4] = flags
	var nonce [12]byte
	binary.BigEndian.PutUint64(nonce[4:], index)
	ct := h.aead.Seal(pt[:0], nonce[:], pt, h.frameAD(index, flags))
	frame := buf[:logFrameHdr+len(ct)]
	binary.BigEndian.PutUint32(frame[5:], frameCRC(frame))
	return frame
}

// unitFlags reports whether an authentic frame of a base or incr file
// carries flags its file may have, and whether they say that its unit
// goes on in the next frame: only an incr file of version 2 or later has
// frames flagged frameUnitMore, and no file has others.
func (h *logHeader) unitFlags(flags byte) (more, ok bool) {
	switch {
	case flags == 0:
		return false, true
	case flags == frameUnitMore && h.kind == KindIncr && h.version >= 2:
		return true, true
	}
	return false, false
}

// frameCRC is the CRC-32C of a whole frame's bytes 0..4 and ciphertext.
func frameCRC(frame []byte) uint32 {
	return crc32.Update(crc32.Checksum(frame[:5], castagnoli), castagnoli, frame[logFrameHdr:])
}

func (h *logHeader) frameAD(index uint64, flags byte) []byte {
	ad := slices.Clone(h.hash[:])
	ad = binary.BigEndian.AppendUint64(ad, index)
	return append(ad, flags)
}

// frameStatus is what openFrame makes of the bytes at one offset.
type frameStatus int

const (
	frameOK   frameStatus = iota
	frameTorn             // incomplete, or its checksum fails: a write cut short
	frameBad              // whole and checksummed, yet not authentic: tampering
)

// openFrame verifies and decrypts the frame at the start of b (the rest of
// the file, or more): its plaintext, flags and length in the file. The
// frame is decrypted in place: the plaintext is b's, and a frame that
// fails authentication (frameBad) is left overwritten.
func (h *logHeader) openFrame(b []byte, index uint64) (pt []byte, flags byte, n int, st frameStatus) {
	if len(b) < logFrameHdr {
		return nil, 0, 0, frameTorn
	}
	l := int(binary.BigEndian.Uint32(b))
	flags = b[4]
	if l < tagSize || l > maxLogFrame || l > len(b)-logFrameHdr {
		return nil, 0, 0, frameTorn
	}
	n = logFrameHdr + l
	if frameCRC(b[:n]) != binary.BigEndian.Uint32(b[5:]) {
		return nil, 0, 0, frameTorn
	}
	var nonce [12]byte
	binary.BigEndian.PutUint64(nonce[4:], index)
	pt, err := h.aead.Open(b[logFrameHdr:logFrameHdr], nonce[:], b[logFrameHdr:n], h.frameAD(index, flags))
	if err != nil {
		return nil, 0, 0, frameBad
	}
	return pt, flags, n, frameOK
}

// LogModel is a MODEL record of the log: the model's attributes and the
// name and size of its bytes, which live in a sealed model file.
type LogModel struct {
	ModelRecord
	// File names the model file: the model's SHA-256 when Digest is set,
	// else a random id (a large upload is sealed into its file as it
	// arrives, and acknowledged before its SHA-256 is computed).
	File   [32]byte
	Digest bool
	Size   int64
}

// The bits of a MODEL record's flags byte.
const (
	modelOptimize = 1 << 0 // the model's OPTIMIZE
	modelFileID   = 1 << 1 // File is a random id, not the model's SHA-256
)

// LogSink receives the records Replay decodes, in log order.
type LogSink interface {
	Tensor(TensorRecord) error
	Model(LogModel) error
	Delete(key string) error
	Expire(key string, atUnixMs int64) error
	Rename(src, dst string) error
	Flush() error
}

// Op is one record to append to the log: exactly one of its fields set
// (Flush alone means FLUSH). Tensor data and model attributes are read when
// the record is encoded, later than Append: they must not change.
type Op struct {
	Tensor *TensorRecord
	Model  *LogModel
	Del    string
	Expire *ExpireOp
	Rename *[2]string
	Flush  bool
	// Held, if set, keeps Tensor's data from being reused until the log
	// has encoded the record, and is told so then (Done: the keyspace's
	// recycled tensor buffers, modelstore/tensorbuf.go).
	Held interface{ Done() }

	cut  *cutOp // a rewrite's switch to a new incr file (log.go)
	more bool   // more records of this one's atomic unit follow (Log.BeginUnit)
}

// release gives up the op's hold (Held.Done), once.
func (op *Op) release() {
	if op.Held != nil {
		op.Held.Done()
		op.Held = nil
	}
}

// ExpireOp sets (AtUnixMs > 0) or removes (0) a key's expiry.
type ExpireOp struct {
	Key      string
	AtUnixMs int64
}

// frameLimit is the most ciphertext bytes the writer puts in one frame,
// and so what bounds a record (Loggable): maxLogFrame, lowered by tests.
var frameLimit = maxLogFrame

// ErrUnloggable is Loggable's refusal: the log cannot hold the record.
var ErrUnloggable = errors.New("the append-only log cannot hold this value")

// Loggable reports whether the log can hold op's record: appendOp would
// encode it, and it fits one frame. The keyspace asks before it takes a
// value (modelstore.Journal.Check): the log learns of a change only once
// it is made, and a record it could not write would be lost though the
// change was acknowledged, with the records queued after it.
func Loggable(op Op) error {
	var key string
	switch {
	case op.Tensor != nil:
		key = op.Tensor.Key
		if len(op.Tensor.Shape) > MaxRank {
			return fmt.Errorf("%w: a tensor of %d dimensions, the most is %d", ErrUnloggable, len(op.Tensor.Shape), MaxRank)
		}
	case op.Model != nil:
		key = op.Model.Key
		if len(op.Model.Extra) > MaxExtra {
			return fmt.Errorf("%w: a model of %d attributes, the most is %d", ErrUnloggable, len(op.Model.Extra), MaxExtra)
		}
	}
	// Longer keys the snapshot cannot hold either, nor a rewrite's base.
	if len(key) > MaxStringLen {
		return fmt.Errorf("%w: a key of %d bytes, the most is %d", ErrUnloggable, len(key), MaxStringLen)
	}
	if n := opSize(op); n > frameLimit-tagSize {
		return fmt.Errorf("%w: its record would take %d bytes, the most is %d", ErrUnloggable, n, frameLimit-tagSize)
	}
	return nil
}

// opSize is the length of op's record as appendOp encodes it.
func opSize(op Op) int {
	switch {
	case op.Tensor != nil:
		t := op.Tensor
		return 1 + 4 + len(t.Key) + 4 + len(t.Owner) + 8 + 2 + 8*len(t.Shape) + 8 + len(t.Data)
	case op.Model != nil:
		m := op.Model
		n := 1 + 4 + len(m.Key) + 8 + 32 + 8 + 4 + len(m.Backend) + 4 + len(m.Device) + 4 + len(m.Tag) +
			4 + 4 + 8 + 1 + 4 + len(m.ID) + 8 + 4 + len(m.Owner) + 4
		for k, v := range m.Extra {
			n += 4 + len(k) + 4 + len(v)
		}
		return n
	case op.Expire != nil:
		return 1 + 4 + len(op.Expire.Key) + 8
	case op.Rename != nil:
		return 1 + 4 + len(op.Rename[0]) + 4 + len(op.Rename[1])
	case op.Flush:
		return 1
	}
	return 1 + 4 + len(op.Del)
}

// appendOp encodes op's record.
func appendOp(b []byte, op Op) ([]byte, error) {
	str := func(s string) {
		b = binary.BigEndian.AppendUint32(b, uint32(len(s)))
		b = append(b, s...)
	}
	switch {
	case op.Tensor != nil:
		t := op.Tensor
		if len(t.Shape) > MaxRank || len(t.Key) > MaxStringLen {
			return b, fmt.Errorf("persistence: tensor %q cannot be logged", t.Key)
		}
		b = append(b, recTensor)
		str(t.Key)
		str(t.Owner)
		b = binary.BigEndian.AppendUint64(b, uint64(t.ExpireAtUnixMs))
		b = append(b, t.DType, byte(len(t.Shape)))
		for _, d := range t.Shape {
			b = binary.BigEndian.AppendUint64(b, uint64(d))
		}
		b = binary.BigEndian.AppendUint64(b, uint64(len(t.Data)))
		b = append(b, t.Data...)
	case op.Model != nil:
		m := op.Model
		if len(m.Extra) > MaxExtra {
			return b, fmt.Errorf("persistence: model %q has too many attributes", m.Key)
		}
		b = append(b, recLogModel)
		str(m.Key)
		b = binary.BigEndian.AppendUint64(b, uint64(m.ExpireAtUnixMs))
		b = append(b, m.File[:]...)
		b = binary.BigEndian.AppendUint64(b, uint64(m.Size))
		str(m.Backend)
		str(m.Device)
		str(m.Tag)
		b = binary.BigEndian.AppendUint32(b, m.BatchSize)
		b = binary.BigEndian.AppendUint32(b, m.MinBatchSize)
		b = binary.BigEndian.AppendUint64(b, m.MinBatchTimeoutMs)
		var flags byte
		if m.Optimize {
			flags |= modelOptimize
		}
		if !m.Digest {
			flags |= modelFileID
		}
		b = append(b, flags)
		str(m.ID)
		b = binary.BigEndian.AppendUint64(b, uint64(m.CreatedUnixMs))
		str(m.Owner)
		b = binary.BigEndian.AppendUint32(b, uint32(len(m.Extra)))
		names := make([]string, 0, len(m.Extra))
		for k := range m.Extra {
			names = append(names, k)
		}
		slices.Sort(names)
		for _, k := range names {
			str(k)
			str(m.Extra[k])
		}
	case op.Expire != nil:
		b = append(b, recLogExpire)
		str(op.Expire.Key)
		b = binary.BigEndian.AppendUint64(b, uint64(op.Expire.AtUnixMs))
	case op.Rename != nil:
		b = append(b, recLogRename)
		str(op.Rename[0])
		str(op.Rename[1])
	case op.Flush:
		b = append(b, recLogFlush)
	default:
		b = append(b, recLogDel)
		str(op.Del)
	}
	return b, nil
}

// recDecoder decodes the records of one verified frame.
type recDecoder struct {
	b   []byte
	err error
}

func (d *recDecoder) take(n int) []byte {
	if d.err != nil || n > len(d.b) || n < 0 {
		if d.err == nil {
			d.err = fmt.Errorf("%w: record runs past the end of its frame", ErrLogCorrupt)
		}
		return make([]byte, max(n, 0))
	}
	p := d.b[:n]
	d.b = d.b[n:]
	return p
}

func (d *recDecoder) u8() byte    { return d.take(1)[0] }
func (d *recDecoder) u32() uint32 { return binary.BigEndian.Uint32(d.take(4)) }
func (d *recDecoder) u64() uint64 { return binary.BigEndian.Uint64(d.take(8)) }
func (d *recDecoder) str() string {
	n := d.u32()
	if d.err != nil || uint64(n) > uint64(len(d.b)) {
		d.take(len(d.b) + 1)
		return ""
	}
	return string(d.take(int(n)))
}

// decodeFrame hands every record of a frame's plaintext to sink. A base
// holds only TENSOR and MODEL records. Nothing is checked against today's
// limits (max-model-size and the like): what this server acknowledged
// under the limits of its day is read back whatever they are now (a
// tensor over a lowered max-model-size stopped the start). A tensor's
// bytes lie in the frame, and a model's are read from its file, whose size
// bounds them (ReadModelInto).
func decodeFrame(pt []byte, kind byte, sink LogSink) error {
	d := &recDecoder{b: pt}
	for len(d.b) > 0 {
		typ := d.u8()
		if kind == KindBase && typ != recTensor && typ != recLogModel {
			return fmt.Errorf("%w: record type %#02x in a base file", ErrLogCorrupt, typ)
		}
		var err error
		switch typ {
		case recTensor:
			var t TensorRecord
			t.Key, t.Owner = d.str(), d.str()
			t.ExpireAtUnixMs = int64(d.u64())
			t.DType = d.u8()
			t.Shape = make([]int64, d.u8())
			for i := range t.Shape {
				if t.Shape[i] = int64(d.u64()); t.Shape[i] < 0 {
					return fmt.Errorf("%w: tensor %q has a negative dimension", ErrLogCorrupt, t.Key)
				}
			}
			n := d.u64()
			if n > uint64(len(d.b)) {
				n = uint64(len(d.b)) + 1
			}
			t.Data = slices.Clone(d.take(int(n)))
			if d.err == nil {
				err = sink.Tensor(t)
			}
		case recLogModel:
			var m LogModel
			m.Key = d.str()
			m.ExpireAtUnixMs = int64(d.u64())
			copy(m.File[:], d.take(32))
			m.Size = int64(d.u64())
			m.Backend, m.Device, m.Tag = d.str(), d.str(), d.str()
			m.BatchSize, m.MinBatchSize = d.u32(), d.u32()
			m.MinBatchTimeoutMs = d.u64()
			flags := d.u8()
			m.Optimize = flags&modelOptimize != 0
			m.Digest = flags&modelFileID == 0
			m.ID = d.str()
			m.CreatedUnixMs = int64(d.u64())
			m.Owner = d.str()
			n := d.u32()
			if d.err == nil && (flags&^(modelOptimize|modelFileID) != 0 || n > MaxExtra || m.Size < 0) {
				return fmt.Errorf("%w: model %q: bad attributes", ErrLogCorrupt, m.Key)
			}
			for i := uint32(0); i < n && d.err == nil; i++ {
				if m.Extra == nil {
					m.Extra = map[string]string{}
				}
				k := d.str()
				m.Extra[k] = d.str()
			}
			if d.err == nil {
				err = sink.Model(m)
			}
		case recLogDel:
			k := d.str()
			if d.err == nil {
				err = sink.Delete(k)
			}
		case recLogExpire:
			k := d.str()
			at := int64(d.u64())
			if d.err == nil {
				err = sink.Expire(k, at)
			}
		case recLogRename:
			src, dst := d.str(), d.str()
			if d.err == nil {
				err = sink.Rename(src, dst)
			}
		case recLogFlush:
			err = sink.Flush()
		default:
			return fmt.Errorf("%w: unknown record type %#02x", ErrLogCorrupt, typ)
		}
		if d.err != nil {
			return d.err
		}
		if err != nil {
			return sinkError{err}
		}
	}
	return nil
}
