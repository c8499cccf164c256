package modelstore

// ReadGraphIO describes a model's inputs (its graph inputs that are not
// initializers) and outputs, in graph order, from its protobuf alone: the
// view every engine reports, so that engines agree on what RedisAI's
// positional INPUTS and OUTPUTS mean. model must have passed CheckModelBlob.
func ReadGraphIO(model []byte) (inputs, outputs []IOInfo, err error) {
	return readGraphIO(model)
}
