"""RetrievalNode over DDS: RetrieveStrategies against the core, bad input, parameters, start-up.

The node under test and a client node spin in one MultiThreadedExecutor on a background
thread of this process; every request and answer goes through Fast DDS. The expected answer
of each query is the core's (HAARAG.retrieve on the same knowledge base and
config/retrieval.yaml) for the same query, compared field by field at float32 precision, so
nothing is lost or altered on the way through the messages; properties that do not come
from the core (the weighted terms add up to s_aff, s_final follows the fusion formula, a
failed experience carries the 0.7 multiplier) are checked on their own.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from dataclasses import asdict, replace

import numpy as np
import pytest
from rclpy.parameter import Parameter

from agentic_grasp.commands import retrieve as retrieve_command
from agentic_grasp.ros.conversions.images import rgb_to_msg
from agentic_grasp.core import paths
from agentic_grasp.core.config import node_params
from agentic_grasp.core.errors import ConfigError
from agentic_grasp.core.render.views import render_object_crop
from agentic_grasp.core.retrieval import (HAARAG, DescriptorEmbedder, RetrievalConfig,
                                          build_retriever)
from agentic_grasp.core.sim.objects import load_catalogue
from agentic_grasp_lab.ros.testing.node_harness import NodeHarness, wait_future
from agentic_grasp.ros.retrieval.node import RetrievalNode, flatten
from agentic_grasp.ros.common.params import field_descriptions, overrides as parameter_overrides
from agentic_grasp_interfaces.msg import AffordanceDescriptor as AffordanceMsg
from agentic_grasp_interfaces.srv import RetrieveStrategies

CUP = {"type": "Graspable_Handle", "material": "ceramic", "fragility": 0.3, "region": "handle"}
WINE_GLASS = {"type": "Fragile", "material": "glass", "fragility": 0.9, "region": "stem"}
BOWL = {"type": "Graspable_Edge", "material": "ceramic", "fragility": 0.3, "region": "rim"}


# ---- harness ---------------------------------------------------------------------------------

class Harness(NodeHarness):
    """The retrieval node plus a client node, spun together on a background thread."""

    def __init__(self) -> None:
        super().__init__(RetrievalNode(), "retrieval_test_client", RetrieveStrategies,
                         "retrieve_strategies")

    def call(self, request: RetrieveStrategies.Request) -> RetrieveStrategies.Response:
        return wait_future(self.cli.call_async(request))


@pytest.fixture(scope="module")
def harness():
    h = Harness()
    yield h
    h.close()
    assert not h.thread.is_alive()


@pytest.fixture(scope="module")
def core() -> HAARAG:
    """The reference: the core on the shipped knowledge base and config/retrieval.yaml."""
    return build_retriever(RetrievalConfig.from_config())


@pytest.fixture(scope="module")
def crops():
    catalogue = load_catalogue()
    return {name: render_object_crop(catalogue.get(name).instantiate("q", 0.5, 0.0), size=64)
            for name in ("ceramic cup", "wine glass", "ceramic bowl")}


def make_request(category: str, affordance: dict, **fields) -> RetrieveStrategies.Request:
    request = RetrieveStrategies.Request(
        category=category,
        affordance=AffordanceMsg(type=affordance["type"], material=affordance["material"],
                                 fragility=float(affordance["fragility"]),
                                 graspable_region=affordance["region"]))
    for name, value in fields.items():
        setattr(request, name, value)
    return request


def f32(value: float) -> float:
    return float(np.float32(value))


def assert_matches_core(response, result, config: RetrievalConfig) -> None:
    """Every field of the answer equals the core's result (at float32 where the msg is)."""
    assert response.success, response.message
    assert response.message == result.reason
    assert response.candidates_level1 == result.n_level1
    assert response.candidates_level2 == result.n_level2
    assert [s.experience.id for s in response.strategies] == \
        [s.experience.id for s in result.strategies]
    weights = {"type": config.w_type, "material": config.w_material,
               "fragility": config.w_fragility, "region": config.w_region}
    for got, want in zip(response.strategies, result.strategies):
        assert got.rank == want.rank
        assert got.s_cat == f32(want.s_cat)
        assert got.s_aff == f32(want.s_aff)
        assert got.s_vis == f32(want.s_vis)
        assert got.s_final == f32(want.s_final)
        assert got.penalty == f32(1.0 - want.penalty)
        terms = {"type": got.s_aff_type, "material": got.s_aff_material,
                 "fragility": got.s_aff_fragility, "region": got.s_aff_region}
        for name, value in terms.items():
            assert value == f32(weights[name] * want.s_aff_terms[name]), name
        assert got.explanation == want.explanation
        exp, want_exp = got.experience, want.experience
        assert (exp.category, exp.success, exp.provenance) == \
            (want_exp.category, want_exp.success, want_exp.provenance)
        assert exp.embedding_model == want_exp.embedding_model != ""
        assert exp.affordance.type == want_exp.affordance.type.value
        assert exp.affordance.graspable_region == want_exp.affordance.region
        grasp = want_exp.grasp
        assert [exp.grasp.position.x, exp.grasp.position.y, exp.grasp.position.z] == \
            grasp["position"]                     # float64 Point: the object frame, untouched
        assert exp.grasp.gripper_width == f32(grasp["width"])
        assert exp.grasp.grip_force == f32(grasp["force"])


def assert_breakdown_consistent(response, config: RetrievalConfig, mode: str = "haa") -> None:
    """Properties of the message itself: terms sum to s_aff, s_final follows the fusion."""
    for s in response.strategies:
        total = s.s_aff_type + s.s_aff_material + s.s_aff_fragility + s.s_aff_region
        assert total == pytest.approx(s.s_aff, abs=1e-5)
        assert s.penalty == pytest.approx(1.0 if s.experience.success
                                          else 1.0 - config.failure_penalty)
        fused = config.w_category * s.s_cat + config.w_visual * s.s_vis
        if mode == "haa":
            fused += config.w_affordance * s.s_aff
        assert s.s_final == pytest.approx(fused * s.penalty, abs=1e-5)
    ranks = [s.rank for s in response.strategies]
    assert ranks == list(range(1, len(ranks) + 1))
    finals = [s.s_final for s in response.strategies]
    assert finals == sorted(finals, reverse=True)


# ---- queries ---------------------------------------------------------------------------------

def test_crop_query_matches_core(harness, core, crops):
    crop = crops["ceramic cup"]
    response = harness.call(make_request("cup", CUP, target_crop=rgb_to_msg(crop)))
    assert len(response.strategies) == 3
    assert_matches_core(response, core.retrieve("cup", CUP, crop=crop), core.config)
    assert_breakdown_consistent(response, core.config)
    assert all(s.s_vis > 0.5 for s in response.strategies)      # level 3 had input


def test_bgr8_crop_is_the_same_query(harness, core, crops):
    crop = crops["ceramic cup"]
    image = rgb_to_msg(crop[..., ::-1])
    image.encoding = "bgr8"
    response = harness.call(make_request("cup", CUP, target_crop=image))
    assert_matches_core(response, core.retrieve("cup", CUP, crop=crop), core.config)


def test_embedding_query_matches_core(harness, core, crops):
    vector = DescriptorEmbedder().embed(crops["wine glass"])
    model = core.index.model_id
    response = harness.call(make_request("wine glass", WINE_GLASS,
                                         visual_embedding=vector.tolist(),
                                         embedding_model=model))
    assert len(response.strategies) == 3
    expected = core.retrieve("wine glass", WINE_GLASS, embedding=vector, embedding_model=model)
    assert_matches_core(response, expected, core.config)
    assert all(s.experience.category in ("wine_glass", "champagne_flute")
               for s in response.strategies)


def test_no_visual_query_scores_s_vis_zero(harness, core):
    response = harness.call(make_request("mug", CUP))
    assert_matches_core(response, core.retrieve("mug", CUP), core.config)
    assert [s.s_vis for s in response.strategies] == [0.0, 0.0, 0.0]
    assert "s_vis = 0" in response.message


def test_k_mode_and_failed_experiences(harness, core, crops):
    crop = crops["ceramic bowl"]
    response = harness.call(make_request("bowl", BOWL, target_crop=rgb_to_msg(crop), k=10))
    expected = core.retrieve("bowl", BOWL, crop=crop, k=10)
    assert len(response.strategies) == 10
    assert_matches_core(response, expected, core.config)
    assert_breakdown_consistent(response, core.config)
    failed = [s for s in response.strategies if not s.experience.success]
    assert failed and all(s.penalty == f32(0.7) for s in failed)

    clip = harness.call(make_request("bowl", BOWL, target_crop=rgb_to_msg(crop),
                                     mode="clip_only"))
    assert_matches_core(clip, core.retrieve("bowl", BOWL, crop=crop, mode="clip_only"),
                        core.config)
    assert_breakdown_consistent(clip, core.config, mode="clip_only")
    assert "clip_only" in clip.message


def test_unknown_category_is_an_empty_answer_with_the_reason(harness):
    # level 1 is empty: the affordance fallback (config/retrieval.yaml fallback.enabled)
    # ranks the whole knowledge base, and says so
    response = harness.call(make_request("teleporter", CUP))
    assert response.success
    assert "unknown category 'teleporter'" in response.message
    assert "fallback" in response.message and response.candidates_level1 == 0
    assert all("FALLBACK" in s.explanation for s in response.strategies)


def test_the_service_answers_what_the_planner_gets_in_process(harness, core):
    """One code path: the perceived size reaches the fallback's size term, and a
    strategy keeps the object it was recorded on and its fit record, so the planner fits it
    to the perceived object through ROS exactly as in process."""
    from agentic_grasp.ros.conversions.retrieval import retrieval_result_from_msg

    size = [0.03, 0.03, 0.2]
    for category in ("teleporter", "screwdriver"):          # fallback and a known category
        want = core.retrieve(category, CUP, size=np.array(size), k=6)
        response = harness.call(make_request(category, CUP, size=size, k=6))
        assert_matches_core(response, want, core.config)
        got = retrieval_result_from_msg(response)
        for g, w in zip(got.strategies, want.strategies):
            assert g.experience.render_spec == w.experience.render_spec != {}
            assert g.experience.fit == w.experience.fit is not None
            assert g.experience.grasp == w.experience.grasp
    without = harness.call(make_request("teleporter", CUP))
    assert "no perceived size" in without.message        # the size made the difference
    bad = harness.call(make_request("teleporter", CUP, size=[0.03, -1.0, 0.2]))
    assert not bad.success and "size" in bad.message


def _embedding(request, values, model="builtin-descriptor-v1"):
    request.visual_embedding = [float(v) for v in values]
    request.embedding_model = model
    return request


def _crop(request, crops, encoding="rgb8", height=64, width=64, data=None):
    image = rgb_to_msg(crops["ceramic cup"])
    image.encoding, image.height, image.width = encoding, height, width
    image.step = 3 * width
    if data is not None:
        image.data = data
    request.target_crop = image
    return request


BAD = {
    "nan fragility": (lambda r, c: setattr(r.affordance, "fragility", float("nan")),
                      "fragility"),
    "fragility above 1": (lambda r, c: setattr(r.affordance, "fragility", 1.5),
                          "fragility must be in [0, 1]"),
    "unknown affordance type": (lambda r, c: setattr(r.affordance, "type", "Graspable_Lid"),
                                "unknown affordance type 'Graspable_Lid'"),
    "empty region": (lambda r, c: setattr(r.affordance, "graspable_region", ""), "region"),
    "empty affordance": (lambda r, c: setattr(r, "affordance", AffordanceMsg()),
                         "affordance is empty"),
    "empty category": (lambda r, c: setattr(r, "category", " "), "category is empty"),
    "embedding of another model": (
        lambda r, c: _embedding(r, np.ones(62), "open_clip/ViT-L-14/weights.pt"),
        "made by 'open_clip/ViT-L-14/weights.pt'"),
    "embedding of the wrong size": (lambda r, c: _embedding(r, np.ones(10)),
                                    "10 dimensions"),
    "embedding without its model": (lambda r, c: _embedding(r, np.ones(62), ""),
                                    "without embedding_model"),
    "nan embedding": (lambda r, c: _embedding(r, [float("nan")] * 62), "finite"),
    "embedding and crop": (lambda r, c: _crop(_embedding(r, np.ones(62)), c),
                           "either an embedding or a crop"),
    "bad mode": (lambda r, c: setattr(r, "mode", "fast"), "mode must be one of"),
    "depth image as crop": (lambda r, c: _crop(r, c, encoding="32FC1"),
                            "not a colour image"),
    "truncated crop": (lambda r, c: _crop(r, c, data=bytes(100)), "not a valid image"),
    "tiny crop": (lambda r, c: _crop(r, c, height=4, width=4, data=bytes(48)),
                  "at least 8 x 8"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_is_refused_and_the_node_keeps_serving(harness, core, crops, case):
    mutate, fragment = BAD[case]
    request = make_request("cup", CUP)
    mutate(request, crops)
    response = harness.call(request)
    assert not response.success
    assert fragment in response.message, response.message
    assert list(response.strategies) == []
    good = harness.call(make_request("cup", CUP))
    assert_matches_core(good, core.retrieve("cup", CUP), core.config)


# ---- parameters ------------------------------------------------------------------------------

def test_every_key_of_the_config_file_is_a_described_parameter(harness):
    flat = flatten(node_params("retrieval"))
    assert all(harness.node.has_parameter(name) for name in flat)
    # every key's text is RetrievalConfig's field metadata, none the file fallback
    undocumented = [n for n in flat if not n.startswith("material_similarity.")
                    and n not in field_descriptions(RetrievalConfig)]
    assert not undocumented
    assert harness.node.get_parameter("material_similarity.paper.cardboard").value == 0.8


def test_scoring_parameters_change_at_run_time(harness, core):
    try:
        results = harness.set_params(tau_aff=0.9, k=2)
        assert all(r.successful for r in results), [r.reason for r in results]
        response = harness.call(make_request("cup", CUP))
        tuned = HAARAG(core.kb, replace(core.config, tau_aff=0.9, k=2), core.embedder,
                       index=core.index)
        expected = tuned.retrieve("cup", CUP)
        assert expected.n_level2 < core.retrieve("cup", CUP).n_level2      # it did bite
        assert_matches_core(response, expected, tuned.config)
        assert len(response.strategies) == 2

        (rejected,) = harness.set_params(tau_aff=1.5)
        assert not rejected.successful and "tau_aff" in rejected.reason
        (fixed,) = harness.set_params(knowledge_base_path="/tmp")
        assert not fixed.successful and "start-up" in fixed.reason
        assert harness.node.config.tau_aff == 0.9                       # nothing half-applied
    finally:
        results = harness.set_params(tau_aff=core.config.tau_aff, k=core.config.k)
        assert all(r.successful for r in results)


def test_params_file_configures_the_node(tmp_path, core):
    shipped = paths.config_file("retrieval")
    overlay = tmp_path / "overlay.yaml"
    overlay.write_text(
        "retrieval:\n  ros__parameters:\n    tau_aff: 0.4\n"
        "    final_weights:\n      visual: 0.5\n"
        "    material_similarity:\n      ceramic: {glass: 0.0, plastic: 0.7}\n")
    # Params files match the node by its name, so this one is /retrieval too; it is never
    # spun and lives only for this test (no request is in flight meanwhile).
    node = RetrievalNode(start_parameter_services=False,
                         cli_args=["--ros-args", "--params-file", str(shipped),
                                   "--params-file", str(overlay)])
    try:
        # Every key of the shipped file reached the node through rcl's parser and is declared.
        flat = flatten(node_params("retrieval", shipped))
        assert set(flat) <= set(parameter_overrides(node))
        assert all(node.has_parameter(name) for name in flat)
        cfg = node.config
        assert cfg.tau_aff == 0.4 and cfg.w_visual == 0.5
        assert cfg.material_score("plastic", "ceramic") == 0.7      # a pair the file added
        assert cfg.material_score("ceramic", "glass") == 0.0        # a shipped pair turned off
        assert cfg.material_score("paper", "cardboard") == 0.8      # the rest as shipped
        rest = {k: v for k, v in asdict(cfg).items()
                if k not in ("tau_aff", "w_visual", "material_similarity", "source")}
        want = {k: v for k, v in asdict(core.config).items()
                if k not in ("tau_aff", "w_visual", "material_similarity", "source")}
        assert rest == want
    finally:
        node.destroy_node()


def test_a_mistyped_parameter_stops_the_node_with_its_name(tmp_path):
    params = tmp_path / "bad.yaml"
    params.write_text("retrieval:\n  ros__parameters:\n    tau_aff: 0\n")
    with pytest.raises(ConfigError, match="'tau_aff'.*typed"):
        RetrievalNode(cli_args=["--ros-args", "--params-file", str(params)])


# ---- a corrupt knowledge base ----------------------------------------------------------------

@pytest.fixture
def corrupt_kb(tmp_path):
    """A copy of cup.jsonl whose entry cup-004 asks for a 9 cm opening (limit 8 cm)."""
    lines = (paths.kb_dir() / "experiences" / "cup.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines]
    index = next(i for i, r in enumerate(records) if r["id"] == "cup-004")
    records[index]["grasp"]["width"] = 0.09
    folder = tmp_path / "kb"
    folder.mkdir()
    file = folder / "cup.jsonl"
    file.write_text("".join(json.dumps(r) + "\n" for r in records))
    return folder, file, index + 1


def test_corrupt_kb_stops_the_node_naming_file_entry_and_field(corrupt_kb):
    folder, file, line = corrupt_kb
    with pytest.raises(ConfigError) as err:
        RetrievalNode(parameter_overrides=[Parameter("knowledge_base_path",
                                                     value=str(folder))])
    text = str(err.value)
    assert f"{file}:{line}" in text and "entry 'cup-004'" in text
    assert "field 'grasp.width'" in text


def test_main_exits_non_zero_on_a_corrupt_kb(corrupt_kb):
    folder, file, line = corrupt_kb
    proc = subprocess.run(
        [sys.executable, "-m", "agentic_grasp.ros.retrieval.node", "--ros-args",
         "-p", f"knowledge_base_path:={folder}"],
        capture_output=True, text=True, timeout=60)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 78, output  # EXIT_CONFIG: supervisors do not restart it
    assert "cannot start" in output and f"{file}:{line}" in output
    assert "entry 'cup-004'" in output and "field 'grasp.width'" in output
    assert "Traceback" not in output


# ---- agentic-grasp retrieve over the service -------------------------------------------------

def _cli(argv):
    parser = argparse.ArgumentParser()
    retrieve_command.add_arguments(parser)
    return retrieve_command.run(parser.parse_args(argv))


def test_cli_through_the_service_prints_what_local_prints(harness, capsys):
    argv = ["--crop-from-object", "ceramic cup", "--k", "3"]
    assert _cli(argv) == 0
    service = json.loads(capsys.readouterr().out)
    assert _cli(argv + ["--local"]) == 0
    local = json.loads(capsys.readouterr().out)
    assert service["source"] == "service" and local["source"] == "local"
    assert len(service["strategies"]) == 3
    assert service["message"] == local["message"]
    assert service["query"] == local["query"]
    for got, want in zip(service["strategies"], local["strategies"]):
        assert set(got) == set(want)
        assert got["id"] == want["id"] and got["explanation"] == want["explanation"]
        for key in ("s_cat", "s_aff", "s_vis", "penalty", "s_final"):
            assert got[key] == pytest.approx(want[key], abs=1e-6), key
        for key, value in want["s_aff_terms"].items():
            assert got["s_aff_terms"][key] == pytest.approx(value, abs=1e-6)
        assert got["grasp"]["position"] == pytest.approx(want["grasp"]["position"], abs=1e-6)


def test_cli_says_when_the_service_is_not_up(harness, capsys):
    code = _cli(["--category", "mug", "--affordance", "Graspable_Handle", "--material",
                 "ceramic", "--fragility", "0.3", "--region", "handle",
                 "--service", "no_such_retrieval", "--timeout", "0.5"])
    assert code == 2
    assert "no_such_retrieval is not available" in capsys.readouterr().err
