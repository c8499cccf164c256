//go:build race

package commands

// raceEnabled: the race detector is on. sync.Pool then drops a share of
// what is put in it on purpose, so the tests of allocations through a
// pool do not hold.
const raceEnabled = true
