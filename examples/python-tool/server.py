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
    text = args.get("text")
    if not isinstance(text, str):
        return {"content": [{"type": "text", "text": "text must be a string"}], "isError": True}
    words = re.findall(r"[\w']+", text.lower())
    progress(50, "counted")
    top = [w for w, _ in Counter(words).most_common(int(args.get("top", 3)))]
    out = {"words": len(words), "lines": len(text.splitlines()), "top": top}
    return {"content": [{"type": "text", "text": f"{out['words']} words, {out['lines']} lines; top: {', '.join(top)}"}],
            "structuredContent": out}


def handle(req):
    method, params = req.get("method"), req.get("params") or {}
    if method == "initialize":
        version = params.get("protocolVersion") or PROTOCOL
        return {"protocolVersion": version, "capabilities": {"tools": {}},
                "serverInfo": {"name": "python-word-stats", "version": "1.0.0"}}
    if method == "ping":
        return {}
    if method == "tools/list":
        return {"tools": [WORD_STATS]}
    if method == "tools/call":
        if params.get("name") != "word_stats":
            raise LookupError(f"unknown tool {params.get('name')!r}")
        token = (params.get("_meta") or {}).get("progressToken")

        def progress(pct, message):
            if token is not None:
                send({"jsonrpc": "2.0", "method": "notifications/progress",
                      "params": {"progressToken": token, "progress": pct, "total": 100, "message": message}})
        return word_stats(params.get("arguments") or {}, progress)
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
        if not isinstance(req, dict) or "id" not in req:
            continue  # a notification (initialized, cancelled): nothing to answer
        try:
            send({"jsonrpc": "2.0", "id": req["id"], "result": handle(req)})
        except LookupError as e:
            send({"jsonrpc": "2.0", "id": req["id"], "error": {"code": -32602, "message": str(e)}})
        except NotImplementedError as e:
            send({"jsonrpc": "2.0", "id": req["id"], "error": {"code": -32601, "message": f"method not found: {e}"}})


if __name__ == "__main__":
    main()
