"""The perception schema is bounded for guided decoding and keeps the agreed contract."""
import re

import pytest

from agentic_grasp.core.errors import ConfigError
from agentic_grasp.core.perception.vlm import schema
from agentic_grasp.core.perception.vlm.config import VlmConfig


def _walk(node, path="$"):
    if isinstance(node, dict):
        yield path, node
        for key, value in node.items():
            yield from _walk(value, f"{path}/{key}")
    elif isinstance(node, list):
        for k, value in enumerate(node):
            yield from _walk(value, f"{path}/{k}")


def test_every_number_is_bounded_and_every_string_has_a_bounded_pattern():
    numbers = strings = 0
    for path, node in _walk(schema.PERCEPTION_SCHEMA):
        kind = node.get("type")
        if kind in ("number", "integer"):
            numbers += 1
            assert "minimum" in node and "maximum" in node, path
        if kind == "string" and "enum" not in node:
            strings += 1
            pattern = node.get("pattern", "")
            assert pattern.startswith("^") and pattern.endswith("$"), path
            # No unbounded repetition: every quantifier is {m,n} (xgrammar: n <= 128).
            assert not re.search(r"(?<!\\)[*+]", pattern), (path, pattern)
            for low, high in re.findall(r"\{(\d+),(\d+)\}", pattern):
                assert int(high) <= 128, (path, pattern)
    assert numbers == 3 and strings == 5      # coordinate, fragility; 5 free strings


ACCEPTED = {"id": ["a", "cup_1", "x" * 32, "0_9"],
            "words": ["cup", "wine glass", "a b c", "a" * 40, "ab " * 12 + "abcd"],
            "reason": ["", "no cup. it's a bowl, maybe - 2", "A" * 200]}
REJECTED = {"id": ["", "Cup_1", "x" * 33, "cup-1", "cup 1"],
            "words": ["", "Cup", "a" * 41, " cup", "cup ", "cup_1", "tea2"],
            "reason": ["A" * 201, "tab\there", "new\nline", "colon: no", "\x1a"]}
PATTERNS = {"id": schema.ID_PATTERN, "words": schema.WORDS_PATTERN,
            "reason": schema.REASON_PATTERN}


@pytest.mark.parametrize("kind", sorted(PATTERNS))
def test_patterns_keep_the_agreed_contract(kind):
    pattern = PATTERNS[kind]
    for text in ACCEPTED[kind]:
        assert re.fullmatch(pattern.strip("^$"), text), (kind, text)
    for text in REJECTED[kind]:
        assert not re.fullmatch(pattern.strip("^$"), text), (kind, text)


def test_the_sent_schema_is_bounded_but_local_validation_leaves_ranges_to_the_client():
    sent = schema.response_format()["json_schema"]["schema"]
    item = sent["properties"]["objects"]["items"]["properties"]
    assert item["fragility"] == {"type": "number", "minimum": 0, "maximum": 1}
    assert item["point_2d"]["items"]["maximum"] == 1000
    local = schema.VALIDATION_SCHEMA["properties"]["objects"]["items"]["properties"]
    assert "maximum" not in local["fragility"] and "pattern" in local["id"]
    answer = {"target_found": False, "reason": "", "target_id": None,
              "target_affordance": None,
              "objects": [{"id": "cup_1", "category": "cup", "point_2d": [1500, 3],
                           "bbox_2d": [0, 0, 10, 10], "state": "empty", "fragility": 1.7}]}
    assert schema.schema_errors(answer) == []          # per-field checks in vlm_client
    answer["objects"][0]["id"] = "Cup 1"
    assert schema.schema_errors(answer)


def test_pixel_coordinates_need_an_image_within_the_coordinate_bound():
    assert VlmConfig(coordinates="pixel", image_max_side=1001).image_max_side == 1001
    with pytest.raises(ConfigError, match="image_max_side must be <= 1001"):
        VlmConfig(coordinates="pixel", image_max_side=1280)
    assert VlmConfig(coordinates="norm1000", image_max_side=1280).image_max_side == 1280
