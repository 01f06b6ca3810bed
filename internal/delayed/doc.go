// Package delayed publishes records that only matter for slow work: a record
// is added when the work starts and published after a fixed delay unless
// the work finished first. One goroutine per Queue replaces a timer per
// record on the hot path.
//
// The queue checks every quarter of its delay (at most once a
// millisecond), so a record is published about one to one and a quarter
// delays after it was added. Record.Flush publishes it at once and
// Record.Stop makes sure it never is; after Queue.Stop the queue publishes
// nothing more (a record can still be flushed by its holder).
package delayed
