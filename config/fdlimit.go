package config

import (
	"fmt"
	"syscall"
)

// ReservedFDs is how many file descriptors the server keeps for its own
// (listeners, the log's and snapshot's files, engine workers' sockets,
// models' memory files), as Redis keeps 32.
const ReservedFDs = 128

// ClientsLimit is the most clients the process's open-file limit leaves
// room for beside ReservedFDs (at least 1), and the limit itself; ok is
// false where the limit is not known (an enclave) or there is none.
func ClientsLimit() (fit int64, limit uint64, ok bool) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil || lim.Cur > 1<<31 {
		return 0, 0, false
	}
	return max(int64(lim.Cur)-ReservedFDs, 1), lim.Cur, true
}

// clientsFit refuses, at CONFIG SET, a maxclients the open-file limit
// cannot hold, as Redis does (at start the server lowers it instead,
// server.fitMaxClients). Past it, connections were not refused with "max
// number of clients reached" but left unanswered, and took the
// descriptors the log and snapshots need (operator review).
func clientsFit(v string) error {
	n, err := parseNumber(v, false)
	if err != nil {
		return nil // the directive's own check says why
	}
	if fit, _, ok := ClientsLimit(); ok && n > fit {
		//lint:ignore ST1005 Redis's own text, which clients compare
		return fmt.Errorf("The operating system is not able to handle the specified number of clients, try with %d", fit)
	}
	return nil
}
