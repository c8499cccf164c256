/*
Package persistence writes and reads EnclaveAI's sealed files: the snapshot,
the whole keyspace (tensors and models) in one file that stays confidential
and tamper-evident on an untrusted disk, in the spirit of Redis's RDB file;
and the append-only log (Log, log.go and logformat.go), a manifest, base
and incr files of sealed records and sealed model files (named by the
model's SHA-256, or by a random id for an upload written as it arrived),
in the spirit of Redis 7's multi-part AOF. The log's byte layout is
specified in docs/DURABILITY.md ("File formats"), its golden directories
are testdata/log-v1 and log-v2. The log writes through FS, which tests make
fail.

A log frame is authenticated whole, flags included, and a torn one is cut
off whole. The records between Log.BeginUnit and EndUnit (a transaction's,
a multi-key update's) are an atomic unit of any size: they are written
only once the unit is complete, in frames that fill as any others, and
every frame of the unit but its last is flagged frameUnitMore (format
version 2). Replay holds a unit's records until its last frame and cuts
off a unit that the file ends inside, as it cuts a torn frame. It reads a
frame at a time and holds each whole while it verifies it, decrypted in
place: its memory is the largest frame and the values decoded (a unit's
held until it is whole), not the file. One record is bounded by the
frame limit (maxLogFrame, 4 GiB: Loggable).

The package knows nothing of RESP or of the keyspace. The server hands Write a
Source that yields its records and hands Read a Sink that receives them; the
seal key comes from package enclave. Read verifies as it goes and returns nil
only when the whole file, its tail included, has been verified, so the caller
loads into a fresh structure and swaps it in only on success. SaveFile and
LoadFile add the atomic file handling (temporary file, fsync, rename, fsync of
the directory) and errors that name the file.

# File format, versions 1 and 2

Everything below is fixed by its format version and must never change; a
change means a new format version, read next to the old ones, and a new golden
file under testdata/. Version 2 differs from version 1 only in the TENSOR
record, which gained its owner (below); this build writes version 2 and reads
both. All integers are big-endian; offsets are in bytes.

	file = header frame* last-frame        (no byte may follow last-frame)

The header is 128 bytes:

	offset size field
	     0    8 magic "EAISNAP\x00"
	     8    2 format version: 1 or 2
	    10    2 flags: 0 (reserved; a reader refuses anything else)
	    12    8 creation time: int64 Unix milliseconds
	    20    1 KDF id: 1 = HKDF-SHA256
	    21    1 key wrap id: 1 = AES-256-GCM
	    22    1 frame cipher id: 1 = AES-256-GCM
	    23    1 compression id: 1 = zstd
	    24    4 frame size F: plaintext bytes in every frame but the last,
	            4096 <= F <= 64 MiB
	    28    8 seal key id: the first 8 bytes of
	            HMAC-SHA256(seal key, "EnclaveAI snapshot seal key id v1")
	    36   32 KDF salt: random
	    68   12 wrap nonce: random
	    80   48 wrapped data key: AES-256-GCM(KEK, wrap nonce, data key,
	            associated data = header bytes 0..79), i.e. 32 bytes of
	            ciphertext then the 16-byte tag, where
	            KEK = HKDF-SHA256(secret = seal key, salt = KDF salt,
	                  info = "EnclaveAI snapshot key wrap v1", 32 bytes)
	   128      end of header

The data key is 32 random bytes drawn afresh for every snapshot; the 32-byte
seal key never encrypts data itself. The seal key id lets a reader tell a wrong
seal key (ErrWrongKey) from a damaged header (ErrCorrupt); it reveals only
which files share a seal key. Every header byte after the version is
authenticated: bytes 0..79 as the wrap's associated data, the rest by the wrap
itself, and all 128 through H below.

Let H = SHA-256(header bytes 0..127). Frame i (i = 0, 1, 2, ...) is:

	offset size field
	     0    4 L: ciphertext length, the frame's plaintext length + 16
	     4    1 frame flags: 0 = more frames follow, 1 = this is the last frame
	     5    L AES-256-GCM(data key, nonce_i, plaintext_i, AD_i), tag last,
	            nonce_i = 4 zero bytes || uint64 i
	            AD_i    = H || uint64 i || frame flags (41 bytes)

Every frame but the last carries exactly F plaintext bytes, the last one 0..F.
Because the index, the last-frame flag and the header hash are authenticated,
frames cannot be reordered, duplicated, dropped, cut short or moved from one
file to another without the reader noticing; a file that ends after a frame
not flagged last is truncated.

The frame plaintexts, concatenated, form one zstd stream (window at most
8 MiB; readers refuse larger windows), and the stream decompresses to the
record stream. A record is a type byte and a body:

	str  = uint32 n, then n bytes (n <= MaxStringLen = 512 MiB)

	0x01 TENSOR  str key, [version 2: str owner], int64 expire-at (Unix ms,
	             0 = no TTL), uint8 dtype, uint8 rank, rank x int64 dimension
	             (>= 0), uint64 n, n data bytes (n <= the reader's size limit)
	0x02 BLOB    uint32 blob id, 32-byte SHA-256 of the content, uint64 n,
	             n content bytes (n <= the reader's size limit)
	0x03 MODEL   str key, int64 expire-at, uint32 blob id, str backend,
	             str device, str tag, uint32 batch size, uint32 min batch size,
	             uint64 min batch timeout (ms), uint8 optimize (0 or 1),
	             str id, int64 created (Unix ms), str owner,
	             uint32 m (<= MaxExtra = 1024), m x (str name, str value) with the
	             names in strictly increasing byte order
	0xFF END     uint64 count of the records before END, 32-byte checksum

Blob ids are 1, 2, 3, ... in file order; a MODEL names a blob defined by an
earlier BLOB record, and each distinct blob content (by SHA-256) is written
once however many models share it. The checksum is SHA-256 over every record
byte before the END record, except that a BLOB's content bytes are not fed to
it themselves: the content's SHA-256, which is part of the hashed record and is
checked against the content, stands for them. END must be the last record and
the zstd stream must end right after it. A record type not listed here makes a
reader refuse the file: new record types need a new format version, while new
model attributes can travel in the MODEL record's name/value list. An owner is
a user name from the server's `user` directives; "" stands for the default
user.

The data of a TENSOR is opaque to this package (the dtype numbers and the data
layout are those of package modelstore); the Sink validates it.
*/
package persistence
