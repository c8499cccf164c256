package commands

import (
	"math"
	"testing"
)

func TestKeysParse(t *testing.T) {
	parseTable(t,
		parseCase{line: "DEL a b", want: delCmd{keys: []string{"a", "b"}}},
		parseCase{line: "UNLINK a", want: delCmd{keys: []string{"a"}}},
		parseCase{line: "EXISTS a a", want: existsCmd{keys: []string{"a", "a"}}},
		parseCase{line: "TYPE k", want: typeCmd{key: "k"}},
		parseCase{line: "KEYS t*", want: keysCmd{pattern: []byte("t*")}},
		parseCase{line: "SCAN 0", want: scanCmd{count: 10}},
		parseCase{line: "SCAN 17 MATCH a* COUNT 5 TYPE AI_TENSOR", want: scanCmd{cursor: 17, count: 5, pattern: []byte("a*"), typ: "AI_TENSOR"}},
		parseCase{line: "SCAN 0 COUNT 99999999", want: scanCmd{count: 1 << 20}},
		parseCase{line: "SCAN x", err: "ERR invalid cursor"},
		// As Redis's strtoul: a negative cursor wraps around.
		parseCase{line: "SCAN -1", want: scanCmd{cursor: 1<<64 - 1, count: 10}},
		parseCase{line: "SCAN 18446744073709551615", want: scanCmd{cursor: 1<<64 - 1, count: 10}},
		parseCase{line: "SCAN 18446744073709551616", err: "ERR invalid cursor"},
		parseCase{line: "SCAN -", err: "ERR invalid cursor"},
		// As redis-server 7.0.15 (review).
		parseCase{line: "SCAN +0", want: scanCmd{count: 10}},
		parseCase{line: "SCAN -18446744073709551615", want: scanCmd{cursor: 1, count: 10}},
		parseCase{line: "SCAN +", err: "ERR invalid cursor"},
		parseCase{line: "SCAN +-1", err: "ERR invalid cursor"},
		parseCase{line: "SCAN 0x", err: "ERR invalid cursor"},
		parseCase{line: "TOUCH a b", want: existsCmd{keys: []string{"a", "b"}}},
		parseCase{line: "OBJECT encoding k", want: objectCmd{sub: "ENCODING", key: "k"}},
		parseCase{line: "OBJECT FREQ k", want: objectCmd{sub: "FREQ", key: "k"}},
		parseCase{line: "OBJECT REFCOUNT k", want: objectCmd{sub: "REFCOUNT", key: "k"}},
		parseCase{line: "OBJECT IDLETIME k", err: "ERR unknown subcommand 'IDLETIME'. Try OBJECT HELP."},
		parseCase{line: "OBJECT ENCODING", err: "ERR wrong number of arguments for 'object|encoding' command"},
		parseCase{line: "OBJECT ENCODING a b", err: "ERR wrong number of arguments for 'object|encoding' command"},
		parseCase{line: "SCAN 0 COUNT 0", err: string(errSyntax)},
		parseCase{line: "SCAN 0 COUNT x", err: string(errNotInteger)},
		parseCase{line: "SCAN 0 BOGUS 1", err: string(errSyntax)},
		parseCase{line: "RENAME a b", want: renameCmd{src: "a", dst: "b"}},
		parseCase{line: "EXPIRE k 10", want: expireCmd{key: "k", when: 10, unit: 1000}},
		parseCase{line: "PEXPIREAT k 5 GT", want: expireCmd{key: "k", when: 5, unit: 1, absolute: true, gt: true}},
		parseCase{line: "EXPIRE k 10 NX XX", err: "ERR NX and XX, GT or LT options at the same time are not compatible"},
		parseCase{line: "EXPIRE k 10 GT LT", err: "ERR GT and LT options at the same time are not compatible"},
		parseCase{line: "EXPIRE k 10 ZZ", err: "ERR Unsupported option ZZ"},
		parseCase{line: "EXPIRE k x NX XX", err: "ERR NX and XX, GT or LT options at the same time are not compatible"},
		parseCase{line: "EXPIRE k x", err: string(errNotInteger)},
		parseCase{line: "EXPIRE k 9223372036854776", err: "ERR invalid expire time in 'expire' command"},
		parseCase{line: "EXPIRE k -9223372036854776", err: "ERR invalid expire time in 'expire' command"},
		parseCase{line: "PEXPIREAT k -9223372036854775808", want: expireCmd{key: "k", when: math.MinInt64, unit: 1, absolute: true}},
		parseCase{line: "TTL k", want: ttlCmd{key: "k", unit: 1000}},
		parseCase{line: "PTTL k", want: ttlCmd{key: "k", unit: 1}},
		parseCase{line: "EXPIRETIME k", want: ttlCmd{key: "k", unit: 1000, abs: true}},
		parseCase{line: "PEXPIRETIME k", want: ttlCmd{key: "k", unit: 1, abs: true}},
		parseCase{line: "PERSIST k", want: persistCmd{key: "k"}},
		parseCase{line: "DBSIZE", want: dbsizeCmd{}},
		parseCase{line: "FLUSHALL ASYNC", want: flushCmd{}},
		parseCase{line: "FLUSHDB", want: flushCmd{}},
		parseCase{line: "FLUSHALL NOW", err: string(errSyntax)},
		parseCase{line: "FLUSHALL SYNC SYNC", err: string(errSyntax)},
	)
}
