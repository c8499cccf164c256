package modelstore

import "sync/atomic"

// queued counts the requests in every run queue's Run, waiting or
// running; working the clients whose commands the server executes now
// (BeginWork, EndWork). Alone reads both.
var queued, working atomic.Int32

// BeginWork and EndWork bracket the time the server executes a client's
// commands: the network front end calls BeginWork once a command has
// arrived and EndWork once it has answered all that the client sent
// (only while engine-reply-poll is on: nothing else reads it).
func BeginWork() { working.Add(1) }

// EndWork: see BeginWork.
func EndWork() { working.Add(-1) }

// Alone reports whether a run is all the server is doing: one client's
// commands executing, and one request in the run queues, waiting or
// running. An engine may then spend CPU that nothing else wants to answer
// it sooner (the engine workers' lanes poll for the reply).
func Alone() bool { return working.Load() == 1 && queued.Load() == 1 }
