package persistence

import "hash/crc32"

// CRC-32C as arithmetic on polynomials over GF(2) modulo the Castagnoli
// polynomial, for frameFollows: a CRC is linear, so the CRC of a
// concatenation follows from the CRCs of its pieces and the second one's
// length,
//
//	CRC(A‖B) = crcShift(CRC(A), len(B)) ^ CRC(B),
//
// where crcShift multiplies by x^(8·len(B)) (zlib's crc32_combine). The
// values are in hash/crc32's bit order: bit 31 is the coefficient of x^0,
// bit 0 that of x^31, and the polynomial is crc32.Castagnoli (0x82F63B78)
// without its x^32 term.

// crcMul is a·b modulo the Castagnoli polynomial.
func crcMul(a, b uint32) uint32 {
	var p uint32
	// a's terms from x^0 up, each moved to bit 31 in turn, with b
	// multiplied by x at each step.
	for ; a != 0; a <<= 1 {
		if a&(1<<31) != 0 {
			p ^= b
		}
		if b&1 != 0 { // the x^31 term overflows into x^32: reduce
			b = b>>1 ^ crc32.Castagnoli
		} else {
			b >>= 1
		}
	}
	return p
}

// crcBytePow[k] is x^(8·2^k) modulo the polynomial: what appending 2^k
// bytes multiplies a CRC by.
var crcBytePow = func() (t [64]uint32) {
	p := uint32(1) << (31 - 8) // x^8
	for k := range t {
		t[k] = p
		p = crcMul(p, p)
	}
	return t
}()

// crcShift is crc·x^(8n) modulo the polynomial, in O(log n): the CRC of
// some bytes A becomes crcShift(CRC(A), n) ^ CRC(B) once n bytes B follow.
func crcShift(crc uint32, n int) uint32 {
	for k := 0; n > 0; k, n = k+1, n>>1 {
		if n&1 != 0 {
			crc = crcMul(crc, crcBytePow[k])
		}
	}
	return crc
}
