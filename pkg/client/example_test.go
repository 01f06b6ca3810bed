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

func ExampleClient_Call() {
	// A real dispatcher with an embedded JetStream server and the
	// built-in tools, as `dispatcher` runs with no configuration.
	baseURL, stop := startDispatcher()
	defer stop()

	c, err := client.New(baseURL)
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	res, err := c.Call(ctx, "echo", map[string]string{"text": "hello, toolwire"})
	if err != nil {
		log.Fatal(err) // transport error, or still pending
	}
	if err := res.Err(); err != nil {
		log.Fatal(err) // the tool answered with an error
	}
	fmt.Println(res.Text())

	res, err = c.Call(ctx, "echo", map[string]any{"text": 42})
	if err != nil {
		log.Fatal(err)
	}
	var te *client.ToolError
	if errors.As(res.Err(), &te) {
		fmt.Println(client.TypeName(te.Type), te.Violations[0].GetField(), te.Violations[0].GetMessage())
	}
	// Output:
	// hello, toolwire
	// VALIDATION /text got number, want string
}

// startDispatcher runs dispatchd.Run on a loopback port with its data in a
// temporary directory, and returns the API's base URL and a function that
// stops it.
func startDispatcher() (baseURL string, stop func()) {
	dir, err := os.MkdirTemp("", "toolwire-example-")
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- dispatchd.Run(ctx, dispatchd.RunConfig{DataDir: dir, HTTPAddr: "127.0.0.1:0", Tools: builtin.Tools(),
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

// The dispatcher's reference applier keeps the session state: the tool
// asks for a change (an intent), Call applies it to the session.
func ExampleWithApplyIntents() {
	baseURL, stop := startDispatcher()
	defer stop()
	c, err := client.New(baseURL)
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	res, err := c.Call(ctx, "remember", map[string]any{"key": "city", "value": "Lisbon"},
		client.WithSession("session-42"), client.WithApplyIntents())
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Text(), res.Session.GetStateJson()["city"])

	// Applying the same call's intents again changes nothing.
	_, applied, err := c.ApplyIntents(ctx, res.CallID)
	if err != nil {
		log.Fatal(err)
	}
	sess, err := c.GetSession(ctx, "session-42")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(applied, sess.GetRevision(), len(sess.GetLog()))
	// Output:
	// remembered city "Lisbon"
	// 0 1 1
}

// An orchestrator that keeps its own state applies intents itself.
func ExampleResult_ApplyTo() {
	baseURL, stop := startDispatcher()
	defer stop()
	c, err := client.New(baseURL)
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	state := map[string]string{}
	applier := client.Once(client.ApplierFunc(func(_ context.Context, _ string, in *toolwirev1.Intent) error {
		if in.GetType() != tool.IntentSetState {
			return nil // this orchestrator ignores the others
		}
		var p client.SetState
		if err := client.Payload(in, &p); err != nil {
			return err
		}
		state[p.Key] = string(p.Value)
		return nil
	}), 0)

	res, err := c.Call(ctx, "remember", map[string]any{"key": "step", "value": 1})
	if err != nil {
		log.Fatal(err)
	}
	// A result seen twice (at-least-once delivery) applies once.
	for range 2 {
		if err := res.ApplyTo(ctx, applier); err != nil {
			log.Fatal(err)
		}
	}
	fmt.Println(state)
	// Output:
	// map[step:1]
}
