package intents

import (
	"context"
	"errors"
	"fmt"

	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// MaxPins bounds the spec versions one session pins (one per tool name):
// past it, a call that would pin one more tool is refused (ErrTooManyPins)
// until ClearPins frees some.
const MaxPins = 256

// ErrTooManyPins: the session pins MaxPins tools already.
var ErrTooManyPins = errors.New("intents: the session pins too many tools")

// Pin pins version as the spec version of tool's calls in a session
// (Session.pinned_versions), by compare-and-set, unless the session pins
// a version of tool already: the first pin stands, so two replicas racing
// to pin different versions agree on one. It returns the version pinned
// (the one given or the one already there) and the session. Pinning one
// tool more than MaxPins is ErrTooManyPins. The pin is not an intent: it
// is not logged, and it bumps the revision like any change.
func (a *Applier) Pin(ctx context.Context, tenant, session, tool, version string) (string, *toolwirev1.Session, error) {
	if session == "" || tool == "" || version == "" {
		return "", nil, errors.New("intents: a pin needs a session, a tool and a version")
	}
	var pinned string
	var out *toolwirev1.Session
	err := a.modify(ctx, tenant, session, func(s *toolwirev1.Session) (bool, error) {
		out = s
		if v, ok := s.PinnedVersions[tool]; ok {
			pinned = v
			return false, nil
		}
		if len(s.PinnedVersions) >= MaxPins {
			return false, fmt.Errorf("%w: %d, at most %d (clear the pins of the session to pin again)", ErrTooManyPins, len(s.PinnedVersions), MaxPins)
		}
		if s.PinnedVersions == nil {
			s.PinnedVersions = map[string]string{}
		}
		s.PinnedVersions[tool], pinned = version, version
		s.Revision++
		s.UpdatedAt = timestamppb.Now()
		return true, nil
	})
	if err != nil {
		return "", nil, err
	}
	return pinned, out, nil
}

// ClearPins clears the spec versions a session pins: tool's, or every
// tool's when tool is "". The session's next call of a tool pins the
// version current then. Clearing what is not pinned changes nothing.
func (a *Applier) ClearPins(ctx context.Context, tenant, session, tool string) (*toolwirev1.Session, error) {
	if session == "" {
		return nil, errors.New("intents: no session to clear the pins of")
	}
	var out *toolwirev1.Session
	err := a.modify(ctx, tenant, session, func(s *toolwirev1.Session) (bool, error) {
		out = s
		n := len(s.PinnedVersions)
		if tool == "" {
			s.PinnedVersions = nil
		} else {
			delete(s.PinnedVersions, tool)
		}
		if len(s.PinnedVersions) == n {
			return false, nil
		}
		s.Revision++
		s.UpdatedAt = timestamppb.Now()
		return true, nil
	})
	return out, err
}
