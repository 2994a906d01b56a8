"""An OpenAI-compatible chat-completions endpoint over real HTTP, for tests of the agent's real-LLM path.

The client under test (langchain-openai) talks to it exactly as to a served model, streaming or not; what the model
says comes from a function of the request, so a test scripts the model's tool calls and nothing else.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

# The model's turn: {"content": text}, {"tool_calls": [(name, arguments)]}, or (status, error body) to fail the call.
Answer = Callable[[dict, dict], "dict | tuple[int, dict]"]


@contextmanager
def chat_endpoint(answer: Answer) -> Iterator[tuple[str, list[dict]]]:
    """(base URL, the requests seen: {"authorization", "body"} each) of an endpoint where `answer` speaks."""
    seen: list[dict] = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(answer, seen))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1", seen
    finally:
        server.shutdown()
        server.server_close()


def _handler(answer: Answer, seen: list[dict]) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            seen.append({"authorization": self.headers.get("Authorization"), "body": body})
            turn = answer(body, dict(self.headers))
            if isinstance(turn, tuple):
                status, error = turn
                return self._send(status, "application/json", json.dumps(error).encode())
            message, finish = _message(turn)
            if body.get("stream"):
                return self._send(200, "text/event-stream", _stream(body["model"], message, finish))
            reply = {"id": "c", "object": "chat.completion", "created": 0, "model": body["model"],
                     "choices": [{"index": 0, "message": message, "finish_reason": finish}]}  # fmt: skip
            return self._send(200, "application/json", json.dumps(reply).encode())

        def _send(self, status: int, kind: str, data: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:  # keep the test output clean
            pass

    return Handler


def _message(turn: dict) -> tuple[dict, str]:
    if "tool_calls" not in turn:
        return {"role": "assistant", "content": turn["content"]}, "stop"
    calls = [{"id": f"call_{number}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
             for number, (name, args) in enumerate(turn["tool_calls"])]  # fmt: skip
    return {"role": "assistant", "content": None, "tool_calls": calls}, "tool_calls"


def _stream(model: str, message: dict, finish: str) -> bytes:
    delta = dict(message)
    if "tool_calls" in delta:  # a streamed tool call carries its index
        delta["tool_calls"] = [{"index": number, **call} for number, call in enumerate(delta["tool_calls"])]
    chunks = [{"choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
              {"choices": [{"index": 0, "delta": {}, "finish_reason": finish}]}]  # fmt: skip
    lines = [{"id": "c", "object": "chat.completion.chunk", "created": 0, "model": model, **chunk} for chunk in chunks]
    return b"".join(b"data: " + json.dumps(line).encode() + b"\n\n" for line in lines) + b"data: [DONE]\n\n"
