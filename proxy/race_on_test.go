//go:build race

package proxy

// raceOn: the race detector is on, which adds allocations of its own and
// makes sync.Pool drop what it is given at random.
const raceOn = true
