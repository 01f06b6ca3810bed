// Package limitgate is the limits step of admission and what it holds
// afterwards: the runtime over the limits model of the policy documents
// (internal/policy, limits.go) and the shared counts (internal/limits).
// The dispatcher (internal/dispatch) calls it; it does not import the
// dispatcher, and reads the policy in force through Policies and the
// pinned specs through Specs.
//
// # Limits and budgets
//
// The policy in force for the caller's tenant may hold limits
// (internal/policy, limits.go): rates, concurrency caps and budgets per
// key, counted in the shared limits bucket (internal/limits) by the last
// admission step (Gate.Take), so a call refused by any other step spends
// nothing. Slots are taken first, budget units next, rate units last
// (GCRA cannot give one back); a refusal by a later limit, or a publish
// that fails (Gate.GiveBack), gives back what was taken. RATE_LIMIT
// (rates, caps) and BUDGET_EXCEEDED carry retry_after and the limit's id,
// and the refusal's decision record names "limit:<id>". A limits bucket
// that cannot be reached or is full refuses OVERLOADED: a limit is never
// skipped. No limit covering the tool costs a policy lookup and nothing
// else. Calls made by hooks are not counted (the dispatcher does not ask
// the gate for them).
//
// Where the issue was silent:
//
//   - Slots are leases (Config.SlotLease, 30 s) renewed every
//     Config.SlotRenew (10 s) by the replica that admitted the call
//     (Gate.Hold, before the publish), which releases them when the
//     call's result reaches its results consumer (Gate.Settle; results
//     are routed to the admitting replica). A replica that dies stops
//     renewing: its slots come back within 30 s. A call whose result
//     never comes (its publish ended with the caller's context and it was
//     never stored) is renewed until its deadline, or for an hour
//     (Config.MaxSlotHold) without one.
//   - A concurrency cap refuses at once (RATE_LIMIT, retry_after 1 s)
//     unless the limit has a wait (at most 30 s): admission then tries
//     again, 20 ms doubling to 250 ms, until a slot is free, the wait ends,
//     the call's schedule-to-start deadline passes or the caller goes. It
//     polls rather than queues: no order among waiters, no state to lose
//     when a replica dies, and each try is one read of the key.
//   - An ask is counted when it is parked (rates and budgets: past them
//     it is refused, not parked; Call.Slots false), and not again when an
//     approval publishes it; it takes no concurrency slot, neither while
//     it waits nor when it runs: a known gap.
//   - A call without the key's field (no session) is counted under an
//     empty value with the tenant's other such calls; a CEL key or cost
//     that cannot be evaluated refuses the call (fail closed).
//   - Usage reads budgets and calls in flight for the keys it can name
//     (tenant, agent, session, user, run); limits keyed by tool or CEL are
//     listed without figures. A caller reads its own agent's; another
//     agent's needs the admin scope (ErrNotYours). Report, behind the
//     GetUsage RPC, also refuses names longer than a key may be
//     (ErrBadFilter) and says which policy version the limits are from.
//
// # Lifecycle
//
// A Gate is a startstop.Service. Start opens the limits store over
// Config.Bucket (none without one: every call a limit covers is then
// refused OVERLOADED) and starts the renewal; until then Take refuses
// such calls the same way. Stop ends the renewal, starts no release any
// more (the leases of the slots still held end them), waits for the
// releases under way and closes the store. The loop guard counts in the
// same store (Gate.Store).
package limitgate
