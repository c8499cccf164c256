package persistence

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"
)

// The constants of the format (see the package doc). They define the file
// layout: never change them; a new layout takes a new format version.
// Version 2 added the TENSOR record's owner; this build writes version 2
// and reads versions 1 and 2.
const (
	magic         = "EAISNAP\x00"
	formatVersion = uint16(2)
	oldestVersion = uint16(1)
	headerSize    = 128

	kdfHKDFSHA256 = 1
	wrapAESGCM    = 1
	cipherAESGCM  = 1
	compressZstd  = 1

	minFrameSize = 4 << 10
	maxFrameSize = 64 << 20
	frameHdrSize = 5
	tagSize      = 16
	lastFrame    = 1

	keyIDLabel = "EnclaveAI snapshot seal key id v1"
	wrapLabel  = "EnclaveAI snapshot key wrap v1"

	// Header field offsets.
	offVersion  = 8
	offFlags    = 10
	offCreated  = 12
	offKDF      = 20
	offWrap     = 21
	offCipher   = 22
	offCompress = 23
	offFrame    = 24
	offKeyID    = 28
	offSalt     = 36
	offNonce    = 68
	offWrapped  = 80

	maxWindow = 8 << 20 // largest zstd window a reader accepts
)

// Limits on the fields of a record, enforced by Write and by Read. They are
// part of format version 1: never lower them. MaxStringLen is Redis's
// largest bulk string, so that any key the server accepts can be saved.
const (
	MaxStringLen = 512 << 20 // longest key, name or other string field, in bytes
	MaxRank      = 255       // most dimensions of a tensor (the rank is one byte)
	MaxExtra     = 1024      // most entries in a model's Extra map
)

// frameSize is the plaintext size of every frame Write produces but the last:
// large enough to amortise the per-frame cost, small enough that a few of
// them in memory do not matter. A reader takes the size from the header, so
// it may change between releases.
const frameSize = 4 << 20

// KeySize is the length in bytes of a seal key.
const KeySize = 32

// The errors Read and LoadFile return wrap one of these; test with errors.Is.
var (
	// ErrNotSnapshot means the file does not start with the snapshot magic.
	ErrNotSnapshot = errors.New("not an EnclaveAI snapshot")
	// ErrVersion means the file's format version is not one this build reads.
	ErrVersion = errors.New("unsupported snapshot format version")
	// ErrWrongKey means the file was sealed with a different seal key.
	ErrWrongKey = errors.New("snapshot sealed with a different key")
	// ErrCorrupt means a header field, frame, record or checksum failed
	// verification: the file was damaged or tampered with.
	ErrCorrupt = errors.New("snapshot corrupt or tampered with")
	// ErrTruncated means the file ends before its last frame.
	ErrTruncated = errors.New("snapshot truncated")
	// ErrTooLarge means a tensor or model blob in the file is larger than
	// the limit the caller passed to Read.
	ErrTooLarge = errors.New("snapshot value larger than the limit")
	// ErrSealKey means the seal key passed in is unusable: it must be
	// KeySize bytes and not all zero.
	ErrSealKey = errors.New("seal key must be 32 bytes and not all zero")
)

// checkSealKey refuses keys of the wrong length and the all-zero key that
// EGo hands out silently outside an enclave.
func checkSealKey(key []byte) error {
	if len(key) != KeySize {
		return ErrSealKey
	}
	var zero [KeySize]byte
	if subtle.ConstantTimeCompare(key, zero[:]) == 1 {
		return ErrSealKey
	}
	return nil
}

// sealKeyID is the seal key id stored at offKeyID.
func sealKeyID(sealKey []byte) []byte {
	m := hmac.New(sha256.New, sealKey)
	m.Write([]byte(keyIDLabel))
	return m.Sum(nil)[:8]
}

// wrapCipher derives the key-encryption key from the seal key and the salt.
func wrapCipher(sealKey, salt []byte) (cipher.AEAD, error) {
	kek, err := hkdf.Key(sha256.New, sealKey, salt, wrapLabel, 32)
	if err != nil {
		return nil, err
	}
	return newGCM(kek)
}

func newGCM(key []byte) (cipher.AEAD, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// header is a decoded, verified snapshot header.
type header struct {
	raw       [headerSize]byte
	version   uint16
	frameSize int
	dataKey   []byte
}

// hash is H of the package doc.
func (h *header) hash() [32]byte { return sha256.Sum256(h.raw[:]) }

// newHeader draws a fresh data key and builds the header that wraps it.
func newHeader(sealKey []byte, created time.Time, frameSize int) (*header, error) {
	h := &header{frameSize: frameSize, dataKey: make([]byte, 32)}
	b := h.raw[:]
	copy(b, magic)
	binary.BigEndian.PutUint16(b[offVersion:], formatVersion)
	binary.BigEndian.PutUint16(b[offFlags:], 0)
	binary.BigEndian.PutUint64(b[offCreated:], uint64(created.UnixMilli()))
	b[offKDF], b[offWrap], b[offCipher], b[offCompress] = kdfHKDFSHA256, wrapAESGCM, cipherAESGCM, compressZstd
	binary.BigEndian.PutUint32(b[offFrame:], uint32(frameSize))
	copy(b[offKeyID:], sealKeyID(sealKey))
	for _, f := range [][]byte{b[offSalt:offNonce], b[offNonce:offWrapped], h.dataKey} {
		if _, err := rand.Read(f); err != nil {
			return nil, err
		}
	}
	aead, err := wrapCipher(sealKey, b[offSalt:offNonce])
	if err != nil {
		return nil, err
	}
	aead.Seal(b[offWrapped:offWrapped], b[offNonce:offWrapped], h.dataKey, b[:offWrapped])
	return h, nil
}

// readHeader reads and verifies the header and unwraps the data key.
func readHeader(r io.Reader, sealKey []byte) (*header, error) {
	h := &header{}
	b := h.raw[:]
	// Magic and version first, so that a short foreign file is reported
	// as foreign rather than as truncated.
	n, err := io.ReadFull(r, b[:offFlags])
	if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
		return nil, err
	}
	if string(b[:min(n, len(magic))]) != magic[:min(n, len(magic))] {
		return nil, ErrNotSnapshot
	}
	if n < offFlags {
		return nil, fmt.Errorf("%w: %d bytes, header is %d", ErrTruncated, n, headerSize)
	}
	h.version = binary.BigEndian.Uint16(b[offVersion:])
	if h.version < oldestVersion || h.version > formatVersion {
		return nil, fmt.Errorf("%w: %d (this build reads %d to %d)", ErrVersion, h.version, oldestVersion, formatVersion)
	}
	if n, err := io.ReadFull(r, b[offFlags:]); err != nil {
		if err == io.ErrUnexpectedEOF || err == io.EOF {
			return nil, fmt.Errorf("%w: %d bytes, header is %d", ErrTruncated, offFlags+n, headerSize)
		}
		return nil, err
	}
	if f := binary.BigEndian.Uint16(b[offFlags:]); f != 0 {
		return nil, fmt.Errorf("%w: header flags %#04x", ErrCorrupt, f)
	}
	if b[offKDF] != kdfHKDFSHA256 || b[offWrap] != wrapAESGCM || b[offCipher] != cipherAESGCM || b[offCompress] != compressZstd {
		return nil, fmt.Errorf("%w: unknown algorithm ids %d/%d/%d/%d", ErrCorrupt, b[offKDF], b[offWrap], b[offCipher], b[offCompress])
	}
	fs := binary.BigEndian.Uint32(b[offFrame:])
	if fs < minFrameSize || fs > maxFrameSize {
		return nil, fmt.Errorf("%w: frame size %d", ErrCorrupt, fs)
	}
	if !hmac.Equal(b[offKeyID:offSalt], sealKeyID(sealKey)) {
		return nil, ErrWrongKey
	}
	aead, err := wrapCipher(sealKey, b[offSalt:offNonce])
	if err != nil {
		return nil, err
	}
	dataKey, err := aead.Open(nil, b[offNonce:offWrapped], b[offWrapped:], b[:offWrapped])
	if err != nil {
		return nil, fmt.Errorf("%w: header authentication failed", ErrCorrupt)
	}
	h.dataKey = dataKey
	h.frameSize = int(fs)
	return h, nil
}
