package jsonvalue

// CanonicalNumber returns the canonical text of one JSON number (doc.go,
// "The canonical form"): text must be a number in JSON's grammar, alone
// (ErrSyntax otherwise), with an exponent Parse accepts (ErrNumberRange
// otherwise). Policy documents use it to write the numbers of YAML as
// JSON.
func CanonicalNumber(text string) (string, error) {
	if err := checkNumber(text); err != nil {
		return "", err
	}
	return string(appendCanonicalNumber(nil, text)), nil
}

// NativeNumber returns the native form of one JSON number (Doc.Native):
// an int64 when it is whole and fits, else a float64. It refuses what
// CanonicalNumber refuses.
func NativeNumber(text string) (any, error) {
	if err := checkNumber(text); err != nil {
		return nil, err
	}
	return nativeNumber(text), nil
}

// checkNumber refuses text that is not exactly one number Parse accepts.
func checkNumber(text string) error {
	p := parser{data: []byte(text)}
	if len(text) == 0 || (text[0] != '-' && (text[0] < '0' || text[0] > '9')) {
		return p.unexpected("looking for beginning of value")
	}
	if _, err := p.number(); err != nil {
		return err
	}
	if p.pos < len(p.data) {
		return p.unexpected("after top-level value")
	}
	return nil
}

// AppendCanonicalString appends s as a canonical JSON string (doc.go,
// "The canonical form"). s should be valid UTF-8: its bytes are copied
// as they are.
func AppendCanonicalString(dst []byte, s string) []byte {
	return appendCanonicalString(dst, s)
}
