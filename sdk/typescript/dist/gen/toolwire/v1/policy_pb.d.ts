import type { GenEnum, GenFile, GenMessage } from "@bufbuild/protobuf/codegenv2";
import type { Timestamp } from "@bufbuild/protobuf/wkt";
import type { Caller } from "./call_pb.js";
import type { Message } from "@bufbuild/protobuf";
/**
 * Describes the file toolwire/v1/policy.proto.
 */
export declare const file_toolwire_v1_policy: GenFile;
/**
 * PolicyDecision is the record of one decision: what the audit keeps of
 * it, on the call (allowed), the REJECTED event (denied) and the
 * AWAITING_APPROVAL event (asked).
 *
 * @generated from message toolwire.v1.PolicyDecision
 */
export type PolicyDecision = Message<"toolwire.v1.PolicyDecision"> & {
    /**
     * @generated from field: toolwire.v1.PolicyOutcome outcome = 1;
     */
    outcome: PolicyOutcome;
    /**
     * Version of the policy document decided by ("sha256:<hex>"); empty
     * when no policy was in force.
     *
     * @generated from field: string version = 2;
     */
    version: string;
    /**
     * The rule that decided; empty when a default, requires_approval or
     * the absence of rules decided.
     *
     * @generated from field: string rule_id = 3;
     */
    ruleId: string;
    /**
     * "tenant" or "agent" when that layer's default decided.
     *
     * @generated from field: string default_layer = 4;
     */
    defaultLayer: string;
    /**
     * The tool's spec requires approval (which asks whatever the rules say).
     *
     * @generated from field: bool requires_approval = 5;
     */
    requiresApproval: boolean;
    /**
     * The grant that turned an ask into an allow.
     *
     * @generated from field: string grant_id = 6;
     */
    grantId: string;
    /**
     * The approval that turned an ask into an allow.
     *
     * @generated from field: string approval_id = 7;
     */
    approvalId: string;
    /**
     * What the caller was told: the deciding rule's reason (or id), never
     * the rule's text.
     *
     * @generated from field: string reason = 8;
     */
    reason: string;
};
/**
 * Describes the message toolwire.v1.PolicyDecision.
 * Use `create(PolicyDecisionSchema)` to create a new message.
 */
export declare const PolicyDecisionSchema: GenMessage<PolicyDecision>;
/**
 * Approval is a call an ask decision parked, and what became of it. Its id
 * is the parked call's id.
 *
 * @generated from message toolwire.v1.Approval
 */
export type Approval = Message<"toolwire.v1.Approval"> & {
    /**
     * @generated from field: string id = 1;
     */
    id: string;
    /**
     * @generated from field: toolwire.v1.ApprovalState state = 2;
     */
    state: ApprovalState;
    /**
     * @generated from field: string tool = 3;
     */
    tool: string;
    /**
     * @generated from field: string spec_version = 4;
     */
    specVersion: string;
    /**
     * @generated from field: toolwire.v1.Caller caller = 5;
     */
    caller?: Caller | undefined;
    /**
     * The call's arguments as the approver sees them: exact JSON text, with
     * the fields the tool's spec marks secret redacted.
     *
     * @generated from field: string arguments_json = 6;
     */
    argumentsJson: string;
    /**
     * Hex SHA-256 of the canonical arguments the approval is bound to.
     *
     * @generated from field: string args_sha256 = 7;
     */
    argsSha256: string;
    /**
     * The decision that asked (its reason is why).
     *
     * @generated from field: toolwire.v1.PolicyDecision decision = 8;
     */
    decision?: PolicyDecision | undefined;
    /**
     * @generated from field: google.protobuf.Timestamp created_at = 9;
     */
    createdAt?: Timestamp | undefined;
    /**
     * An approval not decided by then expires.
     *
     * @generated from field: google.protobuf.Timestamp expires_at = 10;
     */
    expiresAt?: Timestamp | undefined;
    /**
     * Who decided (the approver's agent identity), how and why.
     *
     * @generated from field: string approver = 11;
     */
    approver: string;
    /**
     * @generated from field: toolwire.v1.ApprovalScope scope = 12;
     */
    scope: ApprovalScope;
    /**
     * @generated from field: string reason = 13;
     */
    reason: string;
    /**
     * @generated from field: google.protobuf.Timestamp decided_at = 14;
     */
    decidedAt?: Timestamp | undefined;
    /**
     * The grant an approval for a session, agent or tenant stored.
     *
     * @generated from field: string grant_id = 15;
     */
    grantId: string;
};
/**
 * Describes the message toolwire.v1.Approval.
 * Use `create(ApprovalSchema)` to create a new message.
 */
export declare const ApprovalSchema: GenMessage<Approval>;
/**
 * Grant is a standing approval: it turns the asks of the calls it covers
 * into allows, until it expires or is revoked. It never covers a deny.
 *
 * @generated from message toolwire.v1.Grant
 */
export type Grant = Message<"toolwire.v1.Grant"> & {
    /**
     * @generated from field: string id = 1;
     */
    id: string;
    /**
     * "session", "agent" or "tenant".
     *
     * @generated from field: string layer = 2;
     */
    layer: string;
    /**
     * @generated from field: string tenant = 3;
     */
    tenant: string;
    /**
     * @generated from field: string agent = 4;
     */
    agent: string;
    /**
     * @generated from field: string session = 5;
     */
    session: string;
    /**
     * Glob of the tool names covered.
     *
     * @generated from field: string tool = 6;
     */
    tool: string;
    /**
     * Argument field path -> glob; every value at a path must match.
     *
     * @generated from field: map<string, string> args = 7;
     */
    args: {
        [key: string]: string;
    };
    /**
     * Unset = no expiry.
     *
     * @generated from field: google.protobuf.Timestamp expires_at = 8;
     */
    expiresAt?: Timestamp | undefined;
    /**
     * @generated from field: string approval_id = 9;
     */
    approvalId: string;
    /**
     * @generated from field: string approver = 10;
     */
    approver: string;
    /**
     * @generated from field: google.protobuf.Timestamp created_at = 11;
     */
    createdAt?: Timestamp | undefined;
};
/**
 * Describes the message toolwire.v1.Grant.
 * Use `create(GrantSchema)` to create a new message.
 */
export declare const GrantSchema: GenMessage<Grant>;
/**
 * PolicyVersion is one applied policy document.
 *
 * @generated from message toolwire.v1.PolicyVersion
 */
export type PolicyVersion = Message<"toolwire.v1.PolicyVersion"> & {
    /**
     * "sha256:<hex>" of the document's canonical form.
     *
     * @generated from field: string version = 1;
     */
    version: string;
    /**
     * The tenant the document is in force for; "*" = the installation
     * document, in force for tenants without one of their own.
     *
     * @generated from field: string tenant = 2;
     */
    tenant: string;
    /**
     * @generated from field: google.protobuf.Timestamp applied_at = 3;
     */
    appliedAt?: Timestamp | undefined;
    /**
     * Who applied it (agent identity, or "--policy" for a dispatcher flag).
     *
     * @generated from field: string applied_by = 4;
     */
    appliedBy: string;
    /**
     * @generated from field: string comment = 5;
     */
    comment: string;
    /**
     * Rule and test counts.
     *
     * @generated from field: int32 rules = 6;
     */
    rules: number;
    /**
     * @generated from field: int32 tests = 7;
     */
    tests: number;
};
/**
 * Describes the message toolwire.v1.PolicyVersion.
 * Use `create(PolicyVersionSchema)` to create a new message.
 */
export declare const PolicyVersionSchema: GenMessage<PolicyVersion>;
/**
 * PolicyOutcome is what a policy decided about a call.
 *
 * @generated from enum toolwire.v1.PolicyOutcome
 */
export declare enum PolicyOutcome {
    /**
     * @generated from enum value: POLICY_OUTCOME_UNSPECIFIED = 0;
     */
    UNSPECIFIED = 0,
    /**
     * @generated from enum value: POLICY_OUTCOME_ALLOW = 1;
     */
    ALLOW = 1,
    /**
     * A person (or the orchestrator's user, with a token) must approve.
     *
     * @generated from enum value: POLICY_OUTCOME_ASK = 2;
     */
    ASK = 2,
    /**
     * @generated from enum value: POLICY_OUTCOME_DENY = 3;
     */
    DENY = 3
}
/**
 * Describes the enum toolwire.v1.PolicyOutcome.
 */
export declare const PolicyOutcomeSchema: GenEnum<PolicyOutcome>;
/**
 * ApprovalState is where an approval is.
 *
 * @generated from enum toolwire.v1.ApprovalState
 */
export declare enum ApprovalState {
    /**
     * @generated from enum value: APPROVAL_STATE_UNSPECIFIED = 0;
     */
    UNSPECIFIED = 0,
    /**
     * Parked: waiting for an approver.
     *
     * @generated from enum value: APPROVAL_STATE_PENDING = 1;
     */
    PENDING = 1,
    /**
     * Approved: the call was (or is being) published.
     *
     * @generated from enum value: APPROVAL_STATE_APPROVED = 2;
     */
    APPROVED = 2,
    /**
     * Denied: the caller got PERMISSION_DENIED with the approver's reason.
     *
     * @generated from enum value: APPROVAL_STATE_DENIED = 3;
     */
    DENIED = 3,
    /**
     * Nobody decided in time: the caller got EXPIRED.
     *
     * @generated from enum value: APPROVAL_STATE_EXPIRED = 4;
     */
    EXPIRED = 4
}
/**
 * Describes the enum toolwire.v1.ApprovalState.
 */
export declare const ApprovalStateSchema: GenEnum<ApprovalState>;
/**
 * ApprovalScope is what an approval covers.
 *
 * @generated from enum toolwire.v1.ApprovalScope
 */
export declare enum ApprovalScope {
    /**
     * The parked call only (the default).
     *
     * @generated from enum value: APPROVAL_SCOPE_UNSPECIFIED = 0;
     */
    UNSPECIFIED = 0,
    /**
     * @generated from enum value: APPROVAL_SCOPE_ONCE = 1;
     */
    ONCE = 1,
    /**
     * The parked call, and a grant for later calls of the session.
     *
     * @generated from enum value: APPROVAL_SCOPE_SESSION = 2;
     */
    SESSION = 2,
    /**
     * ... of the agent.
     *
     * @generated from enum value: APPROVAL_SCOPE_AGENT = 3;
     */
    AGENT = 3,
    /**
     * ... of the whole tenant.
     *
     * @generated from enum value: APPROVAL_SCOPE_TENANT = 4;
     */
    TENANT = 4
}
/**
 * Describes the enum toolwire.v1.ApprovalScope.
 */
export declare const ApprovalScopeSchema: GenEnum<ApprovalScope>;
