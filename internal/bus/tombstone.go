package bus

// Tombstone is the value of a call's key in the cancels bucket
// (CancelKey): its JSON is what a dispatcher writes when a caller cancels
// the call and what workers read before starting it and watch while it
// runs. It lives with the layout, not with either side, since both write
// or read it.
type Tombstone struct {
	// By names who cancelled: the caller's agent, an operator, ...
	By string `json:"by"`
	// Reason given with the cancel, if any.
	Reason string `json:"reason,omitempty"`
}
