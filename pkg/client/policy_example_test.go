package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/toolwire/toolwire/pkg/client"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// An administrator (credentials with the "admin" scope) puts a policy in
// force for its tenant, then asks why a call is denied.
func ExampleClient_ApplyPolicy() {
	baseURL, stop := startDispatcher()
	defer stop()
	c, err := client.New(baseURL)
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	doc := []byte(`tenant:
  default: allow
  rules:
    - id: no-secrets
      effect: deny
      tools: [echo]
      args: {text: "secret*"}
      reason: secrets stay home
tests:
  - tool: echo
    args: {text: secret plans}
    expect: deny
`)
	applied, err := c.ApplyPolicy(ctx, doc, client.ApplyPolicyOptions{Comment: "no secrets"})
	if err != nil {
		log.Fatal(err) // a refused document: the message names the lines
	}
	fmt.Println("changed:", applied.GetChanged(), "tests passed:", applied.GetTestsPassed())

	res, err := c.Call(ctx, "echo", map[string]string{"text": "secret plans"})
	if err != nil {
		log.Fatal(err)
	}
	var te *client.ToolError
	if errors.As(res.Err(), &te) {
		fmt.Println(client.TypeName(te.Type), te.Message)
	}

	x, err := c.Explain(ctx, &toolwirev1.ExplainRequest{Tool: "echo", ArgumentsJson: `{"text":"secret plans"}`})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(x.GetDecision().GetOutcome(), x.GetDecision().GetRuleId())
	for _, r := range x.GetRules() {
		fmt.Printf("%s %s %s matched=%v: %s\n", r.GetLayer(), r.GetEffect(), r.GetId(), r.GetMatched(), r.GetNote())
	}
	// Output:
	// changed: true tests passed: 1
	// PERMISSION_DENIED policy denies this call of "echo": secrets stay home
	// POLICY_OUTCOME_DENY no-secrets
	// tenant deny no-secrets matched=true: args.text is "secret plans"; the pattern is "secret*": some value matches
}
