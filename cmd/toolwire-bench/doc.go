// Command toolwire-bench measures toolwire end to end (calls/s and latency
// percentiles of the echo tool, through the dispatcher core over NATS and
// through the Connect API over HTTP) against a raw JetStream baseline doing
// the same round trip (jetstream-raw, -path baseline). See internal/bench
// and BENCHMARKS.md.
//
//	toolwire-bench -suite                          # the whole suite, a markdown report
//	toolwire-bench -path nats -inflight 64 -n 20000  # one measurement, ending with a RESULT line
//	toolwire-bench -attack                         # hostile requests: time to refusal and dispatcher memory
//	toolwire-bench -overload                       # 10x a pool's capacity for 60s: accepted, refused, expired, recovery
//	toolwire-bench -shaped                         # profile, toolset and chain in force against plain calls (http path, 3 pairs)
package main
