// Package worker runs ONNX Runtime in supervised worker processes: an
// engine (modelstore.Engine) whose sessions live in child processes of the
// server, so that a model that crashes, hangs or bloats native code takes
// down one worker, never the server. The server never loads ONNX Runtime.
//
// The worker is the server's own binary re-executed with
// ENCLAVEAI_ENGINE_WORKER=1 (the main calls Main when IsWorker). It talks
// to the server over SOCK_SEQPACKET socket pairs (proto.go; runs on lanes
// of their own, lane.go): compile
// a model whose bytes it maps read-only from the server's memfd (the
// upload buffer itself, modelstore.ModelBuffer.FD: one copy of the model
// for both processes); run a session on tensors that travel in the
// message when small and in a memfd when large; cancel; close.
//
// The Pool supervises: a worker that dies (any signal, any exit, its
// RLIMIT_DATA, an overrun deadline) is reaped and replaced, its calls in
// flight fail with "engine worker died (SIGSEGV)", the cause as the kernel
// gave it (never as the worker wrote it: classify), the model that was
// running on it when it crashed is quarantined, and its other sessions
// are recreated in the replacement from their shared buffers. docs/ENGINE_ISOLATION.md
// gives the threat model.
//
// Lock order (server side; docs/LOCKS.md has every lock of the server):
// Pool.mu before slot.mu; session.mu before proc.mu. slot.mu and proc.mu
// are never held while taking another lock, and no lock is held while
// waiting for a worker's reply, except session.mu during a (re)compile of
// that session, which its own runs wait for anyway. The callers' locks (the keyspace's, the registry's) are
// never held across Engine or EngineSession calls (modelstore's rule).
package worker
