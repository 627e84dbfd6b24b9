"""A stub OpenAI-compatible server for the evaluation tests and benchmark (stdlib HTTP, 127.0.0.1 only).

Modes: `oracle` (answers from BFCL's ground truth), `abstain` (never calls), `error` (HTTP 500 on every
BFCL request), `drop` (closes the connection without answering), `empty` (200 with no content, no calls and no
tokens), `noparser` (tool calls left as
`<tool_call>` text in content, like vLLM without a tool parser), `malformed` (the probe gets a truncated call as text, like a
weak model on a server that does not enforce forced calls), `overlong` (oracle, but HTTP 400 with
vLLM's context-length message for prompts over `--max-chars`), `cut` (a reasoning trace stopped at the
output cap: text, no call, finish_reason "length"), `unparsed` (oracle, but every request the oracle would
answer without a call, as in irrelevance, gets a call the server's parser could not read: `UNPARSED_ANSWERS`
in turn, as text), `kinds` (each kind of answer in turn, `ANSWER_KINDS`: a structured call of the first
offered tool, call markup as text, plain text, a reasoning trace alone). The preflight probe is answered
correctly in every mode but `noparser`, so the client's later guards are what is tested. `--delay` slows each
BFCL answer (not the probe).
Every BFCL request's `max_tokens` is kept in `max_tokens_seen`, the probe's in `probe_max_tokens_seen`; with
`kv_tokens` the server publishes its KV-cache size on /metrics as vLLM does. With `template` it answers vLLM's
`POST /tokenize` (one token per character of the rendered prompt) and counts a chat request's prompt tokens
the same way: `thinking-on` and `thinking-off` render a Qwen3-like template whose generation prompt gets an
empty `<think>` block when enable_thinking is false, served with thinking on or off by default; `no-switch`
renders a template without a thinking switch (SmolLM2's). Without it, /tokenize answers 404.

    .venvs/eval/bin/python tests/evaluate/stub_server.py --port 8011 --model demo-step0000 --mode oracle
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from oracle_answers import OracleIndex  # noqa: E402

MODES = ("oracle", "abstain", "error", "drop", "empty", "noparser", "overlong", "malformed", "cut", "unparsed", "kinds")
# Calls a Hermes parser leaves as text, as templates over the first offered tool's name (as the handler sends it).
UNPARSED_ANSWERS = (
    '<tool_call>\n{{"name": "{name}", "arguments": {{"city": "Par',                      # broken JSON
    '<tool_call>\n{{"name": "{name}", "arguments": {{}}}}\n</tool_cal>',                  # wrong closing tag
    "I will look that up.\n{name}(query='the answer')",                                  # a call in prose
    '```json\n{{"name": "{name}", "arguments": {{}}}}\n```',                              # fenced JSON, no tags
)
ANSWER_KINDS = ("calls", "unparsed_call", "text", "empty")
TEMPLATES = ("thinking-on", "thinking-off", "no-switch")
BLOCK_SIZE = 16
_INDEX: OracleIndex | None = None
_INDEX_LOCK = threading.Lock()


def oracle_index() -> OracleIndex:
    global _INDEX
    with _INDEX_LOCK:
        if _INDEX is None:
            _INDEX = OracleIndex()
        return _INDEX


class StubServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, port: int, model: str, mode: str, delay: float = 0.0, max_chars: int = 4000,
                 max_model_len: int = 40960, kv_tokens: int | None = None, template: str | None = None) -> None:
        assert mode in MODES, mode
        assert template is None or template in TEMPLATES, template
        self.template = template
        self.model, self.mode, self.delay, self.max_chars, self.max_model_len = model, mode, delay, max_chars, max_model_len
        self.kv_tokens = kv_tokens
        self.requests = 0
        self.answered = 0  # BFCL requests answered by `unparsed` or `kinds`, which take their answers in turn
        self._turn_lock = threading.Lock()
        self.max_tokens_seen: list[int | None] = []
        self.probe_max_tokens_seen: list[int | None] = []
        self.index = oracle_index() if mode in ("oracle", "overlong", "unparsed") else None
        super().__init__(("127.0.0.1", port), Handler)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"

    def next_turn(self) -> int:
        with self._turn_lock:
            self.answered += 1
            return self.answered - 1

    def start(self) -> StubServer:
        threading.Thread(target=self.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        self.shutdown()
        self.server_close()


def render(template: str, messages: list[dict], chat_template_kwargs: dict | None) -> str:
    """A chat prompt as the stub's `template` renders it, the request's kwargs over the served default."""
    kwargs = {"enable_thinking": template != "thinking-off", **(chat_template_kwargs or {})}
    text = "".join(f"<|im_start|>{m.get('role')}\n{m.get('content') or ''}<|im_end|>\n" for m in messages)
    text += "<|im_start|>assistant\n"
    if template != "no-switch" and kwargs["enable_thinking"] is False:
        text += "<think>\n\n</think>\n\n"
    return text


def _completion(model: str, content: str | None, calls: list[tuple[str, dict]], prompt_chars: int) -> dict:
    tool_calls = [{"id": f"call_{i}", "type": "function",
                   "function": {"name": name, "arguments": json.dumps(args)}} for i, (name, args) in enumerate(calls)]
    message = {"role": "assistant", "content": content, "tool_calls": tool_calls}
    return {"id": "chatcmpl-stub", "object": "chat.completion", "created": int(time.time()), "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}],
            "usage": {"prompt_tokens": prompt_chars // 4 + 1, "completion_tokens": 7, "total_tokens": prompt_chars // 4 + 8}}


class Handler(BaseHTTPRequestHandler):
    server: StubServer

    def log_message(self, *args) -> None:
        pass

    def _send(self, status: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        if self.path.rstrip("/") in ("/v1/models", "/health"):
            self._send(200, {"object": "list", "data": [
                {"id": self.server.model, "object": "model", "max_model_len": self.server.max_model_len}]})
        elif self.path == "/metrics" and self.server.kv_tokens:
            data = (f'vllm:cache_config_info{{block_size="{BLOCK_SIZE}",cache_dtype="auto",engine="0",'
                    f'num_gpu_blocks="{self.server.kv_tokens // BLOCK_SIZE}"}} 1.0\n').encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        else:
            self._send(404, {"error": "not found"})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", 0))
        body = json.loads(self.rfile.read(length) or b"{}")
        if self.path == "/tokenize" and self.server.template:
            tokens = [ord(c) for c in render(self.server.template, body.get("messages", []),
                                             body.get("chat_template_kwargs"))]
            return self._send(200, {"tokens": tokens, "count": len(tokens),
                                    "max_model_len": self.server.max_model_len})
        if self.path.rstrip("/") != "/v1/chat/completions":
            return self._send(404, {"error": "not found"})
        if body.get("model") != self.server.model:
            return self._send(404, {"error": {"message": f"The model `{body.get('model')}` does not exist."}})
        if self.server.template and not body.get("tools"):
            # The probe's thinking witness (preflight.observe_thinking): no BFCL request comes without tools.
            reply = _completion(self.server.model, "Hello.", [], 0)
            reply["usage"]["prompt_tokens"] = len(render(self.server.template, body.get("messages", []),
                                                         body.get("chat_template_kwargs")))
            return self._send(200, reply)
        self.server.requests += 1
        messages, tools, mode = body.get("messages", []), body.get("tools", []), self.server.mode
        prompt_chars = len(json.dumps(messages)) + len(json.dumps(tools))
        is_probe = len(messages) == 1 and "Call the get_weather tool." in str(messages[0].get("content"))
        seen = self.server.probe_max_tokens_seen if is_probe else self.server.max_tokens_seen
        seen.append(body.get("max_tokens"))
        if self.server.delay and not is_probe:
            time.sleep(self.server.delay)
        if is_probe:
            calls = [("get_weather", {"city": "Paris"})]
            if mode == "noparser":
                text = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
                return self._send(200, _completion(self.server.model, text, [], prompt_chars))
            if mode == "malformed":
                text = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Par'
                return self._send(200, _completion(self.server.model, text, [], prompt_chars))
            return self._send(200, _completion(self.server.model, None, calls, prompt_chars))
        if mode == "error":
            return self._send(500, {"error": {"message": "stub: internal server error"}})
        if mode == "drop":
            self.close_connection = True
            self.connection.close()
            return None
        if mode == "empty":
            reply = _completion(self.server.model, "", [], prompt_chars)
            reply["usage"]["completion_tokens"] = 0
            return self._send(200, reply)
        if mode == "overlong" and prompt_chars > self.server.max_chars:
            return self._send(400, {"object": "error", "type": "BadRequestError", "code": 400, "message":
                                    f"This model's maximum context length is {self.server.max_chars // 4} tokens. "
                                    f"However, your request has {prompt_chars // 4} input tokens. "
                                    "Please reduce the length of the input messages."})
        if mode == "cut":
            # vLLM's reasoning parser keeps a trace that never closed out of `content`.
            reply = _completion(self.server.model, None, [], prompt_chars)
            reply["choices"][0]["finish_reason"] = "length"
            reply["choices"][0]["message"]["reasoning_content"] = "The user wants something; first I should che"
            reply["usage"]["completion_tokens"] = body.get("max_tokens") or 7
            return self._send(200, reply)
        if mode == "kinds":
            return self._send(200, _answer_of_kind(self.server.model, ANSWER_KINDS[self.server.next_turn() % 4],
                                                   tools, prompt_chars))
        if mode == "abstain" or self.server.index is None:
            return self._send(200, _completion(self.server.model, "I cannot help with that.", [], prompt_chars))
        calls = self.server.index.answer(messages, tools) or []
        if mode == "noparser" and calls:
            text = "".join(f'<tool_call>\n{json.dumps({"name": n, "arguments": a})}\n</tool_call>' for n, a in calls)
            return self._send(200, _completion(self.server.model, text, [], prompt_chars))
        if mode == "unparsed" and not calls and tools:
            template = UNPARSED_ANSWERS[self.server.next_turn() % len(UNPARSED_ANSWERS)]
            text = template.format(name=tools[0]["function"]["name"])
            return self._send(200, _completion(self.server.model, text, [], prompt_chars))
        return self._send(200, _completion(self.server.model, None if calls else "Done.", calls, prompt_chars))


def _answer_of_kind(model: str, kind: str, tools: list[dict], prompt_chars: int) -> dict:
    name = tools[0]["function"]["name"] if tools else "get_weather"
    if kind == "calls":
        return _completion(model, None, [(name, {})], prompt_chars)
    if kind == "unparsed_call":
        return _completion(model, UNPARSED_ANSWERS[0].format(name=name), [], prompt_chars)
    if kind == "text":
        return _completion(model, "No tool here fits that request.", [], prompt_chars)
    # Tokens came back, but only a reasoning trace: nothing is left once it is removed.
    return _completion(model, "<think>\nNothing to do.\n</think>\n\n", [], prompt_chars)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--port", type=int, default=8011)
    parser.add_argument("--model", required=True)
    parser.add_argument("--mode", choices=MODES, default="oracle")
    parser.add_argument("--delay", type=float, default=0.0)
    parser.add_argument("--max-chars", type=int, default=4000)
    parser.add_argument("--kv-tokens", type=int, help="publish a KV cache of this many tokens on /metrics")
    parser.add_argument("--template", choices=TEMPLATES, help="answer /tokenize with this chat template")
    args = parser.parse_args()
    server = StubServer(args.port, args.model, args.mode, args.delay, args.max_chars, kv_tokens=args.kv_tokens,
                        template=args.template)
    print(f"stub {args.mode} serving {args.model} at {server.base_url} on GPU "
          f"{os.environ.get('CUDA_VISIBLE_DEVICES', 'none')}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
