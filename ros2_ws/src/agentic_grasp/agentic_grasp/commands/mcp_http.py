"""``agentic-grasp mcp --http``: streamable HTTP that is safe off loopback.

- **Bearer token.** Required when the server binds beyond loopback (any host other than
  127.0.0.1, localhost, ::1); used on loopback too when one is given. Read from the
  environment (:data:`TOKEN_ENV`) or a file (``--token-file``, one line, the file readable by
  its owner only), never from the command line (a command line is visible to every user of
  the machine in ``ps``). Each request must carry ``Authorization: Bearer <token>``; the
  comparison is constant-time. A static token is not OAuth: the SDK's auth (``token_verifier``
  with ``AuthSettings``) wants an issuer and resource URLs that a robot on a lab network does
  not have, so the check is a small ASGI wrapper around the SDK's app.
- **Host and Origin.** The SDK's DNS-rebinding protection (TransportSecuritySettings) is on
  for every bind address, with an allow-list: the loopback names, the bound host, and what
  ``--allow-host`` / ``--allow-origin`` add. A request with another Host is refused (421), one
  with another Origin too (403); a request without Origin (not a browser) passes the Origin
  check.
"""
import hmac
import os
import stat
from typing import Any, Iterable, List, Optional

#: Environment variable holding the bearer token.
TOKEN_ENV = "AGENTIC_GRASP_MCP_TOKEN"
LOOPBACK = ("127.0.0.1", "localhost", "::1")
#: Shortest token accepted (characters): 128 bits of hex.
MIN_TOKEN_CHARS = 32


class HttpConfigError(ValueError):
    """The HTTP options cannot be served safely (the message says what to change)."""


def is_loopback(host: str) -> bool:
    return host in LOOPBACK or host.startswith("127.")


def read_token(token_file: str = "", environ: Optional[dict] = None) -> str:
    """The token from ``token_file`` (when given) or the environment; "" when neither has one.
    A file others may read, or a token shorter than MIN_TOKEN_CHARS, is refused."""
    env = os.environ if environ is None else environ
    if token_file:
        try:
            mode = os.stat(token_file).st_mode
            with open(token_file, encoding="utf-8") as handle:
                token = handle.read().strip()
        except OSError as exc:
            raise HttpConfigError(f"--token-file {token_file}: {exc.strerror}") from None
        if mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise HttpConfigError(f"--token-file {token_file} may be read by other users "
                                  f"(mode {stat.S_IMODE(mode):o}); chmod 600 it")
    else:
        token = env.get(TOKEN_ENV, "").strip()
    if token and (len(token) < MIN_TOKEN_CHARS or any(c.isspace() for c in token)):
        raise HttpConfigError(f"the bearer token must be at least {MIN_TOKEN_CHARS} characters "
                              "without spaces (e.g. `openssl rand -hex 32`)")
    return token


def _host_patterns(host: str) -> List[str]:
    shown = f"[{host}]" if ":" in host else host
    return [f"{shown}:*", shown]


def security_settings(host: str, allow_hosts: Iterable[str] = (),
                      allow_origins: Iterable[str] = ()) -> Any:
    """The SDK's TransportSecuritySettings: DNS-rebinding protection on, Host and Origin
    checked against loopback, the bound host (unless it is a wildcard) and the extra ones."""
    # on use: cli.py imports every command's module to build its parser
    from mcp.server.transport_security import TransportSecuritySettings

    hosts = ["127.0.0.1:*", "localhost:*", "[::1]:*"]
    origins = ["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"]
    if host not in ("0.0.0.0", "::") and not is_loopback(host):
        hosts += _host_patterns(host)
        origins += [f"http://{p}" for p in _host_patterns(host)]
    for extra in allow_hosts:
        hosts += [extra] if ":" in extra.strip("[]") and not extra.startswith("[") \
            else _host_patterns(extra.strip("[]"))
    origins += list(allow_origins)
    return TransportSecuritySettings(enable_dns_rebinding_protection=True,
                                     allowed_hosts=hosts, allowed_origins=origins)


class BearerGate:
    """ASGI wrapper: an HTTP request without ``Authorization: Bearer <token>`` is refused
    with 401 before it reaches the MCP app (lifespan events pass)."""

    def __init__(self, app: Any, token: str) -> None:
        self.app = app
        self._token = token.encode("utf-8")

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope.get("type") == "http":
            given = b""
            for name, value in scope.get("headers", []):
                if name.lower() == b"authorization" and value[:7].lower() == b"bearer ":
                    given = value[7:].strip()
            if not hmac.compare_digest(given, self._token):
                body = b'{"error": "unauthorized: a bearer token is required"}'
                await send({"type": "http.response.start", "status": 401,
                            "headers": [(b"content-type", b"application/json"),
                                        (b"www-authenticate", b'Bearer realm="agentic-grasp"'),
                                        (b"content-length", str(len(body)).encode())]})
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


def check_exposure(host: str, token: str) -> None:
    """Refuse to serve beyond loopback without a token."""
    if not is_loopback(host) and not token:
        raise HttpConfigError(f"--http {host}: serving beyond loopback needs a bearer token: "
                              f"set {TOKEN_ENV} or give --token-file (never on the command "
                              "line)")


async def serve(server: Any, host: str, port: int, token: str, allow_hosts: Iterable[str],
                allow_origins: Iterable[str]) -> None:
    """The SDK's streamable HTTP app behind the checks above, under uvicorn."""
    # on use: cli.py imports every command's module to build its parser
    import uvicorn

    app = server.streamable_http_app(
        transport_security=security_settings(host, allow_hosts, allow_origins), host=host)
    if token:
        app = BearerGate(app, token)
    config = uvicorn.Config(app, host=host, port=port, log_level="warning")
    await uvicorn.Server(config).serve()


__all__ = ["BearerGate", "HttpConfigError", "TOKEN_ENV", "check_exposure", "read_token",
           "security_settings", "serve"]
