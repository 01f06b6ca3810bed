// Package dispatchtest starts a whole toolwire stack in-process for tests:
// a real embedded JetStream server (t.TempDir() store, random loopback
// port), an optional in-process worker pool, the registry watcher, a
// dispatcher with its policy holder (internal/policystore, unless the
// options give Config.Policies) and its Connect API on an httptest
// server. Everything stops
// when the test ends.
//
// Components log warnings and errors through t.Log; TOOLWIRE_TEST_LOG
// (debug, info, ...) lowers the level.
package dispatchtest
