package modelstore

// WithoutLargeWeights returns a copy of model in which the raw_data of its
// large initializers is replaced by external-data references whose
// "offset" and "length" entries locate those bytes in model itself (the
// small model of shared weights, extinit.go), or nil when the model has too
// few large weights for that (under 64 MiB). An engine that decodes the
// small model then reads the weights from model directly, instead of from
// the copy a protobuf decoder would make of every raw_data field. model must
// have passed CheckModelBlob.
func WithoutLargeWeights(model []byte) ([]byte, error) {
	p, err := planSharedWeights(model)
	if err != nil || p == nil {
		return nil, err
	}
	return p.graph, nil
}
