"""``agentic-grasp retrieve --local``: the JSON it prints, checked against the core itself.

No ROS here: --local runs agentic_grasp.core.retrieval in-process (the service path is
tested over DDS in test/ros/test_retrieval_node.py, against the same JSON shape).
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from dataclasses import asdict

import pytest

from agentic_grasp.commands import retrieve
from agentic_grasp.core import retrieval
from agentic_grasp.core.render.views import render_object_crop
from agentic_grasp.core.retrieval import RetrievalConfig
from agentic_grasp.core.sim.objects import load_catalogue

CUP_ARGS = ["--category", "mug", "--affordance", "Graspable_Handle", "--material", "ceramic",
            "--fragility", "0.3", "--region", "handle"]
CUP = {"type": "Graspable_Handle", "material": "ceramic", "fragility": 0.3, "region": "handle"}
STRATEGY_KEYS = {"rank", "id", "category", "success", "affordance", "grasp", "provenance",
                 "embedding_model", "s_cat", "s_aff", "s_aff_terms", "s_vis", "penalty",
                 "s_final", "explanation"}


@pytest.fixture(scope="module")
def core():
    """The real build_retriever, run once: every --local run of this module reuses it."""
    built = {}
    real = retrieval.build_retriever

    def once(config=None, embedder=None):
        key = json.dumps(asdict(config), sort_keys=True, default=str)
        if key not in built:
            built[key] = real(config, embedder)
        return built[key]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(retrieval, "build_retriever", once)
        yield once(RetrievalConfig.from_config())


def cli(argv, capsys):
    parser = argparse.ArgumentParser()
    retrieve.add_arguments(parser)
    code = retrieve.run(parser.parse_args(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def assert_equals_core(strategies, result, config):
    weights = {"type": config.w_type, "material": config.w_material,
               "fragility": config.w_fragility, "region": config.w_region}
    assert [s["id"] for s in strategies] == [s.experience.id for s in result.strategies]
    for got, want in zip(strategies, result.strategies):
        assert set(got) == STRATEGY_KEYS
        assert got["rank"] == want.rank
        for key in ("s_cat", "s_aff", "s_vis", "s_final"):
            assert got[key] == pytest.approx(getattr(want, key), abs=1e-6), key
        assert got["penalty"] == pytest.approx(1.0 - want.penalty, abs=1e-6)
        assert got["s_aff_terms"] == pytest.approx(
            {k: weights[k] * want.s_aff_terms[k] for k in weights}, abs=1e-6)
        assert sum(got["s_aff_terms"].values()) == pytest.approx(got["s_aff"], abs=1e-5)
        exp = want.experience
        for key, value in exp.grasp_parameters().to_dict().items():     # object frame
            assert got["grasp"][key] == (value if isinstance(value, str)
                                         else pytest.approx(value, abs=1e-6)), key
        assert got["affordance"] == {"type": exp.affordance.type.value,
                                     "material": exp.affordance.material,
                                     "fragility": exp.affordance.fragility,
                                     "region": exp.affordance.region}
        assert got["success"] == exp.success and got["explanation"] == want.explanation
        assert got["embedding_model"] == "builtin-descriptor-v1"


def test_local_prints_the_core_strategies_with_breakdowns(core, capsys):
    code, out, _ = cli(CUP_ARGS + ["--local"], capsys)
    assert code == 0
    report = json.loads(out)
    assert report["source"] == "local" and report["success"] is True
    assert len(report["strategies"]) == 3
    expected = core.retrieve("mug", CUP)
    assert report["message"] == expected.reason
    assert report["candidates_level1"] == expected.n_level1
    assert report["candidates_level2"] == expected.n_level2
    assert report["query"]["visual"] == "none"
    assert_equals_core(report["strategies"], expected, core.config)
    assert all(s["s_vis"] == 0.0 for s in report["strategies"])


def test_crop_from_object_feeds_level_3_and_fills_the_query(core, capsys):
    code, out, _ = cli(["--local", "--crop-from-object", "ceramic cup"], capsys)
    assert code == 0
    report = json.loads(out)
    model = load_catalogue().get("ceramic cup")
    assert report["query"]["category"] == model.category == "cup"
    assert report["query"]["type"] == model.affordance.value
    assert report["query"]["visual"] == "crop"
    crop = render_object_crop(model.instantiate("q", 0.5, 0.0),
                              size=core.config.embedding["crop_size_px"])
    aff = {k: report["query"][k] for k in ("type", "material", "fragility", "region")}
    expected = core.retrieve("cup", aff, crop=crop)
    assert_equals_core(report["strategies"], expected, core.config)
    assert all(s["s_vis"] > 0.5 for s in report["strategies"])


def test_options_override_the_catalogue_and_k_mode_apply(core, capsys):
    code, out, _ = cli(["--local", "--crop-from-object", "ceramic cup", "--region", "body",
                        "--k", "5", "--mode", "clip_only"], capsys)
    assert code == 0
    report = json.loads(out)
    assert report["query"]["region"] == "body" and len(report["strategies"]) == 5
    assert "clip_only" in report["message"]
    for s in report["strategies"]:          # clip_only: s_final = (0.2 s_cat + 0.4 s_vis) * p
        fused = core.config.w_category * s["s_cat"] + core.config.w_visual * s["s_vis"]
        assert s["s_final"] == pytest.approx(fused * s["penalty"], abs=1e-5)


def test_unknown_category_is_empty_with_the_reason(core, capsys):
    code, out, _ = cli(["--local", "--category", "teleporter"] + CUP_ARGS[2:], capsys)
    report = json.loads(out)
    assert report["success"] is True
    assert "unknown category 'teleporter'" in report["message"]
    assert "fallback" in report["message"]          # level 1 empty: the affordance fallback


def test_bad_input_is_reported_as_json(core, capsys):
    args = CUP_ARGS[:6] + ["--fragility", "1.5"] + CUP_ARGS[8:]
    code, out, _ = cli(["--local"] + args, capsys)
    assert code == 2
    report = json.loads(out)
    assert report["success"] is False and "fragility" in report["message"]


def test_missing_fields_and_unknown_objects_are_usage_errors(capsys):
    code, out, err = cli(["--local", "--category", "mug"], capsys)
    assert code == 2 and out == ""
    assert "--affordance, --material, --fragility, --region" in err
    code, _, err = cli(["--local", "--crop-from-object", "flux capacitor"], capsys)
    assert code == 2 and "no object 'flux capacitor'" in err


def test_local_needs_no_ros():
    code = ("import sys\n"
            "from agentic_grasp.cli import main as _\n"
            "import argparse\n"
            "from agentic_grasp.commands import retrieve\n"
            "p = argparse.ArgumentParser(); retrieve.add_arguments(p)\n"
            f"rc = retrieve.run(p.parse_args({['--local'] + CUP_ARGS!r}))\n"
            "assert rc == 0, rc\n"
            "ros = sorted(m for m in sys.modules if m.split('.')[0] in "
            "('rclpy', 'agentic_grasp_interfaces', 'sensor_msgs'))\n"
            "assert not ros, ros\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert len(json.loads(proc.stdout)["strategies"]) == 3
