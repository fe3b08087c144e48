//go:build race

package breakwater_test

// raceEnabled reports that the race detector is on: long loops shrink.
const raceEnabled = true
