package bus

import "strings"

// SubjectMatches reports whether subject (literal tokens) is matched by
// filter, with NATS wildcards: "*" matches one token, a final ">" one or
// more.
func SubjectMatches(filter, subject string) bool {
	for {
		f, fRest, fMore := strings.Cut(filter, ".")
		s, sRest, sMore := strings.Cut(subject, ".")
		switch {
		case f == ">" && !fMore:
			return s != ""
		case f != "*" && f != s, s == "":
			return false
		case !fMore || !sMore:
			return fMore == sMore
		}
		filter, subject = fRest, sRest
	}
}

// FiltersOverlap reports whether some subject matches both filters.
func FiltersOverlap(a, b string) bool { return subjectsOverlap(a, b) }
