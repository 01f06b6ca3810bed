// Package dispatchdtest runs a whole dispatcher process's body
// (dispatchd.Run) inside a test: started on a random loopback port,
// waited on until it is ready, and stopped when the test ends, with Run's
// error failing the test.
//
// It exists so that every test of a whole dispatcher starts, waits and
// stops it the same way (the dispatchd, mcpserver and other faces' tests).
package dispatchdtest
