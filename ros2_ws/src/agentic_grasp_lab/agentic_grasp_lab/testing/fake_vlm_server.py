"""A scripted OpenAI-compatible chat-completions server for tests (core and ROS level).

It stands in for vLLM: a threaded ``http.server`` on 127.0.0.1 (port 0 by default, so tests
never collide) that answers each ``POST /v1/chat/completions`` with the next
:class:`ScriptedReply` of its script, and records every request (headers and JSON body) so
tests can assert on what the client sent. ``GET /v1/models`` lists ``model`` (a health
check, as vLLM offers).

    with FakeVlmServer([ScriptedReply.answer("not json"), ScriptedReply.answer(valid)]) as srv:
        backend = VlmBackend(VlmConfig(url=srv.url))
        ...
        assert len(srv.requests) == 2

A reply can be an assistant answer (wrapped in a chat-completions envelope with ``usage``),
an HTTP error with a vLLM-style error body, or a raw body; any of them after ``delay_s``
(the wait is interrupted by :meth:`FakeVlmServer.stop`, so a slow reply never holds a test).
When the script runs out, ``default`` is used, or HTTP 500 "script exhausted".

Run as a process for launch tests (always answers with one canned JSON file)::

    python -m agentic_grasp_lab.testing.fake_vlm_server --port 8000 --answer answer.json
"""
from __future__ import annotations

import argparse
import json
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Deque, Dict, List, Optional, Sequence, Union

DEFAULT_MODEL = "qwen3-vl-8b-instruct-awq"


@dataclass
class ScriptedReply:
    """One scripted answer of the fake server."""

    status: int = 200
    content: Optional[str] = None
    body: Optional[bytes] = None
    delay_s: float = 0.0
    headers: Dict[str, str] = field(default_factory=dict)
    finish_reason: str = "stop"
    prompt_tokens: int = 350
    completion_tokens: Optional[int] = None
    #: Set: the reply waits for this event instead of a fixed time (``delay_s`` is then the
    #: longest wait), so a test holds a call open exactly as long as it needs, however slow
    #: the machine.
    release: Optional[threading.Event] = None

    @classmethod
    def answer(cls, content: Union[str, Dict[str, Any], List[Any]], *, delay_s: float = 0.0,
               finish_reason: str = "stop", prompt_tokens: int = 350,
               completion_tokens: Optional[int] = None,
               release: Optional[threading.Event] = None) -> "ScriptedReply":
        """HTTP 200 whose assistant message is ``content`` (JSON-encoded if not a string)."""
        text = content if isinstance(content, str) else json.dumps(content)
        return cls(content=text, delay_s=delay_s, finish_reason=finish_reason,
                   prompt_tokens=prompt_tokens, completion_tokens=completion_tokens,
                   release=release)

    def wait(self, stop: threading.Event) -> bool:
        """Wait as the script says; False when the server stops meanwhile."""
        if self.release is None:
            return not (self.delay_s > 0 and stop.wait(self.delay_s))
        deadline = time.monotonic() + self.delay_s
        while not self.release.wait(0.05):
            if stop.is_set():
                return False
            if time.monotonic() >= deadline:
                break
        return True

    @classmethod
    def error(cls, status: int, message: str = "error", *, delay_s: float = 0.0,
              headers: Optional[Dict[str, str]] = None) -> "ScriptedReply":
        """An HTTP error with vLLM's error body ``{"object": "error", "message": ...}``."""
        body = json.dumps({"object": "error", "message": message, "type": "Error",
                           "code": status}).encode("utf-8")
        return cls(status=status, body=body, delay_s=delay_s, headers=dict(headers or {}))

    @classmethod
    def raw(cls, body: Union[str, bytes], status: int = 200, *,
            delay_s: float = 0.0) -> "ScriptedReply":
        """A verbatim body (e.g. a broken envelope)."""
        data = body.encode("utf-8") if isinstance(body, str) else body
        return cls(status=status, body=data, delay_s=delay_s)

    def payload(self, model: str) -> bytes:
        if self.body is not None:
            return self.body
        content = self.content or ""
        completion = (self.completion_tokens if self.completion_tokens is not None
                      else max(1, len(content) // 4))
        envelope = {
            "id": "chatcmpl-fake", "object": "chat.completion", "created": 0, "model": model,
            "choices": [{"index": 0, "finish_reason": self.finish_reason,
                         "message": {"role": "assistant", "content": content}}],
            "usage": {"prompt_tokens": self.prompt_tokens, "completion_tokens": completion,
                      "total_tokens": self.prompt_tokens + completion},
        }
        return json.dumps(envelope).encode("utf-8")


@dataclass
class RecordedRequest:
    """What the client sent (header names lower-cased; ``json`` None if not JSON)."""

    method: str
    path: str
    headers: Dict[str, str]
    body: bytes
    json: Optional[Any]


class FakeVlmServer:
    """Threaded scripted chat-completions server; see the module docstring."""

    def __init__(self, script: Sequence[ScriptedReply] = (), *,
                 default: Optional[ScriptedReply] = None, model: str = DEFAULT_MODEL,
                 host: str = "127.0.0.1", port: int = 0):
        self.model = model
        self.default = default
        self._script: Deque[ScriptedReply] = deque(script)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.requests: List[RecordedRequest] = []
        self._httpd = ThreadingHTTPServer((host, port), self._handler_class())
        self._httpd.daemon_threads = True
        self._thread: Optional[threading.Thread] = None

    # -- lifecycle
    @property
    def port(self) -> int:
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        """Base URL to configure the client with (``.../v1``)."""
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> "FakeVlmServer":
        self._thread = threading.Thread(target=self._httpd.serve_forever,
                                        kwargs={"poll_interval": 0.05},
                                        name="fake-vlm-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5.0)

    def __enter__(self) -> "FakeVlmServer":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # -- script
    def push(self, *replies: ScriptedReply) -> None:
        with self._lock:
            self._script.extend(replies)

    def _next(self) -> ScriptedReply:
        with self._lock:
            if self._script:
                return self._script.popleft()
        if self.default is not None:
            return self.default
        return ScriptedReply.error(500, "fake server script exhausted")

    @property
    def chat_requests(self) -> List[RecordedRequest]:
        with self._lock:
            return [r for r in self.requests if r.path.endswith("/chat/completions")]

    def _record(self, request: RecordedRequest) -> None:
        with self._lock:
            self.requests.append(request)

    def _handler_class(self) -> type:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, fmt: str, *args: Any) -> None:  # keep test output clean
                return

            def _send(self, status: int, body: bytes,
                      headers: Optional[Dict[str, str]] = None) -> None:
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    for key, value in (headers or {}).items():
                        self.send_header(key, value)
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass                      # the client gave up (timeout test)

            def do_GET(self) -> None:  # noqa: N802 - http.server naming
                if self.path.rstrip("/").endswith("/models"):
                    body = json.dumps({"object": "list", "data": [
                        {"id": server.model, "object": "model"}]}).encode("utf-8")
                    self._send(200, body)
                else:
                    self._send(404, b'{"object": "error", "message": "not found"}')

            def do_POST(self) -> None:  # noqa: N802 - http.server naming
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                try:
                    parsed = json.loads(body.decode("utf-8"))
                except (ValueError, UnicodeDecodeError):
                    parsed = None
                server._record(RecordedRequest(
                    method="POST", path=self.path,
                    headers={k.lower(): v for k, v in self.headers.items()}, body=body,
                    json=parsed))
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    self._send(404, b'{"object": "error", "message": "not found"}')
                    return
                reply = server._next()
                if not reply.wait(server._stop):
                    return                    # server stopping: drop the slow reply
                self._send(reply.status, reply.payload(server.model), reply.headers)

        return Handler


def main(argv: Optional[Sequence[str]] = None) -> None:
    """Serve one canned answer forever (for launch-level tests)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--answer", required=True, help="JSON file with the assistant answer")
    parser.add_argument("--model", default=DEFAULT_MODEL)
    args = parser.parse_args(argv)
    with open(args.answer, "r", encoding="utf-8") as handle:
        answer = handle.read()
    server = FakeVlmServer(default=ScriptedReply.answer(answer), model=args.model,
                           port=args.port).start()
    print(f"fake VLM server at {server.url}", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()


if __name__ == "__main__":
    main()
