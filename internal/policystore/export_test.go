package policystore

import "time"

// DenyAllVersion is the version of the built-in policy a scope gets when
// its document cannot be loaded and it never had one.
var DenyAllVersion = denyAll.Version()

// SetPruneGrace sets how old an unreferenced document of s must be to be
// purged.
func SetPruneGrace(s *Store, d time.Duration) { s.grace = d }
