package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime/pprof"
)

// Measure runs one measurement of cfg.Path on a fresh embedded server and
// stops everything it started before it returns.
func Measure(ctx context.Context, cfg Config) (Result, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return Result{}, err
	}
	var p payloads
	if cfg.Path == PathBaseline {
		var err error
		if p, err = capturePayloads(ctx, cfg); err != nil {
			return Result{}, err
		}
	}
	return measure(ctx, cfg, p)
}

// measure is Measure with the baseline's payloads already captured.
func measure(ctx context.Context, cfg Config, p payloads) (r Result, err error) {
	e, err := startEnv(ctx, cfg)
	if err != nil {
		return r, err
	}
	defer func() { err = errors.Join(err, e.close()) }()

	var call callFunc
	if cfg.Path == PathBaseline {
		b, err := startBaseline(ctx, e, p, cfg.workerConcurrency())
		if err != nil {
			return r, err
		}
		defer func() { err = errors.Join(err, b.stop()) }()
		call = b.call
	} else {
		s, err := startStack(ctx, e, stackOptions{worker: cfg.workerConcurrency(), http: cfg.Path == PathHTTP})
		if err != nil {
			return r, err
		}
		defer func() { err = errors.Join(err, s.stop()) }()
		call = s.callNATS
		if cfg.Path == PathHTTP {
			call = s.callHTTP
		}
	}

	if cfg.Warmup > 0 {
		if _, _, err := drive(ctx, cfg.InFlight, cfg.Warmup, call); err != nil {
			return r, fmt.Errorf("bench: %s warm-up: %w", cfg.system(), err)
		}
	}
	stopProfile, err := startProfile(cfg.CPUProfile)
	if err != nil {
		return r, err
	}
	meter := startCPU()
	lat, wall, err := drive(ctx, cfg.InFlight, cfg.Calls, call)
	cpu := meter.since()
	if perr := stopProfile(); err == nil {
		err = perr
	}
	if err != nil {
		return r, fmt.Errorf("bench: %s: %w", cfg.system(), err)
	}
	return summarise(cfg.system(), cfg.InFlight, lat, wall, cpu), nil
}

// startProfile starts a CPU profile into path ("" = none) and returns the
// function that ends it.
func startProfile(path string) (func() error, error) {
	if path == "" {
		return func() error { return nil }, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("bench: cpu profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		return nil, errors.Join(fmt.Errorf("bench: cpu profile: %w", err), f.Close())
	}
	return func() error {
		pprof.StopCPUProfile()
		return f.Close()
	}, nil
}
