// Package shellquote quotes a string as one word of a POSIX shell, for
// the commands toolwire shows people to copy: the dashboard's "Copy as
// toolctl" and "Copy as curl", and the `toolctl session repin SESSION
// TOOL` hints of the dispatcher and the worker. Nothing in toolwire runs
// such a command (never `sh -c`); the quoting keeps a name a caller
// chose (a session name may hold spaces, `;`, `$()`, quotes) one word of
// the command a person pastes, so that it neither breaks the command nor
// runs anything of its own.
//
// Decisions: one function in one small package, shared, rather than a
// copy per package; a word of only characters no shell treats specially
// stays bare (readable hints), anything else goes in single quotes, each
// single quote in it written as close quote, backslash, quote, open
// quote (the one character single quotes cannot hold). Control and format characters are quoted like any other:
// a caller that must not show them (the dashboard withholds a command
// holding one) checks for them itself.
package shellquote
