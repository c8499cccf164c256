package persistence

import (
	"crypto/cipher"
	"encoding/binary"
	"fmt"
	"io"
)

// frameAD builds AD_i of the package doc into ad.
func frameAD(ad []byte, h [32]byte, index uint64, flags byte) []byte {
	ad = append(ad[:0], h[:]...)
	ad = binary.BigEndian.AppendUint64(ad, index)
	return append(ad, flags)
}

// frameNonce builds nonce_i of the package doc into nonce.
func frameNonce(nonce []byte, index uint64) []byte {
	clear(nonce[:4])
	binary.BigEndian.PutUint64(nonce[4:], index)
	return nonce
}

// frameWriter cuts the compressed stream into frames and encrypts each in
// place in its one buffer. A full frame is written only once more data
// arrives, so that Close can flag the final frame as the last one.
type frameWriter struct {
	w     io.Writer
	aead  cipher.AEAD
	hash  [32]byte
	buf   []byte // frame header, then room for frameSize plaintext bytes and the tag
	n     int    // plaintext bytes buffered
	size  int
	index uint64
	ad    []byte
	nonce []byte
}

func newFrameWriter(w io.Writer, h *header) (*frameWriter, error) {
	aead, err := newGCM(h.dataKey)
	if err != nil {
		return nil, err
	}
	return &frameWriter{
		w: w, aead: aead, hash: h.hash(), size: h.frameSize,
		buf:   make([]byte, frameHdrSize+h.frameSize+tagSize),
		ad:    make([]byte, 0, 41),
		nonce: make([]byte, aead.NonceSize()),
	}, nil
}

func (f *frameWriter) Write(p []byte) (int, error) {
	written := 0
	for len(p) > 0 {
		if f.n == f.size {
			if err := f.flush(0); err != nil {
				return written, err
			}
		}
		c := copy(f.buf[frameHdrSize+f.n:frameHdrSize+f.size], p)
		f.n += c
		written += c
		p = p[c:]
	}
	return written, nil
}

// Close writes the buffered plaintext as the last frame.
func (f *frameWriter) Close() error { return f.flush(lastFrame) }

func (f *frameWriter) flush(flags byte) error {
	pt := f.buf[frameHdrSize : frameHdrSize+f.n]
	ct := f.aead.Seal(pt[:0], frameNonce(f.nonce, f.index), pt, frameAD(f.ad, f.hash, f.index, flags))
	binary.BigEndian.PutUint32(f.buf, uint32(len(ct)))
	f.buf[4] = flags
	if _, err := f.w.Write(f.buf[:frameHdrSize+len(ct)]); err != nil {
		return err
	}
	f.index++
	f.n = 0
	return nil
}

// frameReader verifies and decrypts one frame at a time and serves its
// plaintext; no byte of a frame is handed on before its tag checks out. Its
// first error sticks in err, so that the reader can report the root cause
// even when the decompressor above it turns the error into one of its own.
type frameReader struct {
	r        io.Reader
	aead     cipher.AEAD
	hash     [32]byte
	size     int
	buf      []byte
	pt       []byte // unread plaintext of the current frame
	index    uint64
	last     bool // the last frame has been read
	err      error
	ad       []byte
	nonce    []byte
	done     int64 // file bytes consumed, header included
	total    int64
	progress func(done, total int64)
}

func newFrameReader(r io.Reader, h *header, total int64, progress func(done, total int64)) (*frameReader, error) {
	aead, err := newGCM(h.dataKey)
	if err != nil {
		return nil, err
	}
	return &frameReader{
		r: r, aead: aead, hash: h.hash(), size: h.frameSize,
		buf:   make([]byte, frameHdrSize+h.frameSize+tagSize),
		ad:    make([]byte, 0, 41),
		nonce: make([]byte, aead.NonceSize()),
		done:  headerSize, total: total, progress: progress,
	}, nil
}

func (f *frameReader) Read(p []byte) (int, error) {
	for len(f.pt) == 0 {
		if f.err != nil {
			return 0, f.err
		}
		if f.last {
			return 0, io.EOF
		}
		f.err = f.next()
	}
	n := copy(p, f.pt)
	f.pt = f.pt[n:]
	return n, nil
}

// next reads, verifies and decrypts frame f.index.
func (f *frameReader) next() error {
	hdr := f.buf[:frameHdrSize]
	if _, err := io.ReadFull(f.r, hdr); err != nil {
		return f.readErr(err)
	}
	l := int(binary.BigEndian.Uint32(hdr))
	flags := hdr[4]
	switch {
	case flags != 0 && flags != lastFrame:
		return fmt.Errorf("%w: frame %d: flags %#02x", ErrCorrupt, f.index, flags)
	case flags == 0 && l != f.size+tagSize, l < tagSize || l > f.size+tagSize:
		return fmt.Errorf("%w: frame %d: length %d", ErrCorrupt, f.index, l)
	}
	ct := f.buf[frameHdrSize : frameHdrSize+l]
	if _, err := io.ReadFull(f.r, ct); err != nil {
		return f.readErr(err)
	}
	pt, err := f.aead.Open(ct[:0], frameNonce(f.nonce, f.index), ct, frameAD(f.ad, f.hash, f.index, flags))
	if err != nil {
		return fmt.Errorf("%w: frame %d failed authentication", ErrCorrupt, f.index)
	}
	f.pt = pt
	f.last = flags == lastFrame
	f.index++
	f.done += int64(frameHdrSize + l)
	if f.progress != nil {
		f.progress(f.done, f.total)
	}
	return nil
}

func (f *frameReader) readErr(err error) error {
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return fmt.Errorf("%w: file ends in or before frame %d", ErrTruncated, f.index)
	}
	return err
}

// finish checks that the stream above has consumed everything: the last
// frame has been read in full and the file ends right after it.
func (f *frameReader) finish() error {
	if f.err != nil {
		return f.err
	}
	if !f.last || len(f.pt) > 0 {
		return fmt.Errorf("%w: data after the end of the compressed stream", ErrCorrupt)
	}
	var b [1]byte
	switch _, err := io.ReadFull(f.r, b[:]); err {
	case nil:
		return fmt.Errorf("%w: data after the last frame", ErrCorrupt)
	case io.EOF:
		return nil
	default:
		return err
	}
}
