"""The fleet benchmark's set-up and bookkeeping (agentic_grasp_lab's
evaluation/studies/fleet.py), no server needed: the 'category' deal and the first-attempt
provenance counts."""
from pathlib import Path

from agentic_grasp_lab.evaluation.studies.fleet import (deal, first_sources, fleet_objects,
                                                        target_superclass)


def test_category_deal_puts_siblings_on_different_robots_and_drops_loners():
    objects = fleet_objects(["in_distribution", "near_ood"])
    dealt = deal(objects, 4, "category")
    flat = [o for robot in dealt for o in robot]
    assert len(flat) == len(set(flat))                     # no object on two robots
    sup = {o: target_superclass(o) for o in objects}
    groups = {}
    for o in objects:
        groups.setdefault(sup[o], []).append(o)
    kept = {o for members in groups.values() if len(members) > 1 for o in members}
    assert set(flat) == kept                                # loners (nobody to learn from) out
    assert "ood_id_screwdriver" not in {Path(o).stem for o in flat}
    for members in groups.values():
        if 1 < len(members) <= 4:                           # one sibling per robot
            owners = [next(r for r, objs in enumerate(dealt) if o in objs) for o in members]
            assert len(set(owners)) == len(members)
    assert sup[next(o for o in objects if o.endswith("ood_near_tall_mug.yaml"))] == \
        sup[next(o for o in objects if o.endswith("sg_cup.yaml"))] == "cup"
    assert max(map(len, dealt)) - min(map(len, dealt)) <= 1


def test_first_sources_names_authored_own_and_other_robots_entries():
    def rec(robot, src, attempt=0):
        acq = {"robot": robot, "attempt": attempt}
        if src:
            acq["source_experience"] = src
        return {"acquisition": acq}

    counts = first_sources([rec("robot0", "mug-001"), rec("robot0", "acq-robot0-g-0-x-0-1"),
                            rec("robot0", "acq-robot2-g-0-x-0-1"), rec("robot0", ""),
                            rec("robot0", "acq-robot2-g-0-x-0-1", attempt=1),
                            rec("robot1", "acq-robot10-g-0-x-0-1")])
    assert counts["robot0"] == {"authored": 1, "own": 1, "other": 1, "none": 1}
    assert counts["robot1"]["other"] == 1                  # robot10 is not robot1
