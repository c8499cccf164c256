package commands

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/enclaveai/enclaveai/config"
	"github.com/enclaveai/enclaveai/modelstore"
	"github.com/enclaveai/enclaveai/persistence"
)

// Reply is an error whose text is sent as is: the exact RESP error line
// (without the leading '-'), prefix included. Command files declare their
// Reply values; everything else goes through errorText.
type Reply string

// Error returns the reply line as it is sent.
func (r Reply) Error() string { return string(r) }

// errorf builds a Reply.
func errorf(format string, a ...any) Reply { return Reply(fmt.Sprintf(format, a...)) }

// tableError is a refusal Redis makes from its command table before the
// command runs, as it does an unknown command or a wrong argument count:
// an unknown subcommand, or a subcommand's wrong argument count. Inside
// MULTI it is not queued: it answers at once and EXEC aborts (EXECABORT).
type tableError struct{ Reply }

// Unwrap makes errorText see the Reply.
func (e tableError) Unwrap() error { return e.Reply }

// unknownSub is Redis 7's reply to an unknown subcommand sub of cmd.
func unknownSub(cmd string, sub []byte) error {
	return tableError{errorf("ERR unknown subcommand '%s'. Try %s HELP.", truncate(sub, 128), strings.ToUpper(cmd))}
}

// subArityOf is Redis's wrong argument count of a subcommand: cmd|sub.
func subArityOf(cmd, sub string) error {
	return tableError{errorf("ERR wrong number of arguments for '%s|%s' command", cmd, strings.ToLower(sub))}
}

// Replies shared by several command families.
const (
	errSyntax      Reply = "ERR syntax error"
	errNotInteger  Reply = "ERR value is not an integer or out of range"
	errNoSuchKey   Reply = "ERR no such key"
	errNoAuth      Reply = "NOAUTH Authentication required."
	errWrongPass   Reply = "WRONGPASS invalid username-password pair or user is disabled."
	errLoading     Reply = "LOADING EnclaveAI is loading the dataset in memory"
	errInMulti     Reply = "ERR Cannot run RedisAI command within a transaction or a LUA script"
	errMonitorInTx Reply = "ERR MONITOR isn't allowed for DENY BLOCKING client"
	errNoMulti     Reply = "ERR Command not allowed inside a transaction"
	errTensorEmpty Reply = "ERR tensor key is empty or in a different shard"
)

// storeErrors maps the storage engine's sentinel errors to their RESP text.
var storeErrors = []struct {
	err  error
	text string
}{
	{modelstore.ErrWrongType, "WRONGTYPE Operation against a key holding the wrong kind of value"},
	{modelstore.ErrNoTensor, string(errTensorEmpty)},
	{modelstore.ErrNoModel, "ERR model key is empty"},
	{modelstore.ErrNoKey, string(errNoSuchKey)},
	{modelstore.ErrDataLength, "ERR data length does not match tensor shape and type"},
	{modelstore.ErrStringElements, "ERR Number of string elements in data blob does not match tensor length"},
	{modelstore.ErrBoolValue, "ERR BOOL tensor elements must be 0 or 1"},
	{modelstore.ErrInvalidValue, "ERR invalid value"},
	{modelstore.ErrNullInString, "ERR C-string value contains null character"},
	{modelstore.ErrRank, string(errRank)},
	{modelstore.ErrBatchSize, "ERR Model did not generate the expected batch size"},
	{modelstore.ErrOOM, "OOM command not allowed when used memory > 'maxmemory'."},
	{modelstore.ErrOutputTooBig, "ERR " + modelstore.ErrOutputTooBig.Error()},
	{modelstore.ErrQueueClosed, "ERR the server is stopping"},
	{modelstore.ErrCanceled, string(errKilled)},
	// MODEL_EXECUTION_TIMEOUT ran out before the engine stopped the run
	// itself (while it waited for an engine worker's lane): the words ONNX
	// Runtime and RedisAI give a run their kill switch stopped.
	{context.DeadlineExceeded, "ERR Exiting due to terminate flag being set to true."},
}

// configSetError is CONFIG SET's refusal of one directive: arg as the
// client spelled it (Redis's reply quotes it so), and why, config's
// ErrUnknown or ErrImmutable, errDuplicateParam, or a setter's reason.
type configSetError struct {
	arg string
	err error
}

// Error gives the argument and the reason, as the log shows them.
func (e configSetError) Error() string { return e.arg + ": " + e.err.Error() }

// Unwrap gives the reason, for errors.Is.
func (e configSetError) Unwrap() error { return e.err }

// errDuplicateParam is a directive named twice in one CONFIG SET.
var errDuplicateParam = errors.New("duplicate parameter")

// configSetText is Redis 7's reply to a refused CONFIG SET: an unknown
// name has its own words, every other refusal names the argument and says
// why.
func configSetText(e configSetError) string {
	if errors.Is(e.err, config.ErrUnknown) {
		return fmt.Sprintf("ERR Unknown option or number of arguments for CONFIG SET - '%s'", e.arg)
	}
	return fmt.Sprintf("ERR CONFIG SET failed (possibly related to argument '%s') - %v", e.arg, e.err)
}

// detailedErrors go to the client with their text and detail: refusals of
// a hostile or broken model blob, found before ONNX Runtime sees it, and
// what a run cannot carry (a FLOAT16 output, a rank-0 STRING input), which
// was answered "internal error" with its reason only in the log.
var detailedErrors = []error{
	modelstore.ErrModelEmpty, modelstore.ErrModelTooDeep,
	modelstore.ErrModelExternalData, modelstore.ErrModelTensorSize, modelstore.ErrModelUnsafe,
	modelstore.ErrUnsupportedDType, modelstore.ErrUnsupportedShape,
	// A value the log cannot hold: the sizes, never the key.
	persistence.ErrUnloggable,
}

// errorText is the one place where an error becomes RESP error text.
// Unexpected errors are logged with their detail and answered generically,
// so internal paths never reach the client.
func errorText(err error) string {
	var r Reply
	if errors.As(err, &r) {
		return string(r)
	}
	var ce configSetError
	if errors.As(err, &ce) {
		return configSetText(ce)
	}
	for _, se := range storeErrors {
		if errors.Is(err, se.err) {
			return se.text
		}
	}
	// RedisAI's exact text, which clients compare (REDISAI.md 10); where
	// the blob broke (a byte offset, nothing of its content) goes to the
	// log (compatibility review: the detail followed the text).
	if errors.Is(err, modelstore.ErrModelMalformed) {
		slog.Info("model refused", "detail", err.Error())
		return "ERR " + modelstore.ErrModelMalformed.Error()
	}
	for _, me := range detailedErrors {
		if errors.Is(err, me) {
			return "ERR " + err.Error()
		}
	}
	var ort *modelstore.ORTError
	if errors.As(err, &ort) {
		return "ERR " + ort.Msg
	}
	var ee *modelstore.EngineError
	if errors.As(err, &ee) {
		return "ERR " + ee.Msg
	}
	slog.Error("internal error", "err", err)
	return "ERR internal error"
}
