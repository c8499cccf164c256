package modelstore

import "errors"

// Sentinel errors of the store. commands.errorText maps each to the exact
// RESP error text clients see (RedisAI's wording where one exists).
var (
	ErrWrongType      = errors.New("wrong type")
	ErrNoTensor       = errors.New("tensor key is empty")
	ErrNoModel        = errors.New("model key is empty")
	ErrNoKey          = errors.New("no such key")
	ErrDataLength     = errors.New("data length does not match tensor shape and type")
	ErrStringElements = errors.New("number of string elements does not match tensor length")
	ErrBoolValue      = errors.New("BOOL tensor elements must be 0 or 1")
	ErrInvalidValue   = errors.New("invalid value")
	ErrNullInString   = errors.New("C-string value contains null character")
	ErrOOM            = errors.New("command not allowed when used memory > 'maxmemory'")
)
