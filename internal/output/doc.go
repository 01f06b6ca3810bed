// Package output defines a call's output text and reads it back in
// bounded pieces.
//
// The output text of a response (Text) is its text blocks joined by
// newlines, or its structured JSON when it has no text block: what a
// tool's limits.max_output_bytes and max_output_lines bound inline (the
// worker cuts it, keeping the head or the tail, and stores all of it in
// the blob store as "<call_id>.<attempt>.output.txt"), and what
// DispatcherService.GetOutput serves.
//
// Reads are bounded whatever is asked: Read returns at most MaxLimit bytes
// of a byte range, Grep the lines matching a pattern until MaxLimit bytes
// of them, matching a line longer than MaxLimit in pieces. Patterns are
// Go's RE2 syntax (matching time linear in the input: no backtracking),
// at most MaxPatternBytes long and MaxPatternInsts compiled instructions
// (Compile). Both stream their input: memory stays bounded by MaxLimit
// however large the output is; time grows with the bytes before the range
// (the object store is read from its start), bounded by the caller's
// context (GetOutput: one minute). Measured on a busy 2-core machine over
// 64 MiB of log lines (BenchmarkGrepAndRead): Grep 50 MB/s for a literal
// alternation, 24 MB/s case-insensitive (Go's regexp; matching a whole
// chunk instead of line by line was no faster); Read skips at about
// 9 GB/s in memory.
package output
