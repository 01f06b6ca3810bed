import * as http from "node:http";
import { type DescMessage, type DescMethodUnary, type MessageInitShape, type MessageShape } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import type { Http2SessionManager } from "@connectrpc/connect-node";
/** Connect's error codes in snake case, as TransportError.code gives them. */
export declare const codeNames: Record<number, string>;
/** What a unary request is given. */
export interface UnaryCallOptions {
    signal?: AbortSignal;
    timeoutMs: number;
}
/** How the client's unary path reaches the dispatcher. */
export interface UnaryConfig {
    /** The base URL, without a trailing slash (a path prefix is kept). */
    base: URL;
    json: boolean;
    /** Largest request and answer, in bytes. */
    maxBytes: number;
    userAgent: string;
    apiKey?: string;
    /** HTTP/1.1: the client's agent. */
    agent?: http.Agent;
    /** HTTP/2: the client's connection (shared with its watches). */
    session?: Http2SessionManager;
}
/** The unary RPCs of a client: one `call` per request. */
export declare class Unary {
    private readonly cfg;
    private readonly prefix;
    private readonly headers;
    private readonly readOpts;
    private readonly h1?;
    constructor(cfg: UnaryConfig);
    /** One unary RPC: the answer's message, or a ConnectError (the signal's reason when it aborted). */
    call<I extends DescMessage, O extends DescMessage>(method: DescMethodUnary<I, O>, input: MessageInitShape<I>, o: UnaryCallOptions): Promise<MessageShape<O>>;
    private encode;
    private decode;
    private sendH1;
    private sendH2;
}
/** Connect's error JSON in an answer, or `fallback` when the body is not one (as connect-es reads it). */
export declare function errorFromJson(body: Buffer, fallback: ConnectError): ConnectError;
/** Connect's code for an HTTP status without a Connect error (https://connectrpc.com/docs/protocol/#http-to-error-code). */
export declare function codeFromHttpStatus(status: number): Code;
