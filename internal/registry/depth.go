package registry

// JSONDepth returns the deepest nesting of objects and arrays in b,
// stopping once it passes limit. It does not validate the JSON; it keeps
// deep documents away from decoders.
func JSONDepth(b []byte, limit int) int {
	_, deepest := JSONShape(b, int(^uint(0)>>1), limit)
	return deepest
}

// JSONShape counts the members and elements of JSON text (the separators
// and the containers outside strings: an empty container counts once) and
// its deepest nesting, stopping as soon as either passes its limit. It
// allocates nothing.
func JSONShape(b []byte, maxValues, maxDepth int) (values, deepest int) {
	depth := 0
	inString, escaped := false, false
	for _, c := range b {
		if inString {
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case '{', '[':
			depth++
			if depth > deepest {
				if deepest = depth; deepest > maxDepth {
					return values, deepest
				}
			}
			fallthrough
		case ',':
			if values++; values > maxValues {
				return values, deepest
			}
		case '}', ']':
			depth--
		}
	}
	return values, deepest
}
