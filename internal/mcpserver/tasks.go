package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/oklog/ulid/v2"
	"google.golang.org/protobuf/proto"

	"github.com/toolwire/toolwire/internal/bus"
	"github.com/toolwire/toolwire/internal/identity"
	"github.com/toolwire/toolwire/internal/policy"
	"github.com/toolwire/toolwire/pkg/tool"
	toolwirev1 "github.com/toolwire/toolwire/pkg/toolproto/toolwire/v1"
)

// Tasks (the io.modelcontextprotocol/tasks extension, SEP-2663) are
// toolwire's own calls: the task id is the id of the call that created it,
// and its state is the state of the call it is at now, in JetStream, so
// any replica answers tasks/get, tasks/update and tasks/cancel. A task's
// record in the tasks bucket (bus.Bus.Tasks, key tenant.task) holds what
// a task needs beyond its calls: the tool, arguments and capabilities it
// was created with, the call it is at (a tool that asks for input ends
// its call; the answers start the next one, which continues it), and the
// answers given so far. See doc.go, "Tasks", and docs/mcp.md.

// tasksExtension names the extension in capabilities.
const tasksExtension = "io.modelcontextprotocol/tasks"

// Bounds of a task's record: its answers, and the whole.
const (
	maxTaskAnswers     = tool.MaxInputRequests
	maxTaskRecordBytes = 256 << 10
)

// taskRecord is a task's record in the tasks bucket.
type taskRecord struct {
	Tool string `json:"tool"`
	// Args are the arguments the task was created with; Redacted says
	// they are stored as ShownArguments shows them (the fields the tool's
	// schema marks secret replaced by "[REDACTED]"): the arguments as
	// admitted are then read back from the call the task is at
	// (Core.CallArguments) to submit the call that continues it. The
	// record holds no secret argument (doc.go, "Tasks").
	Args     string `json:"args"`
	Redacted bool   `json:"redacted,omitempty"`
	Caps     string `json:"caps,omitempty"`
	// Session and Model are the session and the model the task's first
	// call was made for (its tools/call's _meta and Toolwire-Model
	// header): every call that continues the task is made for them too,
	// so a later round is admitted under the same session mode and
	// toolset. A tasks/update does not name them: what it carries is
	// never read for them.
	Session string    `json:"session,omitempty"`
	Model   string    `json:"model,omitempty"`
	Created time.Time `json:"created"`
	Updated time.Time `json:"updated"`
	// Call is the call the task is at, Round its number (1 for the call
	// that created the task): the keys of its requests for input are
	// shown as "<round>.<key>", unique over the task's life.
	Call  string `json:"call"`
	Round int    `json:"round"`
	// Answers are the answers given to Call's requests for input so far,
	// by the tool's keys.
	Answers map[string]string `json:"answers,omitempty"`
	// Submitting are the answers of the call that continues Call, fixed
	// (by compare-and-set) before it is submitted, so that every replica
	// submits the same call.
	Submitting map[string]string `json:"submitting,omitempty"`
	// Refusal is that call's refusal (a ToolResponse, protobuf), when it
	// was refused for good: the task failed.
	Refusal []byte `json:"refusal,omitempty"`
	// Cancelled: cancelled while it waited for input (no call ran to
	// cancel).
	Cancelled bool `json:"cancelled,omitempty"`
}

// roundKey is the key a client sees for key of round r.
func roundKey(r int, key string) string { return strconv.Itoa(r) + "." + key }

func taskKey(tenant, id string) string { return tenant + "." + id }

// taskParams are the params of tasks/get, tasks/update and tasks/cancel.
type taskParams struct {
	mcp.ParamsBase
	TaskID         string                     `json:"taskId"`
	InputResponses map[string]json.RawMessage `json:"inputResponses,omitempty"`
}

// reply is a result the endpoint has written itself (tools/list pages,
// input-required results, tasks): fields the SDK's result types lack, in
// one encoding.
type reply struct {
	mcp.ResultBase
	raw json.RawMessage
}

func (r *reply) MarshalJSON() ([]byte, error) { return r.raw, nil }

func newReply(v any) (*reply, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("toolwire: %w", err)
	}
	return &reply{raw: b}, nil
}

// addTaskMethods makes the SDK accept the tasks methods; receive answers
// them (s.task).
func addTaskMethods(srv *mcp.Server) {
	unused := func(context.Context, *mcp.ServerSession, *taskParams) (*reply, error) {
		return nil, errors.New("mcpserver: tasks methods are answered by the receiving middleware")
	}
	for _, m := range []string{"tasks/get", "tasks/update", "tasks/cancel"} {
		if err := mcp.AddReceivingCustomMethod(srv, m, unused); err != nil {
			panic(err) // only a name the SDK has as a standard method
		}
	}
}

// declaresTasks reports whether a request's _meta declares the extension.
func declaresTasks(meta mcp.Meta) bool {
	caps, _ := meta[metaClientCapabilities].(map[string]any)
	ext, _ := caps["extensions"].(map[string]any)
	_, ok := ext[tasksExtension]
	return ok
}

// needsTasks is the error for a request that needs the extension the
// client did not declare.
func needsTasks(what string) error {
	data, _ := json.Marshal(map[string]any{"requiredCapabilities": map[string]any{
		"extensions": map[string]any{tasksExtension: map[string]any{}}}})
	return &jsonrpc.Error{Code: mcp.CodeMissingRequiredClientCapabilities, Data: data,
		Message: what + " needs the client capability extensions." + tasksExtension}
}

// taskMode reports whether a tools/call of tool answers as a task when it
// outlives Config.TaskAfter, or the error of a client that must not call
// it.
func (s *Server) taskMode(p *mcp.CallToolParamsRaw, stateless bool) (bool, error) {
	if !stateless || s.cfg.Tasks == nil {
		return false, nil
	}
	ts, declared := s.d.TaskSupport(p.Name), declaresTasks(p.Meta)
	if ts == toolwirev1.TaskSupport_TASK_SUPPORT_REQUIRED && !declared {
		return false, needsTasks(fmt.Sprintf("tool %q", p.Name))
	}
	return declared && ts != toolwirev1.TaskSupport_TASK_SUPPORT_FORBIDDEN, nil
}

// createTask records the task of call callID (cr) and answers it.
func (s *Server) createTask(ctx context.Context, id identity.Identity, cr *toolwirev1.CallRequest, callID string, g *toolwirev1.GetResultResponse) (mcp.Result, error) {
	now := time.Now().UTC()
	args, redacted := s.storedArgs(cr.Tool, cr.ArgumentsJson)
	rec := taskRecord{Tool: cr.Tool, Args: args, Redacted: redacted, Caps: cr.ClientCapabilitiesJson,
		Session: cr.Session, Model: cr.Model, Created: now, Updated: now, Call: callID, Round: 1}
	b, err := json.Marshal(rec)
	if err != nil {
		return nil, err
	}
	if len(b) > maxTaskRecordBytes/4 {
		return nil, fmt.Errorf("a task record of %d bytes (arguments this large wait for their result)", len(b))
	}
	if err := s.roomForTasks(ctx); err != nil {
		return nil, err
	}
	// Durable before it is answered: a tasks/get on any replica finds it.
	if _, err := s.cfg.Tasks.Create(ctx, taskKey(id.Tenant, callID), b); err != nil {
		return nil, err
	}
	t := s.taskState(ctx, callID, &rec, g)
	t.ResultType = "task"
	return newReply(t)
}

// storedArgs returns the form of a task's arguments its record keeps:
// the arguments themselves when nothing of them is secret, otherwise
// their redacted form (ShownArguments), and true.
func (s *Server) storedArgs(tool, args string) (string, bool) {
	shown := s.d.ShownArguments(tool, []byte(args))
	if shown == args {
		return args, false
	}
	if c, err := policy.Canonicalize([]byte(args)); err == nil && string(c) == shown {
		return args, false
	}
	return shown, true
}

// taskArgs returns the arguments of the call a task continues: the
// record's, or, when it keeps them redacted, the stored call's.
func (s *Server) taskArgs(ctx context.Context, id identity.Identity, rec *taskRecord) (string, error) {
	if !rec.Redacted {
		return rec.Args, nil
	}
	b, err := s.d.CallArguments(ctx, id, rec.Tool, rec.Call)
	if err != nil {
		return "", fmt.Errorf("toolwire: the arguments of the task's call: %w", err)
	}
	return string(b), nil
}

// roomForTasks refuses a new task when the tasks bucket is past
// tasksHighWater of its bytes: the rest is for the tasks already made
// (their answers and moves).
func (s *Server) roomForTasks(ctx context.Context) error {
	st, err := s.cfg.Tasks.Status(ctx)
	if err != nil {
		return err
	}
	if bs, ok := st.(*jetstream.KeyValueBucketStatus); ok {
		if max := bs.StreamInfo().Config.MaxBytes; max > 0 && float64(st.Bytes()) > tasksHighWater*float64(max) {
			return fmt.Errorf("the tasks bucket is past %.0f%% of its %d bytes", 100*tasksHighWater, max)
		}
	}
	return nil
}

// tasksHighWater is the share of the tasks bucket new tasks may fill.
const tasksHighWater = 0.75

// taskJSON is a task on the wire: CreateTaskResult and tasks/get's
// DetailedTask.
type taskJSON struct {
	ResultType     string                     `json:"resultType"`
	TaskID         string                     `json:"taskId"`
	Status         string                     `json:"status"`
	StatusMessage  string                     `json:"statusMessage,omitempty"`
	CreatedAt      string                     `json:"createdAt"`
	LastUpdatedAt  string                     `json:"lastUpdatedAt"`
	TTLMs          int64                      `json:"ttlMs"`
	PollIntervalMs int64                      `json:"pollIntervalMs"`
	Result         json.RawMessage            `json:"result,omitempty"`
	Error          *taskError                 `json:"error,omitempty"`
	InputRequests  map[string]json.RawMessage `json:"inputRequests,omitempty"`
}

// taskError is a failed task's error, a JSON-RPC error.
type taskError struct {
	Code    int64  `json:"code"`
	Message string `json:"message"`
}

const isoMillis = "2006-01-02T15:04:05.000Z07:00"

// taskState is the task taskID as its record and the state of the call
// it is at (g) say.
func (s *Server) taskState(ctx context.Context, taskID string, rec *taskRecord, g *toolwirev1.GetResultResponse) taskJSON {
	created, updated := rec.Created, rec.Updated
	t := taskJSON{TaskID: taskID, Status: "working", TTLMs: bus.TasksTTL.Milliseconds(),
		PollIntervalMs: s.cfg.TaskPollInterval.Milliseconds()}
	resp := g.GetResponse()
	switch g.GetState() {
	case toolwirev1.CallState_CALL_STATE_AWAITING_APPROVAL:
		t.StatusMessage = "waiting for a person's approval: " + resp.GetError().GetMessage()
	case toolwirev1.CallState_CALL_STATE_PENDING:
		if e := resp.GetError(); e != nil {
			// The answering call was refused for now (advance).
			t.StatusMessage = "waiting to run: " + e.GetMessage()
		}
	case toolwirev1.CallState_CALL_STATE_DONE:
		if f := resp.GetMeta().GetFinishedAt(); f != nil && f.AsTime().After(updated) {
			updated = f.AsTime()
		}
		s.settled(ctx, &t, rec, resp)
	}
	if len(rec.Refusal) > 0 {
		// The answers did not start a call: the task failed.
		var r toolwirev1.ToolResponse
		_ = proto.Unmarshal(rec.Refusal, &r)
		t.Status, t.StatusMessage, t.Result, t.InputRequests = "failed", "", nil, nil
		t.Error = &taskError{Code: jsonrpc.CodeInvalidParams, Message: "the answers were refused: " + r.GetError().GetMessage()}
	}
	if updated.Before(created) {
		updated = created
	}
	t.CreatedAt, t.LastUpdatedAt = created.UTC().Format(isoMillis), updated.UTC().Format(isoMillis)
	return t
}

// settled fills in the task of a call that ended with resp: input
// required (the requests not answered yet), cancelled, failed (toolwire's
// own failure) or completed (the tool's result, an error too).
func (s *Server) settled(ctx context.Context, t *taskJSON, rec *taskRecord, resp *toolwirev1.ToolResponse) {
	e := resp.GetError()
	switch {
	case rec.Cancelled:
		t.Status = "cancelled"
	case resp.GetInputRequired() != nil:
		t.Status, t.InputRequests = "input_required", map[string]json.RawMessage{}
		prof := s.profileFrom(ctx)
		for k, r := range resp.GetInputRequired().GetRequests() {
			if rec.Answers[k] != "" || rec.Submitting != nil {
				continue
			}
			// Rendered for the client, as tools/call's input requests are.
			b, _ := json.Marshal(map[string]any{"method": r.GetMethod(), "params": json.RawMessage(prof.InputParams(r.GetParamsJson()))})
			t.InputRequests[roundKey(rec.Round, k)] = b
		}
	case e.GetType() == toolwirev1.ErrorType_ERROR_TYPE_CANCELLED:
		t.Status, t.StatusMessage = "cancelled", e.GetMessage()
	case e.GetType() == toolwirev1.ErrorType_ERROR_TYPE_INTERNAL:
		t.Status, t.Error = "failed", &taskError{Code: jsonrpc.CodeInternalError, Message: e.GetMessage()}
	default:
		res, err := result(resp, s.profileFrom(ctx))
		if err == nil {
			t.Result, err = json.Marshal(res)
		}
		if err != nil {
			t.Status, t.Error = "failed", &taskError{Code: jsonrpc.CodeInternalError, Message: err.Error()}
			return
		}
		t.Status = "completed"
	}
}

// task answers tasks/get, tasks/update and tasks/cancel.
func (s *Server) task(ctx context.Context, id identity.Identity, method string, req mcp.Request) (mcp.Result, error) {
	p, _ := req.GetParams().(*taskParams)
	if p == nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: method + " needs params"}
	}
	if !declaresTasks(p.Meta) {
		return nil, needsTasks(method)
	}
	if ex := req.GetExtra(); ex != nil && ex.Header != nil && ex.Header.Get("Mcp-Name") != p.TaskID {
		return nil, &jsonrpc.Error{Code: mcp.CodeHeaderMismatch, Message: "the Mcp-Name header must be the taskId"}
	}
	if _, err := ulid.ParseStrict(p.TaskID); err != nil || s.cfg.Tasks == nil {
		return nil, unknownTask(p.TaskID)
	}
	rec, rev, err := s.loadTask(ctx, id, p.TaskID)
	if err != nil {
		return nil, err
	}
	if rec == nil {
		// Tasks are recorded before they are answered; a record is gone
		// only after the task's ttlMs. The tenant is in the key: another
		// tenant's task is unknown here.
		return nil, unknownTask(p.TaskID)
	}
	if method != "tasks/get" {
		// Before the record is changed or a call submitted for it: a task
		// whose call the caller may not see (another agent's, under the
		// dispatcher's AgentVisibility) is unknown here (tasks/get asks in
		// advance, before it reads the call's state or submits a call).
		if _, err := s.state(ctx, id, p.TaskID, rec.Call); err != nil {
			return nil, err
		}
	}
	switch method {
	case "tasks/update":
		changed := false
		if rec, rev, changed, err = s.answer(ctx, id, p, rec, rev); err != nil {
			return nil, err
		}
		if changed {
			if _, _, _, err := s.advance(ctx, id, p.TaskID, rec, rev); err != nil {
				return nil, err
			}
		}
		return newReply(map[string]string{"resultType": "complete"})
	case "tasks/cancel":
		if err := s.cancelTask(ctx, id, p.TaskID, rec, rev); err != nil {
			return nil, err
		}
		return newReply(map[string]string{"resultType": "complete"})
	}
	rec, rev, g, err := s.advance(ctx, id, p.TaskID, rec, rev)
	if err != nil {
		return nil, err
	}
	t := s.taskState(ctx, p.TaskID, rec, g)
	if live := t.Status == "working" || t.Status == "input_required"; live && time.Since(rec.Updated) > bus.TasksTTL/2 {
		// A live task outlives its record's TTL only if it is written
		// again (a call waiting long for an approver).
		if _, err := s.storeTask(ctx, id, p.TaskID, rec, rev); err != nil && !bus.IsCASConflict(err) {
			s.log.Warn("refreshing a task's record failed", "task", p.TaskID, "err", err)
		}
	}
	t.ResultType = "complete"
	return newReply(t)
}

func unknownTask(id string) error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("unknown task %.64q", id)}
}

// loadTask reads task id's record of the caller's tenant: nil when there
// is none.
func (s *Server) loadTask(ctx context.Context, id identity.Identity, taskID string) (*taskRecord, uint64, error) {
	e, err := s.cfg.Tasks.Get(ctx, taskKey(id.Tenant, taskID))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("toolwire: read task: %w", err)
	}
	var rec taskRecord
	if err := json.Unmarshal(e.Value(), &rec); err != nil {
		return nil, 0, fmt.Errorf("toolwire: decode task: %w", err)
	}
	return &rec, e.Revision(), nil
}

// storeTask writes rec over revision rev (compare-and-set).
func (s *Server) storeTask(ctx context.Context, id identity.Identity, taskID string, rec *taskRecord, rev uint64) (uint64, error) {
	rec.Updated = time.Now().UTC()
	b, err := json.Marshal(rec)
	if err != nil {
		return 0, err
	}
	if len(b) > maxTaskRecordBytes {
		return 0, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("the task's answers are over %d bytes", maxTaskRecordBytes)}
	}
	return s.cfg.Tasks.Update(ctx, taskKey(id.Tenant, taskID), b, rev)
}

// answer adds to the task's record the answers of a tasks/update to the
// requests it waits for now: keys of its current round, asked for and not
// answered yet. Others are ignored (an answer to nothing outstanding, a
// retry of an earlier round's): changed says whether any was taken.
func (s *Server) answer(ctx context.Context, id identity.Identity, p *taskParams, rec *taskRecord, rev uint64) (*taskRecord, uint64, bool, error) {
	for k, v := range p.InputResponses {
		if len(k) > 160 || !isJSONObject(v) {
			return nil, 0, false, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("inputResponses[%.160q] must be a JSON object", k)}
		}
	}
	for range 5 {
		if rec.Cancelled || rec.Submitting != nil || len(rec.Refusal) > 0 {
			return rec, rev, false, nil
		}
		g, err := s.d.GetResult(ctx, id, rec.Call, 0)
		if err != nil {
			return nil, 0, false, fmt.Errorf("toolwire: %w", err)
		}
		in := g.GetResponse().GetInputRequired()
		if g.State != toolwirev1.CallState_CALL_STATE_DONE || in == nil {
			return rec, rev, false, nil
		}
		next := *rec
		next.Answers = maps.Clone(rec.Answers)
		if next.Answers == nil {
			next.Answers = map[string]string{}
		}
		taken := false
		for k, v := range p.InputResponses {
			round, key, _ := strings.Cut(k, ".")
			if round != strconv.Itoa(rec.Round) || in.GetRequests()[key] == nil || next.Answers[key] != "" {
				continue
			}
			next.Answers[key], taken = string(v), true
		}
		if !taken {
			return rec, rev, false, nil
		}
		r, err := s.storeTask(ctx, id, p.TaskID, &next, rev)
		if err == nil {
			return &next, r, true, nil
		}
		var je *jsonrpc.Error
		if errors.As(err, &je) || !bus.IsCASConflict(err) {
			return nil, 0, false, err
		}
		if rec, rev, err = s.loadTask(ctx, id, p.TaskID); err != nil || rec == nil {
			return nil, 0, false, cmpErr(err, unknownTask(p.TaskID))
		}
	}
	return nil, 0, false, errors.New("toolwire: the task changes too often to take answers; try again")
}

// advance moves the task rec on: when the call it is at asked for input
// and every request has an answer, the answers are fixed in the record
// (compare-and-set: one replica wins), then the call that answers them is
// submitted with the asking call's id as its idempotency key (replicas
// racing, or a retry after a replica died between the two steps, submit
// that one call), and the record points at it. A refusal for now
// (retryable: a rate limit, overload) leaves the task working, to be
// submitted again at the next look; any other refusal fails the task. It
// returns the record and the state of the call the task is at.
func (s *Server) advance(ctx context.Context, id identity.Identity, taskID string, rec *taskRecord, rev uint64) (*taskRecord, uint64, *toolwirev1.GetResultResponse, error) {
	for range 8 {
		if rec == nil {
			return nil, 0, nil, unknownTask(taskID)
		}
		next := *rec
		if len(rec.Refusal) > 0 || rec.Cancelled {
			g, err := s.state(ctx, id, taskID, rec.Call)
			return rec, rev, g, err
		}
		if rec.Submitting == nil {
			g, err := s.state(ctx, id, taskID, rec.Call)
			if err != nil {
				return nil, 0, nil, err
			}
			in := g.GetResponse().GetInputRequired()
			if g.State != toolwirev1.CallState_CALL_STATE_DONE || in == nil || !answered(rec.Answers, in) {
				return rec, rev, g, nil
			}
			next.Submitting = make(map[string]string, len(in.GetRequests()))
			for k := range in.GetRequests() {
				next.Submitting[k] = rec.Answers[k]
			}
		} else {
			// Before a call is submitted as the caller: a task whose call
			// it may not see is unknown to it (every other way here asks
			// state first).
			if _, err := s.state(ctx, id, taskID, rec.Call); err != nil {
				return nil, 0, nil, err
			}
			args, err := s.taskArgs(ctx, id, rec)
			if err != nil {
				return nil, 0, nil, err
			}
			sub, err := s.d.Submit(ctx, id, &toolwirev1.CallRequest{Tool: rec.Tool, ArgumentsJson: args, Continues: rec.Call,
				InputResponsesJson: rec.Submitting, ClientCapabilitiesJson: rec.Caps, IdempotencyKey: "mcp-task." + rec.Call,
				Session: rec.Session, Model: rec.Model})
			if err != nil {
				return nil, 0, nil, fmt.Errorf("toolwire: %w", err)
			}
			switch r := sub.Rejected; {
			case r != nil && r.GetError().GetRetryable():
				return rec, rev, &toolwirev1.GetResultResponse{CallId: rec.Call, State: toolwirev1.CallState_CALL_STATE_PENDING, Response: r}, nil
			case r != nil:
				next.Refusal, _ = proto.Marshal(r)
				next.Submitting = nil
			default:
				next.Call, next.Round, next.Answers, next.Submitting = sub.CallID, rec.Round+1, nil, nil
			}
		}
		r, err := s.storeTask(ctx, id, taskID, &next, rev)
		switch {
		case err == nil:
			rec, rev = &next, r
		case bus.IsCASConflict(err):
			// Another replica moved it on: read where to.
			if rec, rev, err = s.loadTask(ctx, id, taskID); err != nil {
				return nil, 0, nil, err
			}
		default:
			return nil, 0, nil, fmt.Errorf("toolwire: write task: %w", err)
		}
	}
	return nil, 0, nil, errors.New("toolwire: the task changes too often; try again")
}

// state is the state of the call a task is at; a call whose records are
// gone makes the task unknown.
func (s *Server) state(ctx context.Context, id identity.Identity, taskID, callID string) (*toolwirev1.GetResultResponse, error) {
	g, err := s.d.GetResult(ctx, id, callID, 0)
	if err != nil {
		return nil, fmt.Errorf("toolwire: %w", err)
	}
	if g.State == toolwirev1.CallState_CALL_STATE_UNKNOWN {
		return nil, unknownTask(taskID)
	}
	return g, nil
}

// answered reports whether answers hold one for every request of in.
func answered(answers map[string]string, in *toolwirev1.InputRequired) bool {
	for k := range in.GetRequests() {
		if answers[k] == "" {
			return false
		}
	}
	return len(in.GetRequests()) > 0
}

// cancelTask cancels the call the task is at (answers being submitted
// are submitted first, and that call cancelled); a task waiting for input
// has none running and is marked cancelled. A task that ended is left as
// it is.
func (s *Server) cancelTask(ctx context.Context, id identity.Identity, taskID string, rec *taskRecord, rev uint64) error {
	for range 5 {
		if rec.Submitting != nil {
			var err error
			if rec, rev, _, err = s.advance(ctx, id, taskID, rec, rev); err != nil {
				return err
			}
		}
		if rec.Cancelled || len(rec.Refusal) > 0 {
			return nil
		}
		g, err := s.state(ctx, id, taskID, rec.Call)
		if err != nil {
			return err
		}
		if g.State != toolwirev1.CallState_CALL_STATE_DONE {
			_, err := s.d.Cancel(ctx, id, rec.Call, "cancelled by the MCP client (tasks/cancel)")
			return err
		}
		if g.GetResponse().GetInputRequired() == nil {
			return nil
		}
		next := *rec
		next.Cancelled = true
		_, err = s.storeTask(ctx, id, taskID, &next, rev)
		if err == nil || !bus.IsCASConflict(err) {
			return err
		}
		// It moved on meanwhile: look again.
		if rec, rev, err = s.loadTask(ctx, id, taskID); err != nil || rec == nil {
			return cmpErr(err, unknownTask(taskID))
		}
	}
	return errors.New("toolwire: the task changes too often to cancel; try again")
}

func cmpErr(err, or error) error {
	if err != nil {
		return err
	}
	return or
}

func isJSONObject(b json.RawMessage) bool {
	var m map[string]json.RawMessage
	return json.Unmarshal(b, &m) == nil && m != nil
}
