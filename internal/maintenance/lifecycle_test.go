package maintenance_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/toolwire/toolwire/internal/maintenance"
	"github.com/toolwire/toolwire/internal/startstop"
)

// Every service keeps the startstop contract: Start and Stop are
// idempotent, Stop before Start is harmless, a stopped service does not
// start again; a configuration that does not validate is refused.
func TestServicesKeepTheContract(t *testing.T) {
	t.Parallel()
	s := setup(t)
	services := map[string]func(maintenance.Config) startstop.Service{
		"reaper":      func(c maintenance.Config) startstop.Service { return maintenance.NewReaper(c) },
		"mover":       func(c maintenance.Config) startstop.Service { return maintenance.NewMover(c) },
		"dlq retries": func(c maintenance.Config) startstop.Service { return maintenance.NewDLQRetries(c) },
		"sweeper": func(c maintenance.Config) startstop.Service {
			return maintenance.NewSweeper(maintenance.SweeperConfig{Config: c})
		},
		"sweeper, never": func(c maintenance.Config) startstop.Service {
			return maintenance.NewSweeper(maintenance.SweeperConfig{Config: c, Every: -1})
		},
		"overdue sweeper": func(c maintenance.Config) startstop.Service {
			return maintenance.NewOverdueSweeper(maintenance.OverdueConfig{Config: c})
		},
	}
	ctx := t.Context()
	for name, newService := range services {
		svc := newService(s.cfg)
		require.NoError(t, svc.Start(ctx), name)
		require.NoError(t, svc.Start(ctx), name)
		require.NoError(t, svc.Stop(ctx), name)
		require.NoError(t, svc.Stop(ctx), name)
		require.ErrorIs(t, svc.Start(ctx), startstop.ErrStopped, name)

		never := newService(s.cfg)
		require.NoError(t, never.Stop(ctx), name)
		require.ErrorIs(t, never.Start(ctx), startstop.ErrStopped, name)

		require.ErrorContains(t, newService(maintenance.Config{Name: "x"}).Start(ctx), "Bus", name)
		require.ErrorContains(t, newService(maintenance.Config{Bus: s.b}).Start(ctx), "Name", name)
	}
	require.ErrorContains(t, maintenance.NewSweeper(maintenance.SweeperConfig{Config: s.cfg, Grace: -1}).Start(ctx), "Grace")
	require.ErrorContains(t, maintenance.NewOverdueSweeper(maintenance.OverdueConfig{Config: s.cfg,
		OverdueSettings: maintenance.OverdueSettings{Grace: -1}}).Start(ctx), "Grace")
	slow := s.cfg
	slow.RetryDelay, slow.MaxRetryDelay = time.Minute, time.Second
	require.ErrorContains(t, maintenance.NewReaper(slow).Start(ctx), "MaxRetryDelay")
}
