package configvalue

import (
	"encoding/json"
	"fmt"
	"time"
)

// Duration is a time.Duration written as a Go duration string ("30s",
// "1m30s") in JSON and YAML. Bare numbers are refused: "30" would be
// nanoseconds, never what anyone meant.
type Duration time.Duration

// String is the Go notation.
func (d Duration) String() string { return time.Duration(d).String() }

// MarshalJSON writes the Go notation as a string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

// UnmarshalJSON reads a duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration %s: want a string such as \"30s\"", b)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("duration %q: %w", s, err)
	}
	*d = Duration(v)
	return nil
}
