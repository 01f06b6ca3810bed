package intents_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/bus/bustest"
	"github.com/toolwire/toolwire/internal/intents"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// listAll pages through q's listing, page size size, and returns the
// session ids in order and the number of pages.
func listAll(t *testing.T, env *bustest.Env, q intents.ListQuery) ([]string, int) {
	t.Helper()
	var ids []string
	for pages := 1; ; pages++ {
		page, err := intents.List(t.Context(), env.Bus.JS, env.Bus.Config.SessionsBucket(), q)
		if err != nil {
			t.Fatalf("list: %v", err)
		}
		for _, s := range page.Sessions {
			if s.GetTenant() != q.Tenant || len(s.GetLog()) != 0 || len(s.GetStateJson()) != 0 || len(s.GetApplied()) != 0 {
				t.Fatalf("listed session %+v: another tenant's, or with its log, state or applied keys", s)
			}
			ids = append(ids, s.GetSession())
		}
		if page.Next == "" {
			return ids, pages
		}
		if pages > 100 {
			t.Fatal("listing never ends")
		}
		q.PageToken = page.Next
	}
}

func TestListSessions(t *testing.T) {
	t.Parallel()
	env := bustest.Start(t, bus.Config{})
	a := intents.NewApplier(env.Bus.Sessions, intents.ApplierConfig{})
	calls := 0
	apply := func(tenant, session string, in ...*toolwirev1.Intent) {
		t.Helper()
		calls++
		r := declared(fmt.Sprint("c", calls), in)
		r.SetsMode = true
		if _, err := a.Apply(t.Context(), tenant, session, r); err != nil {
			t.Fatalf("apply: %v", err)
		}
	}
	// acme: s0..s6; s1 and s4 ended, s2 and s5 in mode voice; a session id
	// that is no plain token (its key is hashed). other: two sessions.
	for i := range 7 {
		in := []*toolwirev1.Intent{intent("i", intents.SetState, `{"key":"k","value":1}`)}
		switch i % 3 {
		case 1:
			in = append(in, intent("e", intents.EndSession, `{"reason":"bye"}`))
		case 2:
			in = append(in, intent("m", intents.SetMode, `{"mode":"voice"}`))
		}
		apply("acme", fmt.Sprintf("s%d", i), in...)
	}
	apply("acme", "a session/with.dots", intent("i", intents.Notify, `{"message":"hi"}`))
	apply("other", "o1", intent("i", intents.Notify, `{"message":"hi"}`))
	apply("other", "s0", intent("i", intents.Notify, `{"message":"hi"}`))
	// s0 updated last: it moves to the end of the update order.
	apply("acme", "s0", intent("i", intents.Notify, `{"message":"again"}`))

	all := []string{"s1", "s2", "s3", "s4", "s5", "s6", "a session/with.dots", "s0"}
	cases := []struct {
		name  string
		q     intents.ListQuery
		want  []string
		pages int
	}{
		{"All", intents.ListQuery{Tenant: "acme"}, all, 1},
		{"Paged", intents.ListQuery{Tenant: "acme", PageSize: 3}, all, 3},
		{"Ended", intents.ListQuery{Tenant: "acme", State: toolwirev1.SessionStateFilter_SESSION_STATE_FILTER_ENDED}, []string{"s1", "s4"}, 1},
		{"Active", intents.ListQuery{Tenant: "acme", State: toolwirev1.SessionStateFilter_SESSION_STATE_FILTER_ACTIVE, PageSize: 2},
			[]string{"s2", "s3", "s5", "s6", "a session/with.dots", "s0"}, 3},
		{"Mode", intents.ListQuery{Tenant: "acme", Mode: "voice"}, []string{"s2", "s5"}, 1},
		{"OtherTenant", intents.ListQuery{Tenant: "other"}, []string{"o1", "s0"}, 1},
		{"NoSessions", intents.ListQuery{Tenant: "nobody"}, nil, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, pages := listAll(t, env, c.q)
			if !slices.Equal(got, c.want) || pages != c.pages {
				t.Fatalf("listed %q in %d pages, want %q in %d", got, pages, c.want, c.pages)
			}
		})
	}

	t.Run("BadToken", func(t *testing.T) {
		for _, tok := range []string{"x", "0", "-1"} {
			_, err := intents.List(t.Context(), env.Bus.JS, env.Bus.Config.SessionsBucket(), intents.ListQuery{Tenant: "acme", PageToken: tok})
			if !errors.Is(err, intents.ErrBadPageToken) {
				t.Fatalf("token %q: %v, want ErrBadPageToken", tok, err)
			}
		}
	})
	t.Run("BadTenant", func(t *testing.T) {
		if _, err := intents.List(t.Context(), env.Bus.JS, env.Bus.Config.SessionsBucket(), intents.ListQuery{Tenant: "a.>"}); err == nil {
			t.Fatal("a tenant that is no token was listed")
		}
	})
}

// The first END_SESSION applied to a session stands: a later one is
// logged but changes neither the state nor the reason.
func TestEndSessionFirstReasonStands(t *testing.T) {
	t.Parallel()
	a := newApplier(t)
	for i, reason := range []string{"first", "second"} {
		r := declared(fmt.Sprint("c", i), []*toolwirev1.Intent{intent("e", intents.EndSession, `{"reason":"`+reason+`"}`)})
		if _, err := a.Apply(t.Context(), "acme", "s", r); err != nil {
			t.Fatal(err)
		}
	}
	s, err := a.Get(t.Context(), "acme", "s")
	if err != nil || !s.GetEnded() || s.GetEndReason() != "first" || len(s.GetLog()) != 2 {
		t.Fatalf("session %+v, %v: want ended for the first reason, both intents logged", s, err)
	}
}
