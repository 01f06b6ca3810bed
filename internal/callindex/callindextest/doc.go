// Package callindextest is the shared fixture of the benchmarks over a
// million calls (callindex's BenchmarkIndexQuery1M, the dashboard's
// BenchmarkCallsPage1M): one index of Calls synthetic calls of realistic
// cardinalities, filled once per test binary through the index's insert
// path (Index.Add), and how the benchmarks report latencies.
package callindextest
