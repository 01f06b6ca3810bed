"""The examples of the README and of docs/sdk.md, run against the real stack
as written there: the first call, the agent loop driven by a scripted
model, and the curl call of docs/sdk.md (made with urllib)."""

import contextlib
import io
import json
import os
import re
import unittest
import urllib.request

from .stack import API_KEY, URL, needs_stack, unique

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README = os.path.join(HERE, "README.md")
SDK_DOC = os.path.join(HERE, "..", "..", "docs", "sdk.md")


def example(name: str, path: str = README) -> str:
    """The python block after the file's `<!-- readme-test: name -->`."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    m = re.search(r"<!-- readme-test: %s -->\s*```python\n(.*?)```" % re.escape(name), text, re.S)
    if not m:
        raise AssertionError(f"{path} has no example {name!r}")
    return m.group(1)


@needs_stack
class ReadmeExamples(unittest.TestCase):
    def test_first_call_in_five_lines(self):
        code = example("first-call")
        self.assertLessEqual(len(code.strip().splitlines()), 5)
        out = io.StringIO()
        ns: dict = {}
        with contextlib.redirect_stdout(out):
            exec(compile(code, "README.md:first-call", "exec"), ns)
        ns["tw"].close()
        self.assertEqual(out.getvalue(), "hello\n")

    def test_docs_sdk_shows_the_same_first_call(self):
        self.assertEqual(example("first-call", SDK_DOC), example("first-call"))

    def test_docs_sdk_curl_call(self):
        with open(SDK_DOC, encoding="utf-8") as f:
            text = f.read()
        m = re.search(r"\$ curl -s((?:\s*-H ('[^']*'|\"[^\"]*\") \\\n)+)\s*-d '([^']*)' \\\n\s*http://127.0.0.1:8080(/\S+)",
                      text)
        self.assertIsNotNone(m, "docs/sdk.md's curl example")
        headers = dict(h[1:-1].replace("$TOOLWIRE_API_KEY", API_KEY).split(": ", 1)
                       for h in re.findall(r"-H ('[^']*'|\"[^\"]*\")", m.group(1)))
        self.assertEqual(headers["Authorization"], "Bearer " + API_KEY)  # as written, with the key filled in
        req = urllib.request.Request(URL + m.group(4), data=m.group(3).encode(), method="POST", headers=headers)
        with urllib.request.urlopen(req, timeout=30) as resp:
            answer = json.loads(resp.read())
        self.assertEqual(answer["state"], "CALL_STATE_DONE")
        self.assertEqual(answer["response"]["content"][0]["text"]["text"], "hi")

    def test_agent_loop(self):
        ns: dict = {}
        exec(compile(example("agent-loop"), "README.md:agent-loop", "exec"), ns)
        calls = [("echo", '{"text": "hi there"}'), ("echo", '{"text": "secret"}'), ("deploy", '{"name": "web"}'),
                 ("echo", '{"text": 1}')]
        seen_tools = []

        def model(messages, tools):
            seen_tools.append({t["function"]["name"] for t in tools})
            if len(messages) == 1:
                return {"role": "assistant", "content": None, "tool_calls": [
                    {"id": f"c{i}", "type": "function", "function": {"name": n, "arguments": a}}
                    for i, (n, a) in enumerate(calls)]}
            answers = [m["content"] for m in messages if m["role"] == "tool"]
            return {"role": "assistant", "content": json.dumps(answers)}

        final = ns["run_agent"](model, [{"role": "user", "content": "go"}], unique("agent"))
        answers = json.loads(final)
        self.assertEqual(answers[0], "hi there")
        self.assertIn("secrets are never echoed", answers[1])
        self.assertIn("needs a human's approval", answers[2])
        self.assertIn("VALIDATION", answers[3])
        self.assertIn("echo", seen_tools[0])
        ns["tw"].close()


if __name__ == "__main__":
    unittest.main()
