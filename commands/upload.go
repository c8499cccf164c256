package commands

import "github.com/enclaveai/enclaveai/modelstore"

// Uploads: the BLOB chunks of AI.MODELSTORE and AI.MODELSET are the only
// arguments that may be larger than client-query-buffer-limit. The network
// front end reads them (Spec.Payload tells which arguments they are) into
// memory of its choosing, a modelstore.ModelBuffer for a large model, and
// asks CheckUploadSize and (for a large model) ReserveUpload before each
// one's bytes arrive, so that max-model-size and maxmemory refuse an upload
// before anything is allocated. The command
// then finds the buffer with Args.Upload and hands it to the model registry
// without copying it; the front end drops its own reference when the
// command is over, which frees a buffer that nothing kept (a parse error, a
// refused or duplicate model).

// modelPayloadArg is the Payload of AI.MODELSTORE and AI.MODELSET: the
// arguments after the first BLOB word that follows the device, TAG's value
// excepted, are chunks. It mirrors parseModelStore on every command that
// parses; on those that do not, the upload is dropped anyway.
func modelPayloadArg(prev [][]byte, i int) bool {
	for j := 4; j < i; j++ {
		if j == 5 && isWord(prev[4], "TAG") {
			continue
		}
		if isWord(prev[j], "BLOB") {
			return true
		}
	}
	return false
}

// CheckUploadSize refuses an upload whose chunks total more than
// max-model-size, as soon as the chunk that passes it announces its length.
func (s *App) CheckUploadSize(total int64) error {
	if total > s.Opts.MaxModelSize.Load() {
		return errModelTooBig
	}
	return nil
}

// ReserveUpload accounts for n more payload bytes of a large upload before
// they are read, if maxmemory leaves room for them next to what the
// keyspace holds and every upload in flight. The front end calls
// ReleaseUpload with what it reserved once the command is over.
//
// Unlike the check a small model gets once parsed, this one cannot know
// that the upload will turn out to duplicate a model already held (which
// adds no memory): a large one needs the room while it arrives.
func (s *App) ReserveUpload(n int64) error {
	if err := s.Keys.CheckMemory(s.uploading.Load() + n); err != nil {
		return err
	}
	s.uploading.Add(n)
	return nil
}

// ReleaseUpload ends the accounting of n bytes reserved by ReserveUpload.
func (s *App) ReleaseUpload(n int64) { s.uploading.Add(-n) }

// DispatchUpload is Dispatch for a command whose payload the front end read
// into up (nil if none). The front end keeps its reference to up and drops
// it after the call: a command that keeps the model takes its own.
func (s *App) DispatchUpload(c *Client, argv [][]byte, owned func(int) bool, up *modelstore.ModelBuffer) {
	c.upload = up
	defer func() { c.upload = nil }()
	s.Dispatch(c, argv, owned)
}

// Upload is the buffer the front end read this command's payload into, or
// nil. Its bytes are only those of the payload arguments when the command
// parses as the front end expected: check with ModelBuffer.Holds.
func (a *Args) Upload() *modelstore.ModelBuffer { return a.upload }
