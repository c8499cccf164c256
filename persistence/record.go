package persistence

// Record type bytes of format version 1. Never renumber them.
const (
	recTensor = 0x01
	recBlob   = 0x02
	recModel  = 0x03
	recEnd    = 0xFF
)

// TensorRecord is one tensor key. Data is in modelstore's layout for DType
// (little-endian elements in C order; NUL-terminated elements for STRING).
type TensorRecord struct {
	Key            string
	Owner          string // the user who stored it ("" = default; format version 2)
	ExpireAtUnixMs int64  // 0 = no TTL
	DType          uint8  // modelstore.DType
	Shape          []int64
	Data           []byte
}

// ModelRecord is one model key without its blob, which travels beside it.
type ModelRecord struct {
	Key               string
	ExpireAtUnixMs    int64 // 0 = no TTL
	Backend           string
	Device            string
	Tag               string
	BatchSize         uint32
	MinBatchSize      uint32
	MinBatchTimeoutMs uint64
	Optimize          bool
	ID                string // a UUID or empty
	CreatedUnixMs     int64
	Owner             string
	// BlobSHA256 is the SHA-256 of the blob that comes with the record:
	// Read sets it to the digest it verified; given to Write (it may be
	// nil), it spares hashing the blob again. It is not stored as part of
	// the record: the BLOB record carries the digest.
	BlobSHA256 *[32]byte
	// Extra carries attributes added after format version 1, so that they
	// need no new format version. Nil when empty.
	Extra map[string]string
}

// Source yields the records Write stores. Each function calls yield once per
// record and returns the first error yield returns. Keys must be unique
// across both functions; Write does not check.
//
// Write streams the Data of tensors and the model blobs straight from the
// caller's slices, which must not change until Write returns. Models whose
// blobs have the same content (the same slice, or the same SHA-256) share one
// copy in the file.
type Source interface {
	Tensors(yield func(TensorRecord) error) error
	Models(yield func(m ModelRecord, blob []byte) error) error
}

// Sink receives the records Read decodes, in file order, each only after the
// frames it came from have been verified. Read still verifies the rest of the
// file after the last callback, so a Sink must build a fresh structure and
// the caller may use it only if Read returns nil. A non-nil error from a Sink
// stops Read, which returns that error unchanged.
//
// Models that share a blob receive the same slice: it is allocated once at
// its recorded size, and nobody may modify it.
type Sink interface {
	Tensor(TensorRecord) error
	Model(m ModelRecord, blob []byte) error
}

// ProgressSink is a Sink that wants to hear how far a long load has got.
type ProgressSink interface {
	Sink
	// Progress is called after each verified frame with the bytes of the
	// file consumed so far and the file size (-1 when Read cannot know it).
	Progress(done, total int64)
}
