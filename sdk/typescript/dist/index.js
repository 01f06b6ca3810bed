// @toolwire/client: a client of the toolwire dispatcher's API.
export * from "./errors.js";
export { Client, encodeArgs, HEADROOM, MAX_MESSAGE_BYTES, } from "./client.js";
export { CallEvent, Result, } from "./types.js";
