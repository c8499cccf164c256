//go:build linux && cgo && !noort

package server

// The timer slack of the ONNX Runtime build's processes (the server and its
// engine workers). Linux lets each timed sleep of a thread end up to its
// timer slack late (50 µs by default), so that wake-ups coalesce. The Go
// runtime's sysmon thread sleeps 20 µs at a time while the process is busy
// and goes back to a long sleep each time every processor idles; a server
// answering one client at a time keeps waking it, and on a virtual machine
// whose idle vCPUs halt, each of those wake-ups is a VM exit on the other
// vCPU, the one the engine worker's run needs next. With a slack of 1 ms
// sysmon ticks about once a millisecond instead: MODELEXECUTE's p50 at one
// client fell by about 75 µs, and the server's CPU per one-client inference
// loop by a quarter (docs/BENCHMARKS.md, "Timer slack").
//
// Slack is a property of each thread, inherited by the threads it creates
// and kept across exec. Sysmon is the first thread the Go runtime creates,
// before any Go code runs, so only a C constructor, run as the process is
// loaded, can set it in time; every later thread inherits it. Go's own
// timers already round short waits up to a millisecond in the network
// poller; with the slack they may fire up to 1 ms later still.
//
// ENCLAVEAI_TIMER_SLACK_NS=n sets another slack (50000 is the kernel's
// default); an engine worker keeps the one it inherited from the server.
// The enclave build (noort) leaves the slack to EGo.

/*
#include <stdlib.h>
#include <sys/prctl.h>

#define ENCLAVEAI_TIMER_SLACK_NS 1000000L

__attribute__((constructor)) static void enclaveai_timer_slack(void) {
	if (getenv("ENCLAVEAI_ENGINE_WORKER") != NULL)
		return;
	long ns = ENCLAVEAI_TIMER_SLACK_NS;
	const char *s = getenv("ENCLAVEAI_TIMER_SLACK_NS");
	if (s != NULL && *s != '\0') {
		char *end;
		ns = strtol(s, &end, 10);
		if (*end != '\0' || ns <= 0)
			return;
	}
	prctl(PR_SET_TIMERSLACK, ns, 0, 0, 0);
}
*/
import "C"
