//go:build cgo && !noort

package main

import (
	"fmt"
	"strings"
)

// bounds are the least any server could spend on this machine, from
// figures of the same run: what rules a target out here, whatever the
// server does. Each assumes the cheapest of what was measured:
//   - the loop's three round trips cost a server at least what they cost
//     Redis (the floor's server CPU at 32 clients, its loop time at 1),
//     and the clients at least what the floor's clients spent. At one
//     client that holds only for a server that sleeps while it waits, as
//     Redis does: waking a sleeping thread on an idle CPU is dear here,
//     and a server that polls instead (engine-reply-poll) has beaten it;
//   - the model's run costs at least the cheapest in CPU of ORT's runs
//     back to back in this process (ort-1thr's, ort's and
//     ort-2thr-nospin's; ort-1thr-b32's and ort-b32's over 32 rows for a
//     batched kind, as if every batch were full), and takes at least the
//     faster of ort's and ort-1thr's p50;
//   - with the engine wall, a run crosses between two processes at least
//     once each way: the cheaper of section machine's process round trips,
//     in CPU (over 32 rows batched) and in latency;
//   - one call's run, alone, takes at least the faster of ort-1thr's and
//     ort-2thr-nospin's p50: the server's threads may not spin (issue 9),
//     and ort's pool does.
//
// At 32 clients more bounds follow, one for each front end that served
// the floor's loop in this run (frontEnds): the floor's server CPU
// replaced by that front end's. floor-go is a server written as
// EnclaveAI's front end is, a goroutine per connection, that does nothing
// else (gofloor.go); floor-ea is EnclaveAI itself, whose cost for the
// loop's three round trips no inference can lower. They are what that
// design and that server allow, not what the machine does: the verdict
// is the first bound's.
//
// The model's runs are timed just before each round's loops at each
// client count (loops.runs), so each round gives a bound from figures
// taken together, and a target's is the median over rounds, as its ratio
// is (the parts shown are each the median over rounds). The log's cost
// is left out, so the bounds hold for every kind.
type bounds struct {
	r                *report
	tripCPU, tripLat float64 // µs; 0 without section machine
}

func newBounds(r *report) *bounds {
	b := &bounds{r: r}
	if m := r.mach; m != nil {
		b.tripCPU = min(m.tripCPU["process-c"], m.tripCPU["process-go"])
		b.tripLat = min(m.trip["process-c"], m.trip["process-go"])
	}
	return b
}

// verdict is a bound's cell for a goal that best (the most this machine
// allows) must reach: out of reach when best misses it by more than
// margin, at the edge within it either way (the bounds rest on figures
// as noisy as the ones they bound), else not ruled out.
func verdict(best, goal float64, why string) string {
	const margin = 0.05
	switch {
	case best < goal*(1-margin):
		return "**out of reach**: " + why
	case best < goal*(1+margin):
		return "at the edge: " + why
	}
	return "not ruled out: " + why
}

// loop is the bound of a loop target: kind at clients ≥ goal times the
// floor. It is "" where this run lacks what the bound needs, or where no
// bound applies (client counts other than 1 and 32).
func (b *bounds) loop(kind string, clients int, goal float64) string {
	l := b.r.loops
	wall := !strings.Contains(kind, "-off")
	if l == nil || (clients != 1 && clients != 32) || (wall && b.tripLat == 0) {
		return ""
	}
	batched := strings.HasSuffix(kind, "batch32")
	fl := l.by[loopKey("floor", clients)]
	ort, one, b32 := l.runs[loopKey("ort", clients)], l.runs[loopKey("ort-1thr", clients)], l.runs[loopKey("ort-1thr-b32", clients)]
	rounds := min(len(fl), len(ort), len(one), len(b32))
	// cheapest is the least CPU a run of the kinds given took in round i
	// (a kind this run lacks, or one without CPU time, is left out).
	cheapest := func(i int, kinds ...string) float64 {
		least := 0.0
		for _, k := range kinds {
			if s := l.runs[loopKey(k, clients)]; i < len(s) && s[i].cpuPerOp > 0 {
				if c := us(s[i].cpuPerOp); least == 0 || c < least {
					least = c
				}
			}
		}
		return least
	}
	if rounds == 0 {
		return ""
	}
	// Per round: the floor's part, the run's, the round trip's, the
	// floor's clients' (32 clients) and the best ratio they allow.
	// fronts: each front end's floor run, and per round its server CPU
	// and the best ratio it allows (32 clients).
	fronts := make([]struct{ floor, best []float64 }, len(frontEnds))
	var floors, runs, trips, clientsCPU, bests []float64
	for i := range rounds {
		var floor, run, trip, client, best float64
		if clients == 32 {
			// Every CPU busy: a loop costs the server's CPU and the clients'.
			floor, client, run = us(fl[i].cpuPerOp), us(fl[i].clientPerOp), cheapest(i, "ort-1thr", "ort", "ort-2thr-nospin")
			if batched {
				run = cheapest(i, "ort-1thr-b32", "ort-b32") / batchSize
			}
			if wall {
				trip = b.tripCPU
				if batched {
					trip /= batchSize
				}
			}
			best = (floor + client) / (floor + run + trip + client)
			for k, fe := range frontEnds {
				if s := l.by[loopKey(fe.kind, clients)]; i < len(s) {
					g := us(s[i].cpuPerOp)
					fronts[k].floor = append(fronts[k].floor, g)
					fronts[k].best = append(fronts[k].best, (floor+client)/(g+run+trip+client))
				}
			}
		} else {
			// One loop at a time: its time is the floor's, the run's and
			// the wall's round trip, one after another.
			floor, run = 1e6/fl[i].rate(), min(us(ort[i].pct(0.5)), us(one[i].pct(0.5)))
			if wall {
				trip = b.tripLat
			}
			best = floor / (floor + run + trip)
		}
		floors, runs, trips = append(floors, floor), append(runs, run), append(trips, trip)
		clientsCPU, bests = append(clientsCPU, client), append(bests, best)
	}
	best := median(bests)
	f, run, trip := median(floors), median(runs), median(trips)
	if clients == 32 {
		v := verdict(best, goal, fmt.Sprintf("at best %.2fx: a loop costs a server at least %.1f + %.1f + %.1f = %.1f µs of CPU, against the floor's %.1f and its clients' %.1f",
			best, f, run, trip, f+run+trip, f, median(clientsCPU)))
		for k, fe := range frontEnds {
			if len(fronts[k].best) > 0 {
				g := median(fronts[k].floor)
				v += fmt.Sprintf("; %s, at best %.2fx (%.1f + %.1f + %.1f = %.1f µs, %s's %.1f instead of the floor's)",
					fe.what, median(fronts[k].best), g, run, trip, g+run+trip, fe.kind, g)
			}
		}
		return v
	}
	return verdict(best, goal, fmt.Sprintf("at best %.2fx for a server that sleeps while it waits, as Redis does (one that polls can do better): a loop takes at least %.0f + %.1f + %.1f = %.0f µs, against the floor's %.0f",
		best, f, run, trip, f+run+trip, f))
}

// frontEnds are the servers besides Redis that serve the floor's loop, in
// the order their 32-client bounds are given (bounds.loop).
var frontEnds = []struct{ kind, what string }{
	{"floor-go", "a Go server with a goroutine per connection"},
	{"floor-ea", "EnclaveAI's own front end"},
}

// modelExecute is the bound of MODELEXECUTE p50 ≤ PING p50 + ort p50 + 20
// µs, from the latency section's p50s (µs). ort is ORT's default, a pool
// that spins; issue 9's thread policy forbids ORT threads that spin
// against the network's, so a server's run takes at least the faster of
// ort-1thr's and ort-2thr-nospin's p50 (nospin), and with the wall it
// crosses between processes once each way.
func (b *bounds) modelExecute(ping, ort, nospin float64) string {
	if b.tripLat == 0 || nospin == 0 {
		return ""
	}
	least := ping + nospin + b.tripLat
	return verdict((ping+ort+20)/least, 1, fmt.Sprintf("a run whose threads do not spin takes at least %.1f µs (ort-1thr, ort-2thr-nospin), the wall's round trip between processes %.1f: at least %.1f + %.1f + %.1f = %.1f µs",
		nospin, b.tripLat, ping, nospin, b.tripLat, least))
}

// wall is the bound of issue 18's ≤ 15 µs for the engine wall.
func (b *bounds) wall() string {
	if b.tripLat == 0 {
		return ""
	}
	return verdict(15/b.tripLat, 1, fmt.Sprintf("a round trip between processes takes at least %.1f µs", b.tripLat))
}
