// Command ledgerworker is a worker for fault tests. Its tool `ledger`
// records every execution in a ledger file outside NATS (one JSON line per
// event, appended with O_APPEND), so a test can count executions per call
// independently of what toolwire reports.
//
//	ledgerworker --nats-url URL --ledger FILE [worker flags]
//
// The ledger file may be given as LEDGER_FILE instead. `ledger_idem` is
// the same tool declared idempotent (reruns allowed); `poison` exits the
// worker process (status 137) on every delivery, for MaxDeliver tests.
package main
