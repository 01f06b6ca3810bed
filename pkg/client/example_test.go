package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"os"
	"time"

	"github.com/toolwire/toolwire/internal/dispatch"
	"github.com/toolwire/toolwire/internal/tools/builtin"
	"github.com/toolwire/toolwire/pkg/client"
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

// startDispatcher runs dispatch.Run on a loopback port with its data in a
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
		done <- dispatch.Run(ctx, dispatch.RunConfig{DataDir: dir, HTTPAddr: "127.0.0.1:0", Tools: builtin.Tools(),
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
