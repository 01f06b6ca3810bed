// Package dispatchtest starts a whole toolwire stack in-process for tests:
// a real embedded JetStream server (t.TempDir() store, random loopback
// port), an optional in-process worker pool, the registry watcher, a
// dispatcher with its policy holder (internal/policystore, unless the
// options give Config.Policies) and its Connect API on an httptest
// server, HTTP/1.1 and h2c on one listener as the dispatcher serves it (so
// that clients' HTTP/2 paths, e.g. the TypeScript SDK's httpVersion "2",
// are tested against it). Everything stops when the test ends.
//
// Components log warnings and errors through t.Log; TOOLWIRE_TEST_LOG
// (debug, info, ...) lowers the level.
package dispatchtest
