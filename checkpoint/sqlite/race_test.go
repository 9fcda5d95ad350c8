//go:build race

package sqlite

// raceEnabled: the race detector slows SQLite (C translated to Go) about
// tenfold; tests that only fill and read a large database skip under it.
const raceEnabled = true
