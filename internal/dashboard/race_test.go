//go:build race

package dashboard

// raceDetector reports whether the tests run with the race detector,
// which makes the dispatcher many times slower and starves the browser of
// CPU on a small machine.
const raceDetector = true
