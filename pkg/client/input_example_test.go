package client_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/toolwire/toolwire/pkg/client"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// A tool that needs its caller's input first answers tool.NeedInput; the
// caller asks its user, then calls again with the same tool and arguments
// and WithAnswers, naming the first call. The tool gets its state back
// from the fleet, not from the caller.
func ExampleWithAnswers() {
	transfer := tool.Must(tool.New("transfer", func(ctx context.Context, in struct {
		Amount int `json:"amount"`
	}) (*tool.Result, error) {
		var ok struct {
			Confirm bool `json:"confirm"`
		}
		if a := tool.InputFrom(ctx); a != nil && string(a.State) == "asked" {
			if accepted, err := a.Elicited("confirm", &ok); err != nil || !accepted || !ok.Confirm {
				return &tool.Result{Content: []*toolwirev1.Content{tool.Text("not transferred")}}, nil
			}
			return &tool.Result{Content: []*toolwirev1.Content{tool.Text(fmt.Sprintf("transferred %d", in.Amount))}}, nil
		}
		return tool.NeedInput(map[string]tool.InputRequest{
			"confirm": tool.Elicit(fmt.Sprintf("Transfer %d?", in.Amount), map[string]any{"type": "object",
				"properties": map[string]any{"confirm": map[string]any{"type": "boolean"}}}),
		}, []byte("asked")), nil
	}))
	baseURL, stop := startDispatcherWith(transfer)
	defer stop()
	c, err := client.New(baseURL)
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	args := map[string]int{"amount": 100}
	first, err := c.Call(ctx, "transfer", args, client.WithClientCapabilities(`{"elicitation":{}}`))
	if err != nil {
		log.Fatal(err)
	}
	ask := first.InputRequired()
	fmt.Println("asks:", ask.GetRequests()["confirm"].GetMethod())

	res, err := c.Call(ctx, "transfer", args, client.WithAnswers(first.CallID, map[string]string{
		"confirm": `{"action":"accept","content":{"confirm":true}}`,
	}))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Text())
	// Output:
	// asks: elicitation/create
	// transferred 100
}
