package bus

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// Roles of the NATS users an installation hands out. The dispatcher itself
// (and its in-process workers) connect in process with every permission;
// everything else that connects to NATS is one of these, or a pool's role
// (PoolRole).
const (
	// RoleWorker is a worker process of any pool: it fetches calls from
	// any pool's consumer and settles them, publishes results, events,
	// dead letters and retry schedules, reads cancel tombstones and the
	// registry, and announces any pool's tools and asks for any pool's
	// consumer (RegistrySubject), which the dispatchers check and write.
	// It creates no consumer. It is the role of development and of
	// installations with one pool (or pools that trust each other): a
	// worker that runs third-party code should have its pool's role
	// (PoolRole), which reaches no other pool's calls.
	RoleWorker = "worker"
	// RoleOperator is toolctl's audit, dlq and replay commands: it reads
	// the streams, asks a dispatcher to retry a dead letter and publishes
	// replays on shadow subjects. It never publishes a call, and never
	// creates, changes or deletes a stream or a pool's consumer: its only
	// consumers are its scans' (ScanConsumer).
	RoleOperator = "operator"
)

// poolRolePrefix starts the name of every pool's role.
const poolRolePrefix = "pool-"

// PoolRole is the role of the workers of pool name ("pool-<name>"): the
// worker role's permissions for that pool alone. Its pools are name and
// name-<type> for every executor type (PoolRoleMembers: a worker's --pool
// with several types), their consumers the only ones it may fetch from,
// their announcement subjects the only ones it may publish on. It creates
// no consumer: the dispatchers make a pool's consumer when its worker
// asks (internal/registry, OpEnsure).
func PoolRole(name string) string { return poolRolePrefix + name }

// PoolOfRole returns the pool name of a pool's role, ok false for any
// other role.
func PoolOfRole(role string) (name string, ok bool) {
	name, ok = strings.CutPrefix(role, poolRolePrefix)
	return name, ok && name != ""
}

// PoolRoleMembers are the pool names the role of pool name covers: name
// itself and name-<type> for every executor type.
func PoolRoleMembers(name string) []string {
	out := []string{name}
	for _, t := range AllTypes() {
		out = append(out, name+"-"+TypeToken(t))
	}
	return out
}

// PoolPart splits a pool name that ends in "-<type>" (an executor type's
// token, TypeToken) into the pool it is the part of and that type; ok is
// false for any other name. Such a name is always the <type> part of
// pool <base> (a worker's --pool <base> serving several types names its
// pools so): the role of <base> reaches it (PoolRoleMembers), so it has
// no role of its own (ValidatePoolRoles) and runs <type> tools only
// (CheckPoolName).
func PoolPart(name string) (base string, t toolwirev1.ExecutorType, ok bool) {
	for _, t := range AllTypes() {
		if base, ok := strings.CutSuffix(name, "-"+TypeToken(t)); ok {
			return base, t, true
		}
	}
	return "", toolwirev1.ExecutorType_EXECUTOR_TYPE_UNSPECIFIED, false
}

// CheckPoolName refuses a pool named "<base>-<type>" (PoolPart) whose
// executor type is not <type>: the name says which part of pool <base>
// it is, and the role of <base> reaches it.
func CheckPoolName(name string, t toolwirev1.ExecutorType) error {
	if base, want, ok := PoolPart(name); ok && want != t {
		return fmt.Errorf("bus: pool %q runs %s tools, but a name ending in -%s is the %s part of pool %q (whose credential reaches it): rename the pool",
			name, TypeToken(t), TypeToken(want), TypeToken(want), base)
	}
	return nil
}

// Roles lists every fixed role, in the order credentials are made.
func Roles() []string { return []string{RoleWorker, RoleOperator} }

// ValidPoolName refuses a name that is not a pool's: 1 to 64 letters,
// digits, '_' or '-' (a subject token). It is the whole rule for a pool
// without a credential of its own (the worker role's); ValidatePoolRoles
// adds the rules of pools with one.
func ValidPoolName(name string) error {
	if !poolNameRe.MatchString(name) {
		return fmt.Errorf("bus: pool %q: a pool's name is 1 to 64 letters, digits, '_' or '-'", name)
	}
	return nil
}

// ShadowRoleName is the pool name no pool's role may have: its role
// would reach the default shadow pools, shadow-<type> (PoolRoleMembers),
// which replay any pool's tools. Shadow workers run with the worker
// role.
const ShadowRoleName = "shadow"

// ValidatePoolRoles refuses the pool names of pools' roles (credentials)
// that are not a pool's (ValidPoolName), that end in "-<type>" (the part
// of another pool, PoolPart: its role would reach them), that are
// ShadowRoleName, or that are given twice. A pool without a credential
// is not held to it: "web-http" serving HTTP tools under the worker role
// is a pool name (CheckPoolName).
func ValidatePoolRoles(pools []string) error {
	seen := map[string]string{}
	for _, p := range pools {
		if err := ValidPoolName(p); err != nil {
			return err
		}
		if p == ShadowRoleName {
			return fmt.Errorf("bus: pool %q: its credential would reach the default shadow pools (%s-<type>), which replay any pool's tools: "+
				"shadow workers run with the %s credential; rename the pool", p, p, RoleWorker)
		}
		if base, t, ok := PoolPart(p); ok {
			return fmt.Errorf("bus: pool %q: a name ending in -%s is the %s part of pool %q, whose credential (%s) reaches it: "+
				"give pool %q the credential, or rename the pool", p, TypeToken(t), TypeToken(t), base, PoolRole(base), base)
		}
		for _, m := range PoolRoleMembers(p) {
			if other, ok := seen[m]; ok {
				return fmt.Errorf("bus: pools %q and %q: both roles would reach pool %q", other, p, m)
			}
			seen[m] = p
		}
	}
	return nil
}

var poolNameRe = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// Permissions are the subjects a NATS user may publish and subscribe to
// (allow lists: everything else is denied).
type Permissions struct {
	Publish   []string
	Subscribe []string
}

// InboxPrefix is the inbox prefix of a role's connections. Replies to a
// role's JetStream API requests and the calls a pull request fetches
// arrive on its inbox, so each role subscribes only to its own inboxes:
// no role sees what is delivered to another (the default _INBOX. is the
// dispatcher's).
//
// A pool's role has the inboxes under the worker role's
// "<worker inboxes>.pool.<name>": a pool's workers use them whichever of
// the two credentials they hold, and the worker role, which may fetch
// from every pool anyway, sees them too; no pool sees another's.
func InboxPrefix(c Config, role string) string {
	if pool, ok := PoolOfRole(role); ok {
		return InboxPrefix(c, RoleWorker) + ".pool." + pool
	}
	return "_INBOX_" + c.WithDefaults().Prefix + "_" + role
}

// RolePermissions returns the NATS permissions of role (RoleWorker,
// RoleOperator or a PoolRole) for the installation c. They name JetStream API subjects
// exactly (stream, consumer and bucket names of c), so they hold for one
// prefix only. See the package doc ("Permissions") for what each role can
// and cannot do.
func RolePermissions(c Config, role string) (Permissions, error) {
	c = c.WithDefaults()
	if err := c.Validate(); err != nil {
		return Permissions{}, err
	}
	switch role {
	case RoleWorker:
		return workerPermissions(c), nil
	case RoleOperator:
		return operatorPermissions(c), nil
	}
	if pool, ok := PoolOfRole(role); ok {
		if err := ValidatePoolRoles([]string{pool}); err != nil {
			return Permissions{}, err
		}
		return poolPermissions(c, pool), nil
	}
	return Permissions{}, fmt.Errorf("bus: unknown role %q (want %s, %s or %s<pool>)", role, RoleWorker, RoleOperator, poolRolePrefix)
}

const jsAPI = "$JS.API."

func kvStream(bucket string) string  { return "KV_" + bucket }
func objStream(bucket string) string { return "OBJ_" + bucket }

// workerPermissions are the any-pool worker's: what every worker has
// (workerCommon), and any pool's consumer and announcements.
func workerPermissions(c Config) Permissions {
	calls := c.CallsStream()
	pub := append(workerCommon(c),
		// Pool consumers on CALLS: look up, fetch and settle, any pool's.
		// Never create, update or list: a create's filters and deliver
		// subject travel in its body, which permissions cannot see, so a
		// role that may create one may read any calls or have the server
		// deliver them anywhere. The dispatchers make the consumers
		// (internal/registry, OpEnsure).
		jsAPI+"CONSUMER.INFO."+calls+".*",
		jsAPI+"CONSUMER.MSG.NEXT."+calls+".*",
		"$JS.ACK."+calls+".>",
		// Announcements and consumer requests of any pool: the pool is
		// the subject's last token, checked against the body.
		PoolRegistrySubject(c, "*"),
		// ... and the subject of the release before the pools' subjects,
		// where the dispatchers refuse a worker of that release, naming
		// the upgrade (kept for one release).
		RegistrySubject(c),
	)
	return Permissions{Publish: pub, Subscribe: workerSubscribe(c, RoleWorker)}
}

// poolPermissions are the role of pool name (PoolRole): what every
// worker has, and its own pools' consumers and announcements only.
func poolPermissions(c Config, name string) Permissions {
	calls := c.CallsStream()
	pub := workerCommon(c)
	for _, m := range PoolRoleMembers(name) {
		cons := calls + "." + c.PoolConsumer(m)
		pub = append(pub,
			jsAPI+"CONSUMER.INFO."+cons,
			jsAPI+"CONSUMER.MSG.NEXT."+cons,
			"$JS.ACK."+cons+".>",
			PoolRegistrySubject(c, m),
		)
	}
	return Permissions{Publish: pub, Subscribe: workerSubscribe(c, PoolRole(name))}
}

// workerSubscribe is what a worker role may subscribe to: its inboxes,
// cancel tombstones and approvals.
func workerSubscribe(c Config, role string) []string {
	return []string{
		InboxPrefix(c, role) + ".>",
		"$KV." + c.CancelBucket() + ".>",
		"$KV." + c.RegistryBucket() + ".approvals.>",
	}
}

// workerCommon is what every worker role may publish, whatever its pool:
// nothing here names a pool.
func workerCommon(c Config) []string {
	s := c.Subjects()
	events, results := c.EventsStream(), c.ResultsStream()
	registry, cancels := kvStream(c.RegistryBucket()), kvStream(c.CancelBucket())
	pub := []string{}
	// Attaching to the layout (Open with Bind): stream info of every
	// stream and bucket, nothing created or changed; not the dashboard's
	// sign-outs nor the delegation counters, which Open with Bind leaves
	// alone.
	for _, st := range c.layoutStreams() {
		if st != kvStream(c.RevocationsBucket()) && st != c.DelegationStream() {
			pub = append(pub, jsAPI+"STREAM.INFO."+st)
		}
	}
	return append(pub,
		// A redelivered call: its stored result and its events, read from
		// the streams' leaders (LastMsgFromLeader, AllMsgsFromLeader) or
		// by direct gets. No consumer on a stream the worker writes: a push
		// consumer delivers wherever its creator says, and the server does
		// not check that subject against the creator's permissions, so a
		// role that writes a stream and may create consumers on it could
		// have the server publish its writes on any subject (a forged
		// dead-letter retry request, say).
		jsAPI+"DIRECT.GET."+results+".>",
		jsAPI+"DIRECT.GET."+events,
		jsAPI+"DIRECT.GET."+events+".>",
		jsAPI+"STREAM.MSG.GET."+results,
		jsAPI+"STREAM.MSG.GET."+events,
		// What a worker writes. Per call id, not per pool: a result or an
		// event for another pool's call is refused by its signature
		// (internal/believed), not by permissions.
		s.AllResults(),
		s.AllEvents(),
		s.AllDLQ(),
		s.join("retry", "sched", ">"),
		// Cancel tombstones: looked up by key from the bucket's leader
		// (a replica that lags would miss a tombstone the leader
		// acknowledged: a call its caller was told is cancelled would
		// run), watched by subscription.
		jsAPI+"DIRECT.GET."+cancels+".>",
		jsAPI+"STREAM.MSG.GET."+cancels,
		// The registry: specs and MCP definition approvals read, never
		// written (no put, delete, rollup or purge): a worker announces
		// its tools and first-use approvals to the dispatchers, which
		// check and write them (RegistrySubject). Approvals are heard by
		// a core subscription (below), not a KV watch, for the same
		// reason: no consumer.
		jsAPI+"DIRECT.GET."+registry+".>",
		// ... and a key a direct get found missing, again from the
		// leader (signing.Keyring: a replica that lags would call a
		// worker enrolled a moment ago unenrolled, and its result forged).
		jsAPI+"STREAM.MSG.GET."+registry,
		// Approval records, nonces and grants: read by key from the
		// bucket's leader (a replica that lags would call an approval
		// just made "pending"), for the re-check before executing (never
		// written).
		jsAPI+"STREAM.MSG.GET."+kvStream(c.ApprovalsBucket()),
		// The policies in force (records and documents): read by key from
		// the bucket's leader for the pre-run policy check of a call that
		// carries an approval or a grant (policystore.Reader; never
		// written, and no watch: no consumer).
		jsAPI+"STREAM.MSG.GET."+kvStream(c.PoliciesBucket()),
		// A call's after-hooks, run by a dispatcher (AfterHookSubject).
		AfterHookSubject(c),
		// Outputs over the inline limit: chunks and meta written, meta read.
		"$O."+c.BlobBucket()+".>",
		jsAPI+"DIRECT.GET."+objStream(c.BlobBucket())+".>",
	)
}

func operatorPermissions(c Config) Permissions {
	s := c.Subjects()
	calls, events, results, dlq := c.CallsStream(), c.EventsStream(), c.ResultsStream(), c.DLQStream()
	registry := kvStream(c.RegistryBucket())
	// Metadata: the account's stream names (nats stream ls), and the
	// layout's streams and consumers (nats stream info, nats consumer
	// ls|info; what the commands look up). Never a message.
	pub := []string{jsAPI + "INFO", jsAPI + "STREAM.NAMES", jsAPI + "STREAM.LIST"}
	for _, st := range c.layoutStreams() {
		pub = append(pub, jsAPI+"STREAM.INFO."+st, jsAPI+"CONSUMER.NAMES."+st, jsAPI+"CONSUMER.LIST."+st,
			jsAPI+"CONSUMER.INFO."+st+".*")
	}
	// audit over CALLS and dlq list over DLQ read with a Scan, whose
	// consumers are named after its slots: the operator creates, reads
	// from and deletes those and no other consumer, so never a pool's
	// (no update, no delete, no fetch that spends a call's deliveries).
	// Several filters travel in the body; one is in the subject. Neither
	// is checked: the create body is not visible to permissions, so a
	// slot consumer may carry any configuration its creator sends (any
	// filter, a push deliver subject, no inactivity threshold), not only
	// a Scan's. What holds is the name: a slot, never a pool's consumer;
	// and the operator reads every call anyway.
	pub = append(pub, scanPermissions(calls)...)
	pub = append(pub, scanPermissions(dlq)...)
	pub = append(pub,
		// audit: stored results and events.
		jsAPI+"DIRECT.GET."+results+".>",
		jsAPI+"DIRECT.GET."+events,
		jsAPI+"DIRECT.GET."+events+".>",
		// audit and replay: stored results (audit's signatures, replay's
		// shadow results) read from the leader; and the events of a
		// call whose result a pool's key signed, from the leader too
		// (the claim of the result's attempt, internal/believed).
		jsAPI+"STREAM.MSG.GET."+results,
		jsAPI+"STREAM.MSG.GET."+events,
		// dlq show: gets by sequence.
		jsAPI+"DIRECT.GET."+dlq,
		// dlq retry: a request a dispatcher serves (DLQRetrySubject).
		DLQRetrySubject(c),
		// The registry, read (audit's schemas, replay's versions).
		jsAPI+"DIRECT.GET."+registry+".>",
		// ... and a signer's enrolment a direct get found missing, again
		// from the leader (every audit checks result signatures: its
		// signing.Keyring confirms, as a worker's does).
		jsAPI+"STREAM.MSG.GET."+registry,
		// replay: calls on shadow subjects, which only shadow pools consume.
		s.AllShadow(),
		// store status: the archive's lag, read as the dispatchers read it
		// (archive.OldestUnarchived): the archive bucket's progress keys,
		// and the first unarchived message of the calls and results
		// streams, by sequence (the events stream's is above).
		jsAPI+"STREAM.INFO."+kvStream(c.ArchiveBucket()),
		jsAPI+"DIRECT.GET."+kvStream(c.ArchiveBucket())+".$KV."+c.ArchiveBucket()+".progress.>",
		jsAPI+"DIRECT.GET."+calls,
		jsAPI+"DIRECT.GET."+results,
	)
	sub := []string{
		InboxPrefix(c, RoleOperator) + ".>",
		// replay: a core message hints that a shadow result is stored.
		s.join("result", "*", ReplayDispatcher, "*"),
	}
	return Permissions{Publish: pub, Subscribe: sub}
}

// scanPermissions are the operator's subjects for the Scan slots of
// stream: create (filters in the body, or one in the subject), fetch,
// delete.
func scanPermissions(stream string) []string {
	var pub []string
	for i := range ScanSlots {
		name := stream + "." + ScanConsumer(i)
		pub = append(pub, jsAPI+"CONSUMER.CREATE."+name, jsAPI+"CONSUMER.CREATE."+name+".>",
			jsAPI+"CONSUMER.MSG.NEXT."+name, jsAPI+"CONSUMER.DELETE."+name)
	}
	return pub
}

// ReplayDispatcher is the dispatcher token of replayed calls: their
// results go to <prefix>.result.<tenant>.replay.<call id>.
const ReplayDispatcher = "replay"

// DLQRetrySubject is where toolctl asks a dispatcher to retry a dead
// letter (internal/dlq serves it): operators never publish calls
// themselves.
func DLQRetrySubject(c Config) string {
	return c.WithDefaults().Subjects().join("admin", "dlq", "retry")
}

// RegistrySubject is the root of the subjects where a worker announces
// its tools (their specs, its pool's claim on their names, the first
// approval of an MCP tool's definition) and asks for its pool's consumer
// to the dispatchers (one queue group), which check each request and
// write the registry or make the consumer (internal/registry: Service): a
// worker's credentials may neither write the registry nor create a
// consumer themselves. Each pool has its own subject under it
// (PoolRegistrySubject).
func RegistrySubject(c Config) string {
	return c.WithDefaults().Subjects().join("admin", "registry", "announce")
}

// PoolRegistrySubject is where pool's workers announce ("<RegistrySubject>.<pool>";
// pool "*" for every pool's): a pool's role may publish on its own only,
// and the dispatchers refuse a request whose body names another pool
// than the subject.
func PoolRegistrySubject(c Config, pool string) string {
	if pool != "*" {
		pool = Token(pool)
	}
	return RegistrySubject(c) + "." + pool
}

// AfterHookSubject is where a worker asks the dispatchers (one queue
// group) to run a call's after-hooks on its response (dispatch serves it):
// hooks are tools, called through the fleet, and a worker's credentials
// may not publish calls.
func AfterHookSubject(c Config) string {
	return c.WithDefaults().Subjects().join("hook", "after")
}

// PolicyChangedSubject is where a dispatcher that applied a policy
// document says so (the payload: the scope's key token), so that every
// dispatcher reads that scope's record from the leader at once instead of
// waiting for its watch, which after a failover of the bucket's leader
// comes back only once its heartbeats are missed (about 15 s). Core NATS:
// a hint, never the record.
func PolicyChangedSubject(c Config) string {
	return c.WithDefaults().Subjects().join("admin", "policy", "changed")
}

// PolicyInForceSubject is where the dispatcher that applied or removed a
// policy asks every dispatcher whether the change is in force there
// (internal/policystore: Holder.WaitFleet); each answers now and again
// once it is. Core NATS, request and replies; dispatchers only.
func PolicyInForceSubject(c Config) string {
	return c.WithDefaults().Subjects().join("admin", "policy", "inforce")
}

// PolicyReplicasSubject is where every dispatcher's policy holder says it
// is alive (at start, then every 20 s): the fleet an apply waits for.
// Core NATS; dispatchers only.
func PolicyReplicasSubject(c Config) string {
	return c.WithDefaults().Subjects().join("admin", "policy", "replicas")
}

// layoutStreams names every stream of the layout, buckets included (their
// streams), in Open's order, except that Open creates the revocations
// bucket and the delegation stream last (after blobs: see ensure).
func (c Config) layoutStreams() []string {
	return []string{c.CallsStream(), c.ResultsStream(), c.EventsStream(), c.DLQStream(), c.RetriesStream(),
		c.AdvisoriesStream(), kvStream(c.CancelBucket()), kvStream(c.IdempotencyBucket()),
		kvStream(c.RegistryBucket()), kvStream(c.SessionsBucket()), kvStream(c.PoliciesBucket()),
		kvStream(c.ApprovalsBucket()), kvStream(c.LimitsBucket()), kvStream(c.TasksBucket()),
		kvStream(c.RevocationsBucket()), c.DelegationStream(), objStream(c.BlobBucket())}
}

// authorize sets the users of opts: an in-process-only internal user with
// public nkey internalNKey and every permission, and users for the client
// listener (standard connections only).
func authorize(opts *server.Options, users []User, internalNKey string) error {
	opts.Users = nil
	opts.Nkeys = []*server.NkeyUser{{Nkey: internalNKey,
		AllowedConnectionTypes: map[string]struct{}{jwt.ConnectionTypeInProcess: {}}}}
	standard := func() map[string]struct{} { return map[string]struct{}{jwt.ConnectionTypeStandard: {}} }
	seen := map[string]bool{internalUserName: true}
	for _, u := range users {
		switch {
		case u.Name == "":
			return errors.New("bus: embedded server: a user has no Name")
		case seen[u.Name]:
			return fmt.Errorf("bus: embedded server: user %q given twice", u.Name)
		case u.NKey != "" && u.Password != "":
			return fmt.Errorf("bus: embedded server: user %q has both NKey and Password", u.Name)
		case u.NKey != "":
			if !nkeys.IsValidPublicUserKey(u.NKey) {
				return fmt.Errorf("bus: embedded server: user %q: NKey is not a public user nkey", u.Name)
			}
			opts.Nkeys = append(opts.Nkeys, &server.NkeyUser{Nkey: u.NKey, Permissions: serverPermissions(u.Permissions),
				AllowedConnectionTypes: standard()})
		case u.Password != "":
			opts.Users = append(opts.Users, &server.User{Username: u.Name, Password: u.Password,
				Permissions: serverPermissions(u.Permissions), AllowedConnectionTypes: standard()})
		default:
			return fmt.Errorf("bus: embedded server: user %q has neither NKey nor Password", u.Name)
		}
		seen[u.Name] = true
	}
	return nil
}

// serverPermissions converts p; an empty allow list allows nothing (the
// server reads an empty one as no restriction).
func serverPermissions(p *Permissions) *server.Permissions {
	if p == nil {
		return nil
	}
	list := func(allow []string) *server.SubjectPermission {
		if len(allow) == 0 {
			return &server.SubjectPermission{Deny: []string{">"}}
		}
		return &server.SubjectPermission{Allow: slices.Clone(allow)}
	}
	return &server.Permissions{Publish: list(p.Publish), Subscribe: list(p.Subscribe)}
}

// RetryOfHeader names, on a retry schedule a worker writes, the calls
// stream sequence of the delivery it retries. The dispatchers' mover puts
// a due retry back on the calls stream only if that stored call is the
// same call (every field but the attempt): a worker credential may write
// retry schedules, and must not be able to queue a call of its own making
// through them.
const RetryOfHeader = "Toolwire-Retry-Of"
