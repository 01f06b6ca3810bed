package client

import (
	"context"
	"fmt"

	"connectrpc.com/connect"

	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// ListPools lists the worker pools as the answering dispatcher last read
// them, with their pauses. It needs credentials with the "installation"
// scope.
func (c *Client) ListPools(ctx context.Context) ([]*toolwirev1.Pool, error) {
	resp, err := c.rpc.ListPools(ctx, connect.NewRequest(&toolwirev1.ListPoolsRequest{}))
	if err != nil {
		return nil, transportError("list pools", err)
	}
	return resp.Msg.GetPools(), nil
}

// PausePool pauses a pool for every dispatcher and worker until
// ResumePool: its workers are delivered no call, its queued calls wait,
// and new calls to it are refused OVERLOADED. The pause is recorded with
// the caller and reason. It needs the "admin" and "installation" scopes.
func (c *Client) PausePool(ctx context.Context, pool, reason string) (*toolwirev1.PausePoolResponse, error) {
	resp, err := c.rpc.PausePool(ctx, connect.NewRequest(&toolwirev1.PausePoolRequest{Pool: pool, Reason: reason}))
	if err != nil {
		return nil, transportError(fmt.Sprintf("pause pool %q", pool), err)
	}
	return resp.Msg, nil
}

// ResumePool ends a pool's pause: its queued calls run. It needs the
// "admin" and "installation" scopes.
func (c *Client) ResumePool(ctx context.Context, pool string) error {
	if _, err := c.rpc.ResumePool(ctx, connect.NewRequest(&toolwirev1.ResumePoolRequest{Pool: pool})); err != nil {
		return transportError(fmt.Sprintf("resume pool %q", pool), err)
	}
	return nil
}
