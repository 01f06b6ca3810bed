// Package bustest starts a real embedded JetStream server for tests: a
// t.TempDir() store, a random loopback port, and the toolwire layout in
// place. It never mocks NATS. Everything stops when the test ends.
package bustest
