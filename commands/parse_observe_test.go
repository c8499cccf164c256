package commands

import "testing"

func TestObserveParse(t *testing.T) {
	parseTable(t,
		parseCase{line: "SLOWLOG GET", want: slowlogCmd{sub: "GET", count: 10}},
		parseCase{line: "slowlog get 3", want: slowlogCmd{sub: "GET", count: 3}},
		parseCase{line: "SLOWLOG GET -1", want: slowlogCmd{sub: "GET", count: -1}},
		parseCase{line: "SLOWLOG LEN", want: slowlogCmd{sub: "LEN", count: 10}},
		parseCase{line: "SLOWLOG RESET", want: slowlogCmd{sub: "RESET", count: 10}},
		parseCase{line: "SLOWLOG GET -2", err: "ERR count should be greater than or equal to -1"},
		parseCase{line: "SLOWLOG LEN 1", err: "ERR wrong number of arguments for 'slowlog|len' command"},
		parseCase{line: "SLOWLOG GET 1 2", err: "ERR unknown subcommand or wrong number of arguments for 'GET'. Try SLOWLOG HELP."},
		parseCase{line: "SLOWLOG FOO", err: "ERR unknown subcommand 'FOO'. Try SLOWLOG HELP."},
		parseCase{line: "MEMORY USAGE k", want: memoryUsageCmd{key: "k"}},
		parseCase{line: "MEMORY USAGE k SAMPLES 5", want: memoryUsageCmd{key: "k"}},
		parseCase{line: "MEMORY DOCTOR", err: "ERR unknown subcommand 'DOCTOR'. Try MEMORY HELP."},
		parseCase{line: "MEMORY USAGE", err: "ERR wrong number of arguments for 'memory|usage' command"},
		parseCase{line: "MEMORY USAGE k SAMPLES 5", want: memoryUsageCmd{key: "k"}},
		parseCase{line: "MEMORY USAGE k SAMPLES x", err: "ERR value is not an integer or out of range"},
		parseCase{line: "MEMORY USAGE k x", err: "ERR syntax error"},
		// As redis-server 7.0.15 (hunt).
		parseCase{line: "MEMORY USAGE k SAMPLES -1", err: "ERR syntax error"},
		parseCase{line: "MEMORY USAGE k SAMPLES 0 SAMPLES 6", want: memoryUsageCmd{key: "k"}},
		parseCase{line: "MEMORY USAGE k SAMPLES 5 x", err: "ERR syntax error"},
		parseCase{line: "MONITOR", want: monitorCmd{}},
		parseCase{line: "LATENCY LATEST", want: latencyCmd{sub: "LATEST"}},
		parseCase{line: "latency reset", want: latencyCmd{sub: "RESET", reset: true}},
		parseCase{line: "LATENCY RESET fork", want: latencyCmd{sub: "RESET"}},
		parseCase{line: "LATENCY RESET fork Command", want: latencyCmd{sub: "RESET", reset: true}},
		parseCase{line: "LATENCY LATEST x", err: "ERR wrong number of arguments for 'latency|latest' command"},
		parseCase{line: "LATENCY HISTORY", err: "ERR unknown subcommand 'HISTORY'. Try LATENCY HELP."},
	)
}
