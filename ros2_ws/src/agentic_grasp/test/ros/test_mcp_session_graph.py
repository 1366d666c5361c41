"""A recorded agent session: scripts/mcp_agent_session.py (look, choose, confirm, grasp, hit a
failure, stop) against the real graph, its MCP JSON-RPC traffic recorded and held to the
committed record (test/ros/data/mcp_agent_session.jsonl, the example docs/mcp.md shows).

What must hold: the same requests in the same order, and the same answers (each request's
kind, its tool errors ``isError``, whether it asked the user first ``input_required``, its
content kinds: an image from describe_scene and show_last_attempt). The answers are compared
as a multiset: a stop and the grasp it ends answer concurrently, in either order. Ids, times,
progress counts and the numbers inside results vary run to run and are not compared.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("mcp", reason="the MCP SDK is pinned in requirements.lock")

ROOT = Path(__file__).resolve().parents[5]
SCRIPT = ROOT / "scripts" / "mcp_agent_session.py"
RECORD = Path(__file__).parent / "data" / "mcp_agent_session.jsonl"


#: The protocol negotiation: the SDK's client tries server/discover and initialize
#: concurrently and which it sends again depends on which answer comes first.
HANDSHAKE = ("server/discover", "initialize")


def skeleton(lines):
    """(requests in order, sorted answers): each (direction, what, is_error, result type,
    content kinds); the handshake (HANDSHAKE) and progress and log notifications left out
    (their order and count vary)."""
    names = {}
    requests, answers = [], []
    for line in lines:
        direction, m = line["dir"], line["message"]
        if "method" in m:
            if m["method"].startswith("notifications/"):
                if m["method"] == "notifications/cancelled":
                    requests.append((direction, m["method"], None, None, ()))
                continue
            what = m["method"]
            if what in HANDSHAKE:
                continue
            if what == "tools/call":
                what += ":" + m["params"]["name"]
            elif what == "elicitation/create":
                what += ":" + m["params"]["message"].split("?")[0].split(" ")[0]
            if "id" in m:
                names[(direction, m["id"])] = what
            requests.append((direction, what, None, None, ()))
        else:
            asked = "client->server" if direction == "server->client" else "server->client"
            what = names.get((asked, m.get("id")))
            if what is None:                        # the handshake's answers
                continue
            result = m.get("result", {})
            kinds = tuple(c.get("type") for c in result.get("content", []))
            answers.append((direction, "answer " + what, result.get("isError"),
                            result.get("resultType"),
                            kinds if what.startswith("tools/call") else ()))
    return requests, sorted(answers, key=repr)


def questions(lines):
    """The questions put to the user: standalone elicitation/create requests (before
    2026-07-28) or a tool's input_required answer (after)."""
    out = []
    for line in lines:
        m = line["message"]
        if m.get("method") == "elicitation/create":
            out.append(m["params"]["message"])
        for request in (m.get("result", {}).get("inputRequests") or {}).values():
            out.append(request["params"]["message"])
    return out


def test_recorded_agent_session_matches_the_documented_one(tmp_path):
    out = tmp_path / "session.jsonl"
    run = subprocess.run([sys.executable, str(SCRIPT), "--start-graph", "--record", str(out)],
                         capture_output=True, text=True, timeout=600, env=dict(os.environ))
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    live = [json.loads(line) for line in out.read_text().splitlines()]
    recorded = [json.loads(line) for line in RECORD.read_text().splitlines()]
    assert skeleton(live) == skeleton(recorded)
    # what the session is about, read from the live traffic
    text = run.stdout
    assert "failed: ERROR FAILED (ERROR_GRASP_FAILED)" in text, text
    assert "stop: STOPPED" in text and "stopped_grasp: ERROR ERROR (ERROR_CANCELED)" in text
    asked = questions(live)
    assert any(q.startswith("Load the scene 'sg_apple'") for q in asked), asked
    assert any(q.startswith("Let the robot arm move") and "1. apple_1 (apple)" in q
               for q in asked), asked
