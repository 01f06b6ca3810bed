//go:build !race

package dashboard

// raceDetector reports whether the tests run with the race detector.
const raceDetector = false
