package worker_test

import (
	"time"

	"github.com/toolwire/toolwire/internal/dispatch"
	"google.golang.org/protobuf/types/known/durationpb"
)

var dispatchIdentity = dispatch.DefaultIdentity

func durationpbNew(d time.Duration) *durationpb.Duration { return durationpb.New(d) }
