package sessionview

import "time"

// DropWatch ends the View's watch as a subscription closed under it
// would (not Stop): the View sees it lost.
func (v *View) DropWatch() {
	v.mu.Lock()
	w := v.watcher
	v.mu.Unlock()
	if w != nil {
		_ = w.Stop()
	}
}

// Watching reports whether the View has a watch in place.
func (v *View) Watching() bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.watcher != nil
}

// SetRewatchEvery sets how often a lost watch is replaced, for a test.
func SetRewatchEvery(d time.Duration) { rewatchEvery = d }
