export * from "./errors.js";
export { Client, encodeArgs, HEADROOM, MAX_MESSAGE_BYTES, type Args, type ApproveOptions, type CallOptions, type ClientOptions, type ListOptions, type RequestOptions, type SubmitOptions, type WatchOptions, } from "./client.js";
export { CallEvent, Result, type AppliedIntent, type ApplyIntentsResult, type Approval, type ApproveResult, type Content, type Grant, type Intent, type LimitUsage, type ResponseMeta, type Session, type Submission, type ToolSpec, type Usage, } from "./types.js";
