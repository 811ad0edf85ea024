//go:build race

package e2e

// raceEnabled makes the binary under test carry the race detector too when the
// tests themselves run with -race.
const raceEnabled = true
