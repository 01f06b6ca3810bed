// Package bustest starts a real embedded JetStream server for tests: a
// t.TempDir() store, a random loopback port, and the toolwire layout in
// place. It never mocks NATS. Everything stops when the test ends.
//
// The listener requires credentials, as every embedded listener does:
// Env.URL carries the password of a test user with every permission, so
// second connections and worker processes dial it as they are.
package bustest
