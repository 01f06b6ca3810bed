package tool_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

type GreetIn struct {
	Name  string `json:"name" jsonschema:"who to greet"`
	Shout bool   `json:"shout,omitempty" jsonschema:"greet in capitals"`
}

type GreetOut struct {
	Greeting string `json:"greeting"`
}

func ExampleNew() {
	greet, err := tool.New("greet",
		func(ctx context.Context, in GreetIn) (GreetOut, error) {
			if in.Name == "" {
				return GreetOut{}, tool.InvalidArgument("/name", "must not be empty")
			}
			g := "Hello, " + in.Name + "!"
			if in.Shout {
				g = strings.ToUpper(g)
			}
			return GreetOut{Greeting: g}, nil
		},
		tool.WithSummary("Greets someone by name."),
		tool.WithCategory(toolwirev1.ToolCategory_TOOL_CATEGORY_UTILITY),
		tool.ReadOnly(), tool.Idempotent(),
	)
	if err != nil {
		panic(err)
	}
	fmt.Println(greet.Spec().GetInputSchemaJson())

	res, err := greet.Invoke(context.Background(), []byte(`{"name":"Ada","shout":true}`))
	if err != nil {
		panic(err)
	}
	fmt.Println(string(res.Structured))

	_, err = greet.Invoke(context.Background(), []byte(`{"name":""}`))
	fmt.Println(err)

	_, err = greet.Invoke(context.Background(), []byte(`{"name":7}`))
	fmt.Println(err)
	// Output:
	// {"type":"object","properties":{"name":{"type":"string","description":"who to greet"},"shout":{"type":"boolean","description":"greet in capitals"}},"required":["name"],"additionalProperties":false}
	// {"greeting":"HELLO, ADA!"}
	// ERROR_TYPE_VALIDATION: invalid argument "/name": must not be empty
	// ERROR_TYPE_VALIDATION: invalid argument "/name": want string, got number
}
