// Package faulttest is toolwire's fault harness: it builds and runs real
// processes — worker binaries and a nats-server built from the pinned
// module — drives load through a dispatcher, injects faults (kill -9,
// SIGTERM, server restarts), and checks a ledger in the manner of Jepsen's
// queue checker: every accepted call has exactly one terminal result
// (lost = accepted − terminal = 0, duplicates = 0), and executions per call
// are counted by the tool itself outside NATS (the ledgerworker command).
//
// Scenarios are ordinary tests in this package; a new one starts the
// processes it needs with the helpers here and asserts on Ledger.
package faulttest
