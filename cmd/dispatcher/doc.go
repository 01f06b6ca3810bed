// Command dispatcher is toolwire's API server. With no flags it starts an
// embedded NATS server (data under ./data), an in-process worker pool for
// every executor type with the built-in tools and the example tools, and
// serves the API on 127.0.0.1:8080. With --nats-url it joins an external
// cluster.
//
// The flags (each also settable as TOOLWIRE_<FLAG>) and the exit statuses
// are those of internal/dispatchd's Main. The binary is also the sandbox
// executor's helper, which the in-process sandbox pool re-executes.
package main
