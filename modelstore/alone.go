package modelstore

import (
	"sync/atomic"
	"time"
)

// queued counts the requests in every run queue's Run, waiting or
// running; working the clients whose commands the server executes now
// (BeginWork, EndWork). lastClient is the client whose commands arrived
// last and switched when another client's did (sinceStart). Alone reads
// them all.
var (
	queued, working      atomic.Int32
	lastClient, switched atomic.Int64
)

// start is the origin of sinceStart.
var start = time.Now()

// sinceStart is the monotonic clock in nanoseconds.
func sinceStart() int64 { return int64(time.Since(start)) }

// SoloAfter is how long one client must have been the only one sending
// commands before a run counts as alone: a server with several clients
// never polls, though their commands may take turns without overlapping.
const SoloAfter = 10 * time.Millisecond

// BeginWork and EndWork bracket the time the server executes a client's
// commands: the network front end calls BeginWork with the client's id
// once a command has arrived and EndWork once it has answered all that
// the client sent.
func BeginWork(client int64) {
	working.Add(1)
	if lastClient.Load() != client {
		lastClient.Store(client)
		switched.Store(sinceStart())
	}
}

// EndWork: see BeginWork.
func EndWork() { working.Add(-1) }

// Requests is the number of runs requested and not yet answered, waiting
// or running: INFO's blocked_clients, as Redis counts the clients that
// RedisAI blocks for their runs.
func Requests() int64 { return int64(queued.Load()) }

// Busy reports whether the commands of more than one client are executing
// now (the append-only log groups their records into one write).
func Busy() bool { return working.Load() > 1 }

// Alone reports whether a run is all the server is doing: one client has
// been the only one to send commands for SoloAfter, its commands are
// executing, and one request is in the run queues, waiting or running. An
// engine may then spend CPU that nothing else wants to answer it sooner
// (the engine workers' lanes poll, docs/ENGINE_ISOLATION.md).
func Alone() bool {
	return working.Load() == 1 && queued.Load() == 1 && sinceStart()-switched.Load() >= int64(SoloAfter)
}
