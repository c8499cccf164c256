//go:build !race

package commands

// raceEnabled: the race detector is off (race_test.go).
const raceEnabled = false
