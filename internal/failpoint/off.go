//go:build !failpoints

package failpoint

// Inject is a no-op outside builds with the failpoints tag.
func Inject(string) {}
