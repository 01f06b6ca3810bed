// Package failpoint marks the boundaries where fault tests kill a worker:
// after a call is fetched, before and after its result is published. In
// normal builds Inject is an empty function the compiler removes; in
// builds with the `failpoints` tag it reads TOOLWIRE_FAILPOINTS
// ("name=action,..."; actions: exit (os.Exit(137), like kill -9 without
// running deferred code) and exit-once (only the first hit in this
// process)) and acts when a named point is reached.
package failpoint
