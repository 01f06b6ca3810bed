// Package logtest helps tests read what a component logged: Buffer is a
// log sink safe for concurrent writes, and its JSONLogger logs JSON lines
// at debug level into it.
package logtest
