package commands

import (
	"strings"
	"testing"
)

const (
	aritySet    = "-ERR wrong number of arguments for 'ai.tensorset' command"
	arityGet    = "-ERR wrong number of arguments for 'ai.tensorget' command"
	badDType    = "-ERR invalid data type"
	badShape    = "-ERR invalid or negative value found in tensor shape"
	blobArgs    = "-ERR a single binary string should come after the BLOB argument in 'AI.TENSORSET' command"
	dataLength  = "-ERR data length does not match tensor shape and type"
	strElems    = "-ERR Number of string elements in data blob does not match tensor length"
	boolElems   = "-ERR BOOL tensor elements must be 0 or 1"
	valuesCount = "-ERR wrong number of values was given in 'AI.TENSORSET' command"
	badValue    = "-ERR invalid value"
	nulInString = "-ERR C-string value contains null character"
	tensorEmpty = "-ERR tensor key is empty or in a different shard"
	wrongType   = "-WRONGTYPE Operation against a key holding the wrong kind of value"
	tooBig      = "-ERR tensor size exceeds proto-max-bulk-len"
)

// REDISAI.md §3.1: every AI.TENSORSET error, and that a failed command
// never creates or changes a key.
func TestTensorSetErrors(t *testing.T) {
	h := newHarness(t)
	h.putModel("m")
	h.run(
		row("AI.TENSORSET", aritySet),
		row("AI.TENSORSET t", aritySet),
		row("AI.TENSORSET t FLOAT", aritySet),
		// The type.
		row("AI.TENSORSET t FOO 1", badDType),
		row("AI.TENSORSET t INT128 1", badDType),
		row("AI.TENSORSET t FLOAT16 1", badDType),
		row("AI.TENSORSET t INT 1", badDType),
		row("AI.TENSORSET t '' 1", badDType),
		// Dimensions: integers > 0 as string2ll reads them.
		row("AI.TENSORSET e FLOAT 0", "+OK"), // empty tensors are accepted (REDISAI.md §10)
		row("AI.TENSORSET e FLOAT 2 0", "+OK"),
		row("DEL e", ":1"),
		row("AI.TENSORSET t FLOAT -1", badShape),
		row("AI.TENSORSET t FLOAT 1.5", badShape),
		row("AI.TENSORSET t FLOAT abc", badShape),
		row("AI.TENSORSET t FLOAT +1", badShape),
		row("AI.TENSORSET t FLOAT 01", badShape),
		row("AI.TENSORSET t FLOAT ''", badShape),
		row("AI.TENSORSET t FLOAT 99999999999999999999", badShape),
		// BLOB.
		row("AI.TENSORSET t FLOAT 2 BLOB", blobArgs),
		row("AI.TENSORSET t FLOAT 1 BLOB a b", blobArgs),
		row("AI.TENSORSET t FLOAT 1 BLOB abc", dataLength),
		row(`AI.TENSORSET t FLOAT 2 BLOB "\x00\x00\x80\x3f"`, dataLength),
		row(`AI.TENSORSET t INT16 1 BLOB ""`, dataLength),
		row(`AI.TENSORSET t FLOAT 4611686018427387904 4 BLOB abcd`, dataLength),
		row(`AI.TENSORSET t BOOL 2 BLOB "\x01\x02"`, boolElems),
		row(`AI.TENSORSET t BOOL 2 BLOB "\x02\x01"`, boolElems),
		row("AI.TENSORSET t STRING 1 BLOB abc", strElems),
		row(`AI.TENSORSET t STRING 2 BLOB "a\x00"`, strElems),
		row(`AI.TENSORSET t STRING 1 BLOB "a\x00b"`, strElems),
		row(`AI.TENSORSET t STRING 1 BLOB ""`, strElems),
		// VALUES: the count.
		row("AI.TENSORSET t FLOAT 2 VALUES 1", valuesCount),
		row("AI.TENSORSET t FLOAT 2 VALUES 1 2 3", valuesCount),
		row("AI.TENSORSET t FLOAT VALUES", valuesCount),
		row("AI.TENSORSET t FLOAT 2 2 VALUES 1 2 3", valuesCount),
		// VALUES: floats as strtod reads them (RedisModule_StringToDouble).
		row("AI.TENSORSET t FLOAT 1 VALUES abc", badValue),
		row("AI.TENSORSET t FLOAT 1 VALUES ''", badValue),
		row("AI.TENSORSET t FLOAT 1 VALUES '1 '", badValue),
		row("AI.TENSORSET t FLOAT 1 VALUES ' 1'", badValue),
		row("AI.TENSORSET t FLOAT 1 VALUES 1_0", badValue),
		row("AI.TENSORSET t DOUBLE 1 VALUES nan", badValue),
		row("AI.TENSORSET t DOUBLE 1 VALUES 1e400", badValue),
		row("AI.TENSORSET t DOUBLE 1 VALUES -1e400", badValue),
		row("AI.TENSORSET t DOUBLE 1 VALUES 1e-400", badValue),
		// VALUES: integers as string2ll reads them, then the type's range.
		row("AI.TENSORSET t INT8 1 VALUES 1.87", badValue),
		row("AI.TENSORSET t INT8 1 VALUES 128", badValue),
		row("AI.TENSORSET t INT8 1 VALUES -129", badValue),
		row("AI.TENSORSET t INT8 1 VALUES +1", badValue),
		row("AI.TENSORSET t INT8 1 VALUES 01", badValue),
		row("AI.TENSORSET t INT8 1 VALUES -0", badValue),
		row("AI.TENSORSET t INT8 1 VALUES ''", badValue),
		row("AI.TENSORSET t UINT8 1 VALUES 256", badValue),
		row("AI.TENSORSET t UINT8 1 VALUES -1", badValue),
		row("AI.TENSORSET t INT16 1 VALUES 32768", badValue),
		row("AI.TENSORSET t INT16 1 VALUES -32769", badValue),
		row("AI.TENSORSET t UINT16 1 VALUES 65536", badValue),
		row("AI.TENSORSET t INT32 1 VALUES 2147483648", badValue),
		row("AI.TENSORSET t INT32 1 VALUES -2147483649", badValue),
		row("AI.TENSORSET t INT64 1 VALUES 9223372036854775808", badValue),
		row("AI.TENSORSET t UINT64 1 VALUES 18446744073709551616", badValue),
		row("AI.TENSORSET t UINT64 1 VALUES -1", badValue),
		row("AI.TENSORSET t BOOL 1 VALUES 2", badValue),
		row("AI.TENSORSET t BOOL 1 VALUES -1", badValue),
		row("AI.TENSORSET t BOOL 1 VALUES true", badValue),
		// VALUES: strings.
		row(`AI.TENSORSET t STRING 2 VALUES "a\x00b" c`, nulInString),
		row(`AI.TENSORSET t STRING 1 VALUES "\x00\x00"`, nulInString),
		// Zero tensors are bounded before they are allocated.
		row("AI.TENSORSET t FLOAT 1000000000", tooBig),
		row("AI.TENSORSET t STRING 1000000000", tooBig),
		row("AI.TENSORSET t INT8 4294967296 4294967296", tooBig),
		// Another type at the key: WRONGTYPE, checked before the arguments.
		row("AI.TENSORSET m FLOAT 1", wrongType),
		row("AI.TENSORSET m FLOAT 1 VALUES 1", wrongType),
		row("AI.TENSORSET m FOO 1", wrongType),
		row("AI.TENSORSET m FLOAT 0", wrongType),
		row("AI.TENSORSET m FLOAT 1 VALUES x", wrongType),
		row("AI.TENSORSET m FLOAT 1 BLOB abc", wrongType), // a blob of the wrong length
		// Nothing was written.
		row("EXISTS t", ":0"),
		row("TYPE m", "+AI__MODEL"),
		row("DBSIZE", ":1"),
	)
}

// REDISAI.md §3.2: AI.TENSORGET's reply shapes and errors.
func TestTensorGet(t *testing.T) {
	h := newHarness(t)
	h.putModel("m")
	const blob = `"\xcd\xcc\xcc=\x00\x00 \xc0"` // FLOAT 0.1, -2.5
	const meta = `"dtype" "FLOAT" "shape" [:2]`
	const values = `["0.10000000149011612" "-2.5"]`
	h.run(
		row("AI.TENSORSET t FLOAT 2 VALUES 0.1 -2.5", "+OK"),
		row("AI.TENSORGET t", "["+meta+` "blob" `+blob+"]"),
		row("AI.TENSORGET t META", "["+meta+"]"),
		row("AI.TENSORGET t BLOB", blob),
		row("AI.TENSORGET t VALUES", values),
		row("AI.TENSORGET t META BLOB", "["+meta+` "blob" `+blob+"]"),
		row("AI.TENSORGET t BLOB META", "["+meta+` "blob" `+blob+"]"),
		row("AI.TENSORGET t META VALUES", "["+meta+` "values" `+values+"]"),
		row("AI.TENSORGET t VALUES META", "["+meta+` "values" `+values+"]"),
		row("ai.tensorget t meta values", "["+meta+` "values" `+values+"]"),
		row("AI.TENSORGET t META META", "["+meta+"]"),
		row("AI.TENSORGET t VALUES VALUES", values),
		row("AI.TENSORGET t BLOB BLOB", blob),
		// Errors: arity, then the key, then the options.
		row("AI.TENSORGET", arityGet),
		row("AI.TENSORGET t META BLOB VALUES META", arityGet),
		row("AI.TENSORGET t BLOB VALUES", "-ERR both BLOB and VALUES specified"),
		row("AI.TENSORGET t META BLOB VALUES", arityGet),
		row("AI.TENSORGET t FOO", "-ERR unsupported data format"),
		row("AI.TENSORGET t META FOO", "-ERR unsupported data format"),
		row("AI.TENSORGET nokey", tensorEmpty),
		row("AI.TENSORGET nokey FOO", tensorEmpty),
		row("AI.TENSORGET nokey BLOB VALUES", tensorEmpty),
		row("AI.TENSORGET m", wrongType),
		row("AI.TENSORGET m FOO", wrongType),
	)
}

// Every type's values, BLOB layout and META.
func TestTensorTypes(t *testing.T) {
	h := newHarness(t)
	h.run(
		row("AI.TENSORSET t INT8 2 VALUES -128 127", "+OK"),
		row("AI.TENSORGET t", `["dtype" "INT8" "shape" [:2] "blob" "\x80\x7f"]`),
		row("AI.TENSORGET t VALUES", "[:-128 :127]"),
		row("AI.TENSORSET t UINT8 2 VALUES 0 255", "+OK"),
		row("AI.TENSORGET t META VALUES", `["dtype" "UINT8" "shape" [:2] "values" [:0 :255]]`),
		row("AI.TENSORSET t INT16 2 VALUES -32768 32767", "+OK"),
		row("AI.TENSORGET t BLOB", `"\x00\x80\xff\x7f"`),
		row("AI.TENSORGET t VALUES", "[:-32768 :32767]"),
		row("AI.TENSORSET t UINT16 1 VALUES 65535", "+OK"),
		row("AI.TENSORGET t VALUES", "[:65535]"),
		row("AI.TENSORSET t INT32 2 VALUES -2147483648 2147483647", "+OK"),
		row("AI.TENSORGET t VALUES", "[:-2147483648 :2147483647]"),
		row("AI.TENSORSET t INT64 2 VALUES -9223372036854775808 9223372036854775807", "+OK"),
		row("AI.TENSORGET t VALUES", "[:-9223372036854775808 :9223372036854775807]"),
		row("AI.TENSORSET t UINT32 1 VALUES 4294967295", "+OK"),
		row("AI.TENSORGET t META VALUES", `["dtype" "UINT32" "shape" [:1] "values" [:4294967295]]`),
		// UINT64 beyond int64: a RESP integer cannot carry it, so its text.
		row("AI.TENSORSET t UINT64 3 VALUES 18446744073709551615 9223372036854775808 9223372036854775807", "+OK"),
		row("AI.TENSORGET t VALUES", `["18446744073709551615" "9223372036854775808" :9223372036854775807]`),
		row("AI.TENSORGET t BLOB", `"\xff\xff\xff\xff\xff\xff\xff\xff\x00\x00\x00\x00\x00\x00\x00\x80\xff\xff\xff\xff\xff\xff\xff\x7f"`),
		row("AI.TENSORSET t BOOL 3 VALUES 1 0 1", "+OK"),
		row("AI.TENSORGET t", `["dtype" "BOOL" "shape" [:3] "blob" "\x01\x00\x01"]`),
		row("AI.TENSORGET t VALUES", "[:1 :0 :1]"),
		row("AI.TENSORSET t DOUBLE 1 VALUES 0.1", "+OK"),
		row("AI.TENSORGET t", `["dtype" "DOUBLE" "shape" [:1] "blob" "\x9a\x99\x99\x99\x99\x99\xb9?"]`),
		// Shapes, case-insensitive keywords, a scalar, BLOB input.
		row("AI.TENSORSET t uint8 2 3 blob abcdef", "+OK"),
		row("AI.TENSORGET t META VALUES", `["dtype" "UINT8" "shape" [:2 :3] "values" [:97 :98 :99 :100 :101 :102]]`),
		row("AI.TENSORSET t float VALUES 5", "+OK"),
		row("AI.TENSORGET t META VALUES", `["dtype" "FLOAT" "shape" [] "values" ["5"]]`),
		row("AI.TENSORSET t INT32 1 1 1 VALUES -7", "+OK"),
		row("AI.TENSORGET t META VALUES", `["dtype" "INT32" "shape" [:1 :1 :1] "values" [:-7]]`),
		row(`AI.TENSORSET t FLOAT 1 BLOB "\x00\x00\x80\x3f"`, "+OK"),
		row("AI.TENSORGET t VALUES", `["1"]`),
		// STRING: elements end with NUL in the blob, not in VALUES.
		row(`AI.TENSORSET s STRING 2 VALUES a "b\x00"`, "+OK"),
		row("AI.TENSORGET s", `["dtype" "STRING" "shape" [:2] "blob" "a\x00b\x00"]`),
		row("AI.TENSORGET s VALUES", `["a" "b"]`),
		row(`AI.TENSORSET s STRING 3 BLOB "a\x00\x00bc\x00"`, "+OK"),
		row("AI.TENSORGET s VALUES", `["a" "" "bc"]`),
		row(`AI.TENSORSET s STRING VALUES ""`, "+OK"),
		row("AI.TENSORGET s META VALUES", `["dtype" "STRING" "shape" [] "values" [""]]`),
		// Zero tensors.
		row("AI.TENSORSET z INT32 2 2", "+OK"),
		row("AI.TENSORGET z META VALUES", `["dtype" "INT32" "shape" [:2 :2] "values" [:0 :0 :0 :0]]`),
		row("AI.TENSORGET z BLOB", `"`+strings.Repeat(`\x00`, 16)+`"`),
		row("AI.TENSORSET z FLOAT 2", "+OK"),
		row("AI.TENSORGET z VALUES", `["0" "0"]`),
		row("AI.TENSORSET z STRING 2", "+OK"),
		row("AI.TENSORGET z", `["dtype" "STRING" "shape" [:2] "blob" "\x00\x00"]`),
		row("AI.TENSORGET z VALUES", `["" ""]`),
		row("AI.TENSORSET z BOOL 1", "+OK"),
		row("AI.TENSORGET z VALUES", `[:0]`),
		// Overwriting changes type and shape; the key stays a tensor.
		row("AI.TENSORSET z DOUBLE 1 2", "+OK"),
		row("AI.TENSORGET z META", `["dtype" "DOUBLE" "shape" [:1 :2]]`),
		row("TYPE z", "+AI_TENSOR"),
	)
}

// Float VALUES are bulk strings in RESP2 and doubles in RESP3, in Redis
// 7.2's text (d2string): integral values as integers, shortest round-trip
// digits otherwise, inf/-inf/nan spelt as Redis spells them.
func TestTensorFloatText(t *testing.T) {
	h := newHarness(t)
	rows := []struct{ dtype, in, resp2, resp3 string }{
		{"FLOAT", "0.1", `"0.10000000149011612"`, ",0.10000000149011612"},
		{"DOUBLE", "0.1", `"0.1"`, ",0.1"},
		{"FLOAT", "1", `"1"`, ",1"},
		{"FLOAT", "-2.5", `"-2.5"`, ",-2.5"},
		{"DOUBLE", "-0", `"-0"`, ",-0"},
		{"DOUBLE", "0", `"0"`, ",0"},
		{"FLOAT", "1000000", `"1000000"`, ",1000000"},
		{"FLOAT", "123456789", `"123456792"`, ",123456792"},
		{"DOUBLE", "4611686018427387904", `"4611686018427387904"`, ",4611686018427387904"},
		{"DOUBLE", "9223372036854775808", `"9223372036854776000"`, ",9223372036854776000"},
		{"DOUBLE", "1e20", `"1e+20"`, ",1e+20"},
		{"DOUBLE", "1e22", `"1e+22"`, ",1e+22"},
		{"DOUBLE", "1.5e300", `"1.5e+300"`, ",1.5e+300"},
		{"DOUBLE", "123456.789", `"123456.789"`, ",123456.789"},
		{"DOUBLE", "0.000015", `"0.000015"`, ",0.000015"},
		{"DOUBLE", "1e-7", `"1e-7"`, ",1e-7"},
		{"DOUBLE", "1.25e-300", `"1.25e-300"`, ",1.25e-300"},
		{"FLOAT", "1e-7", `"1.0000000116860974e-7"`, ",1.0000000116860974e-7"},
		{"FLOAT", "3.4028235e38", `"3.4028234663852886e+38"`, ",3.4028234663852886e+38"},
		{"FLOAT", "1e39", `"inf"`, ",inf"}, // beyond float32
		{"DOUBLE", "inf", `"inf"`, ",inf"},
		{"DOUBLE", "-Infinity", `"-inf"`, ",-inf"},
		{"FLOAT", "0x1p-2", `"0.25"`, ",0.25"},
	}
	for _, r := range rows {
		h.run(row("AI.TENSORSET f "+r.dtype+" 1 VALUES "+r.in, "+OK"))
		if got := render(h.do("AI.TENSORGET f VALUES")); got != "["+r.resp2+"]" {
			t.Errorf("%s %s: RESP2 %s, want [%s]", r.dtype, r.in, got, r.resp2)
		}
		h.do("HELLO 3")
		if got := render(h.do("AI.TENSORGET f VALUES")); got != "["+r.resp3+"]" {
			t.Errorf("%s %s: RESP3 %s, want [%s]", r.dtype, r.in, got, r.resp3)
		}
		h.do("HELLO 2")
	}
	// NaN from a blob (VALUES refuses it), in both protocols.
	h.run(
		row(`AI.TENSORSET f FLOAT 1 BLOB "\x00\x00\xc0\x7f"`, "+OK"),
		row("AI.TENSORGET f VALUES", `["nan"]`),
		row("HELLO 3", "~^%"),
		row("AI.TENSORGET f VALUES", `[,nan]`),
		// RESP3 changes only the float values: META and integers as before.
		row("AI.TENSORSET f FLOAT 2 VALUES 1.5 2", "+OK"),
		row("AI.TENSORGET f META VALUES", `["dtype" "FLOAT" "shape" [:2] "values" [,1.5 ,2]]`),
		row("AI.TENSORSET i INT8 1 VALUES -3", "+OK"),
		row("AI.TENSORGET i VALUES", `[:-3]`),
	)
}

// Float text round-trips: parsing the reply gives back the stored value.
func TestTensorFloatRoundTrip(t *testing.T) {
	h := newHarness(t)
	for _, v := range []string{"0.1", "0.2", "0.3", "1e-45", "1.17549435e-38", "3.14159265", "-65504", "16777217", "7e-10", "2.5e+15"} {
		h.run(row("AI.TENSORSET a FLOAT 1 VALUES "+v, "+OK"))
		text := strings.Trim(render(h.do("AI.TENSORGET a VALUES")), `[]"`)
		h.run(row("AI.TENSORSET b FLOAT 1 VALUES "+text, "+OK"))
		if a, b := render(h.do("AI.TENSORGET a BLOB")), render(h.do("AI.TENSORGET b BLOB")); a != b {
			t.Errorf("FLOAT %s reads %s, which stores %s instead of %s", v, text, b, a)
		}
	}
}
