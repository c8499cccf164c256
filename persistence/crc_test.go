package persistence

import (
	"encoding/binary"
	"hash/crc32"
	mrand "math/rand/v2"
	"testing"
)

// The CRC of a concatenation from its pieces' CRCs, and frameFollows's
// frame checksum from prefix CRCs, against direct computation over random
// bytes and lengths, empty pieces included.
func TestCRCShift(t *testing.T) {
	r := mrand.New(mrand.NewPCG(1, 2))
	buf := make([]byte, 1<<16)
	mrand.NewChaCha8([32]byte{2}).Read(buf)
	crc := func(p ...[]byte) uint32 {
		var c uint32
		for _, q := range p {
			c = crc32.Update(c, castagnoli, q)
		}
		return c
	}
	lens := func() int {
		if r.IntN(4) == 0 {
			return r.IntN(3) // empty pieces and tiny ones
		}
		return r.IntN(len(buf) / 2)
	}
	for range 2000 {
		a, b := buf[:lens()], buf[len(buf)/2:][:lens()]
		if got, want := crcShift(crc(a), len(b))^crc(b), crc(a, b); got != want {
			t.Fatalf("CRC of %d bytes then %d: combined %#x, direct %#x", len(a), len(b), got, want)
		}
	}
	n := len(buf)
	spans := [][2]int{{0, 0}, {0, 1}, {0, n}, {7, 7}, {n, n}, {n - 1, n}}
	for range 2000 {
		s := r.IntN(n + 1)
		spans = append(spans, [2]int{s, s + r.IntN(n-s+1)})
	}
	for _, se := range spans {
		s, e := se[0], se[1]
		h := buf[r.IntN(len(buf)-5):][:5]
		if got, want := crcShift(crc(h)^crc(buf[:s]), e-s)^crc(buf[:e]), crc(h, buf[s:e]); got != want {
			t.Fatalf("frame over [%d:%d]: from prefixes %#x, direct %#x", s, e, got, want)
		}
	}
}

// frameFollows decides as a direct check of every offset does, on random
// bytes holding whole frames (flags 0, frameUnitMore or another), frames
// one byte short, and frames with a wrong checksum, at random offsets.
func TestFrameFollowsMatchesDirectCheck(t *testing.T) {
	direct := func(b []byte) bool {
		for j := 1; j+logFrameHdr <= len(b); j++ {
			l := int(binary.BigEndian.Uint32(b[j:]))
			if (b[j+4] != 0 && b[j+4] != frameUnitMore) || l < tagSize || l > len(b)-j-logFrameHdr {
				continue
			}
			if f := b[j : j+logFrameHdr+l]; frameCRC(f) == binary.BigEndian.Uint32(f[5:]) {
				return true
			}
		}
		return false
	}
	r := mrand.New(mrand.NewPCG(3, 4))
	rnd := mrand.NewChaCha8([32]byte{3})
	var found int
	for i := range 3000 {
		b := make([]byte, 9+r.IntN(4096))
		// Half the cases are random bytes, where some lengths fit by
		// chance; half zeros, where only the planted frame's does.
		if i%2 == 0 {
			rnd.Read(b)
		}
		if l := tagSize + r.IntN(512); r.IntN(2) == 0 && logFrameHdr+l+1 <= len(b) {
			j := 1 + r.IntN(len(b)-logFrameHdr-l)
			f := b[j : j+logFrameHdr+l]
			binary.BigEndian.PutUint32(f, uint32(l))
			f[4] = byte(r.IntN(3)) // 0, lastFrame (not a log frame's) or frameUnitMore
			binary.BigEndian.PutUint32(f[5:], frameCRC(f))
			switch r.IntN(3) {
			case 0:
				f[5] ^= 1 // wrong checksum
			case 1:
				binary.BigEndian.PutUint32(f, uint32(len(b)-j)) // claims more than b holds
			}
		}
		want := direct(b)
		if got := frameFollows(b); got != want {
			t.Fatalf("case %d (%d bytes): frameFollows %v, direct check %v", i, len(b), got, want)
		}
		if want {
			found++
		}
	}
	if found < 100 {
		t.Errorf("only %d of the cases hold a whole frame", found)
	}
}
