package commands

import "testing"

func TestAdminParse(t *testing.T) {
	parseTable(t,
		parseCase{line: "TIME", want: timeCmd{}},
		parseCase{line: "SHUTDOWN", want: shutdownCmd{save: -1}},
		parseCase{line: "SHUTDOWN NOSAVE", want: shutdownCmd{save: 0}},
		parseCase{line: "shutdown save now", want: shutdownCmd{save: 1}},
		parseCase{line: "SHUTDOWN LATER", err: string(errSyntax)},
		// As Redis 7.0.15 (hunt: ABORT and NOSAVE SAVE shut the server down).
		parseCase{line: "SHUTDOWN ABORT", err: string(errNoShutdown)},
		parseCase{line: "SHUTDOWN NOW ABORT", err: string(errSyntax)},
		parseCase{line: "SHUTDOWN NOSAVE SAVE", err: string(errSyntax)},
		parseCase{line: "SHUTDOWN SAVE NOSAVE", err: string(errSyntax)},
		parseCase{line: "SHUTDOWN NOSAVE NOW FORCE", want: shutdownCmd{save: 0}},
		parseCase{line: "CONFIG GET max* port", want: configGetCmd{patterns: [][]byte{[]byte("max*"), []byte("port")}}},
		parseCase{line: "CONFIG GET", err: "ERR wrong number of arguments for 'config|get' command"},
		parseCase{line: "CONFIG SET maxmemory 1mb Timeout 5", want: configSetCmd{pairs: []configPair{{"maxmemory", "1mb"}, {"Timeout", "5"}}}},
		parseCase{line: "CONFIG SET maxmemory", err: "ERR wrong number of arguments for 'config|set' command"},
		// Replies as redis-server 7.0.15's: the count, then each name in
		// order, before any value is looked at.
		parseCase{line: "CONFIG SET a 1 b", err: string(errSyntax)},
		parseCase{line: "CONFIG SET nosuch 1", err: "ERR Unknown option or number of arguments for CONFIG SET - 'nosuch'"},
		parseCase{line: "CONFIG SET user x", err: "ERR Unknown option or number of arguments for CONFIG SET - 'user'"},
		parseCase{line: "CONFIG SET port 1", err: "ERR CONFIG SET failed (possibly related to argument 'port') - can't set immutable config"},
		parseCase{line: "CONFIG SET maxmemory abc LOGFILE x", err: "ERR CONFIG SET failed (possibly related to argument 'LOGFILE') - can't set immutable config"},
		parseCase{line: "CONFIG SET logfile x nosuch 1", err: "ERR CONFIG SET failed (possibly related to argument 'logfile') - can't set immutable config"},
		parseCase{line: "CONFIG SET nosuch 1 logfile x", err: "ERR Unknown option or number of arguments for CONFIG SET - 'nosuch'"},
		parseCase{line: "CONFIG SET maxmemory 1 MaxMemory 2 nosuch 3", err: "ERR CONFIG SET failed (possibly related to argument 'MaxMemory') - duplicate parameter"},
		parseCase{line: "CONFIG SET maxmemory 1 nosuch 2 x", err: string(errSyntax)},
		parseCase{line: "CONFIG RESETSTAT", want: configResetStatCmd{}},
		parseCase{line: "INFO", want: infoCmd{sections: []string{}}},
		parseCase{line: "INFO server ai", want: infoCmd{sections: []string{"server", "ai"}}},
		parseCase{line: "COMMAND", want: commandCmd{}},
		parseCase{line: "COMMAND COUNT", want: commandCountCmd{}},
		parseCase{line: "COMMAND LIST", want: commandListCmd{}},
		parseCase{line: "COMMAND INFO get ai.modelstore", want: commandInfoCmd{names: []string{"get", "ai.modelstore"}}},
		parseCase{line: "COMMAND DOCS ping", want: commandDocsCmd{names: []string{"ping"}}},
		parseCase{line: "COMMAND GETKEYS DEL a b", want: commandGetKeysCmd{keys: []string{"a", "b"}}},
		parseCase{line: "COMMAND GETKEYS", err: "ERR wrong number of arguments for 'command|getkeys' command"},
		parseCase{line: "COMMAND GETKEYS PING x", err: string(errGetKeysNoKeys)},
		parseCase{line: "CONFIG RESETSTAT x", err: "ERR wrong number of arguments for 'config|resetstat' command"},
		parseCase{line: "CLIENT KILL", err: "ERR wrong number of arguments for 'client|kill' command"},
	)
}
