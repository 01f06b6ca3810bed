package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"os"
	"time"

	"github.com/toolwire/toolwire/internal/builtin"
	"github.com/toolwire/toolwire/internal/dispatchd"
	"github.com/toolwire/toolwire/pkg/client"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// A call of a tool that requires approval is parked: Call returns an
// *ApprovalRequiredError with the approval id. An approver (the "approve"
// scope; open access holds every scope) approves it, and the call runs;
// its result is fetched by the same id.
func ExampleApprovalRequiredError() {
	deploy := tool.Must(tool.New("deploy", func(_ context.Context, in struct {
		Service string `json:"service"`
	}) (string, error) {
		return "deployed " + in.Service, nil
	}, tool.RequiresApproval()))
	baseURL, stop := startDispatcherWith(deploy)
	defer stop()
	c, err := client.New(baseURL)
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	_, err = c.Call(ctx, "deploy", map[string]string{"service": "billing"})
	var ask *client.ApprovalRequiredError
	if !errors.As(err, &ask) {
		log.Fatalf("want an approval request, got %v", err)
	}
	fmt.Println("needs approval:", ask.ApprovalID == ask.CallID, client.TypeName(ask.Err.Type))

	pending, _, err := c.ListApprovals(ctx, client.ApprovalFilter{State: toolwirev1.ApprovalState_APPROVAL_STATE_PENDING})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("pending:", len(pending), pending[0].GetTool(), pending[0].GetArgumentsJson())

	a, _, err := c.Approve(ctx, ask.ApprovalID, client.WithReason("release window"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("approval:", client.ApprovalStateName(a.GetState()))
	res, err := c.GetResult(ctx, ask.CallID, 20*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Text())
	// Output:
	// needs approval: true CONFIRMATION_REQUIRED
	// pending: 1 deploy {"service":"billing"}
	// approval: APPROVED
	// deployed billing
}

// startDispatcherWith is startDispatcher with tools besides the built-in
// ones.
func startDispatcherWith(tools ...*tool.Tool) (baseURL string, stop func()) {
	dir, err := os.MkdirTemp("", "toolwire-example-")
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- dispatchd.Run(ctx, dispatchd.RunConfig{DataDir: dir, HTTPAddr: "127.0.0.1:0", Tools: append(builtin.Tools(), tools...),
			Ready: ready, Logger: slog.New(slog.DiscardHandler)})
	}()
	select {
	case addr := <-ready:
		baseURL = "http://" + addr
	case err := <-done:
		log.Fatal(err)
	}
	return baseURL, func() {
		cancel()
		if err := <-done; err != nil {
			log.Print(err)
		}
		_ = os.RemoveAll(dir)
	}
}
