#!/usr/bin/env python3
"""A tool written in Python, served to the toolwire fleet as an MCP server
over stdio: the worker's MCP executor starts this process, lists its tools
(registered as mcp__<server>__<tool>) and calls them. The standard library
only: MCP over stdio is JSON-RPC 2.0, one message a line.

The tool, word_stats, counts the words and lines of a text and names its
most frequent words; it reports progress when the caller asked for it.
"""

import json
import re
import sys
from collections import Counter

MAX_LINE = 1 << 20  # a request line longer than this is refused, not parsed
PROTOCOL = "2025-06-18"
# The protocol versions this server speaks; initialize answers the client's
# when it is one of them, else the newest (MCP's version negotiation).
SUPPORTED = ("2025-06-18", "2025-03-26", "2024-11-05")

WORD_STATS = {
    "name": "word_stats",
    "title": "Word statistics",
    "description": "Counts the words and lines of a text and lists its most frequent words.",
    "inputSchema": {
        "type": "object",
        "properties": {
            "text": {"type": "string", "description": "the text to count"},
            "top": {"type": "integer", "minimum": 1, "maximum": 20, "description": "how many frequent words"},
        },
        "required": ["text"],
        "additionalProperties": False,
    },
    "outputSchema": {
        "type": "object",
        "properties": {
            "words": {"type": "integer"},
            "lines": {"type": "integer"},
            "top": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["words", "lines", "top"],
    },
    "annotations": {"readOnlyHint": True, "idempotentHint": True, "openWorldHint": False},
}


def send(msg):
    sys.stdout.write(json.dumps(msg, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def word_stats(args, progress):
    text, n = args.get("text"), args.get("top", 3)
    if not isinstance(text, str):
        return tool_error("text must be a string")
    if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= 20:
        return tool_error("top must be an integer from 1 to 20")
    words = re.findall(r"[\w']+", text.lower())
    progress(50, "counted")
    top = [w for w, _ in Counter(words).most_common(n)]
    out = {"words": len(words), "lines": len(text.splitlines()), "top": top}
    return {"content": [{"type": "text", "text": f"{out['words']} words, {out['lines']} lines; top: {', '.join(top)}"}],
            "structuredContent": out}


def tool_error(message):
    return {"content": [{"type": "text", "text": message}], "isError": True}


def handle(req):
    method, params = req.get("method"), req.get("params")
    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise ValueError("params must be an object")
    if method == "initialize":
        version = params.get("protocolVersion")
        version = version if version in SUPPORTED else PROTOCOL
        return {"protocolVersion": version, "capabilities": {"tools": {}},
                "serverInfo": {"name": "python-word-stats", "version": "1.0.0"}}
    if method == "ping":
        return {}
    if method == "tools/list":
        return {"tools": [WORD_STATS]}
    if method == "tools/call":
        if params.get("name") != "word_stats":
            raise LookupError(f"unknown tool {params.get('name')!r}")
        meta = params.get("_meta")
        token = meta.get("progressToken") if isinstance(meta, dict) else None

        def progress(pct, message):
            if token is not None:
                send({"jsonrpc": "2.0", "method": "notifications/progress",
                      "params": {"progressToken": token, "progress": pct, "total": 100, "message": message}})
        args = params.get("arguments")
        if args is not None and not isinstance(args, dict):
            raise ValueError("arguments must be an object")
        return word_stats(args or {}, progress)
    raise NotImplementedError(method)


def main():
    for line in iter(lambda: sys.stdin.readline(MAX_LINE + 1), ""):
        if len(line) > MAX_LINE:
            send({"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "request too long"}})
            return  # the rest of the line cannot be told from the next message
        try:
            req = json.loads(line)
        except ValueError:
            send({"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "parse error"}})
            continue
        if not isinstance(req, dict) or "id" not in req or "method" not in req:
            continue  # a notification (initialized, cancelled) or a response: nothing to answer
        send(answer(req))


def answer(req):
    """The JSON-RPC answer to a request; never raises, whatever it holds."""
    rid = req["id"]
    if not isinstance(req["method"], str):
        return {"jsonrpc": "2.0", "id": rid, "error": {"code": -32600, "message": "invalid request"}}
    try:
        return {"jsonrpc": "2.0", "id": rid, "result": handle(req)}
    except (LookupError, ValueError, TypeError) as e:
        return {"jsonrpc": "2.0", "id": rid, "error": {"code": -32602, "message": str(e)}}
    except NotImplementedError as e:
        return {"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": f"method not found: {e}"}}
    except Exception:  # noqa: BLE001 - a bug of the tool must not end the server
        return {"jsonrpc": "2.0", "id": rid, "error": {"code": -32603, "message": "internal error"}}


if __name__ == "__main__":
    main()
