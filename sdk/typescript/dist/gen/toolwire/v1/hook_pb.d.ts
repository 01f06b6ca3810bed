import type { GenFile, GenMessage } from "@bufbuild/protobuf/codegenv2";
import type { ToolCall } from "./call_pb.js";
import type { Content } from "./content_pb.js";
import type { ToolError } from "./error_pb.js";
import type { HookNote, ToolResponse } from "./response_pb.js";
import type { Message } from "@bufbuild/protobuf";
/**
 * Describes the file toolwire/v1/hook.proto.
 */
export declare const file_toolwire_v1_hook: GenFile;
/**
 * AfterHookRequest is what a worker sends (a NATS request on
 * `<prefix>.hook.after`, served by the dispatchers in one queue group) to
 * have the after-hooks of a call run on its response before the response
 * is stored.
 *
 * @generated from message toolwire.v1.AfterHookRequest
 */
export type AfterHookRequest = Message<"toolwire.v1.AfterHookRequest"> & {
    /**
     * @generated from field: toolwire.v1.ToolCall call = 1;
     */
    call?: ToolCall | undefined;
    /**
     * The terminal response, its secrets already redacted.
     *
     * @generated from field: toolwire.v1.ToolResponse response = 2;
     */
    response?: ToolResponse | undefined;
};
/**
 * Describes the message toolwire.v1.AfterHookRequest.
 * Use `create(AfterHookRequestSchema)` to create a new message.
 */
export declare const AfterHookRequestSchema: GenMessage<AfterHookRequest>;
/**
 * AfterHookReply answers an AfterHookRequest. The worker applies it to
 * its own response: a hook changes content, never the outcome of a failed
 * call.
 *
 * @generated from message toolwire.v1.AfterHookReply
 */
export type AfterHookReply = Message<"toolwire.v1.AfterHookReply"> & {
    /**
     * The content and structured output replace the response's.
     *
     * @generated from field: bool changed = 1;
     */
    changed: boolean;
    /**
     * @generated from field: repeated toolwire.v1.Content content = 2;
     */
    content: Content[];
    /**
     * @generated from field: string structured_json = 3;
     */
    structuredJson: string;
    /**
     * Set when a hook withheld the result, or failed closed: the call's
     * error instead of its result (the worker adds the side effects).
     *
     * @generated from field: toolwire.v1.ToolError withheld = 4;
     */
    withheld?: ToolError | undefined;
    /**
     * @generated from field: repeated toolwire.v1.HookNote notes = 5;
     */
    notes: HookNote[];
    /**
     * Set when the request was not served (the dispatcher is busy or
     * stopping): the worker asks again until its wait ends.
     *
     * @generated from field: string retry_reason = 6;
     */
    retryReason: string;
    /**
     * A hook redacted the response: what it did not give back does not
     * pass, the tool's result `_meta` (which no hook sees) included.
     *
     * @generated from field: bool redacted = 7;
     */
    redacted: boolean;
};
/**
 * Describes the message toolwire.v1.AfterHookReply.
 * Use `create(AfterHookReplySchema)` to create a new message.
 */
export declare const AfterHookReplySchema: GenMessage<AfterHookReply>;
