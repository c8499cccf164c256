// Package cluster is EnclaveAI's Redis Cluster state: the key-to-slot
// hash (CRC16 with hash tags, as Redis Cluster's), the slot topology an
// external controller pushes (kvrocks's CLUSTERX SETNODES format), and the
// file that keeps a node's id, topology and version across restarts,
// authenticated with a key derived from the seal key (state.go), and the
// TLS with which a node connects to another (peer.go). It knows nothing
// of RESP: package commands holds the CLUSTER and CLUSTERX
// handlers and the redirects.
package cluster

// Slots is the number of hash slots, as in Redis Cluster.
const Slots = 16384

// crcTable is CRC16-CCITT (XMODEM: polynomial 0x1021, initial value 0),
// the checksum Redis Cluster hashes keys with.
var crcTable = func() (t [256]uint16) {
	for i := range t {
		c := uint16(i) << 8
		for range 8 {
			if c&0x8000 != 0 {
				c = c<<1 ^ 0x1021
			} else {
				c <<= 1
			}
		}
		t[i] = c
	}
	return t
}()

// CRC16 is CRC16-XMODEM of b.
func CRC16(b []byte) uint16 {
	var c uint16
	for _, x := range b {
		c = c<<8 ^ crcTable[byte(c>>8)^x]
	}
	return c
}

// KeySlot is the slot of key: the CRC16 of its hash tag (the bytes between
// the first '{' and the next '}', when not empty) or of the whole key.
func KeySlot(key []byte) int {
	for i, c := range key {
		if c != '{' {
			continue
		}
		for j := i + 1; j < len(key); j++ {
			if key[j] == '}' {
				if j > i+1 {
					key = key[i+1 : j]
				}
				return int(CRC16(key) & (Slots - 1))
			}
		}
		break
	}
	return int(CRC16(key) & (Slots - 1))
}
