"""A whole instruction (:meth:`ReflectivePlanner.run_task`): its sub-goals (tasks.py), a
hidden named target looked for first (uncover.py), a fresh perception per sub-goal, support
dependencies discovered at run time inserted first, failed sub-goals tried once more after
others were taken away. Each sub-goal runs Algorithm 1 (the planner's ``plan_and_execute``).

:class:`TaskRunner` is the planner's instruction level; the planner (core/planner/planner.py)
inherits it, as it inherits the initial grasp (initial.py), so this module needs nothing of
the planner module.
"""
from __future__ import annotations

import time
from typing import Callable, List, Optional

from agentic_grasp.core.arm.backend import CancelCheck
from agentic_grasp.core.grasping.limits import STATUS_BEYOND_HAND
from agentic_grasp.core.instructions import read_instruction
from agentic_grasp.core.perception.backend import PerceptionResult
from agentic_grasp.core.planner.events import EventSink, TaskPlanEvent, TaskResultEvent
from agentic_grasp.core.planner.instruction.sorting import (BY_FRAGILITY, BY_SIZE,
                                                            perception_error, sort_view)
from agentic_grasp.core.planner.instruction.tasks import (KIND_CLEAR, KIND_NAMED, KIND_SORT,
                                                          SORT_KINDS, TaskPlan,
                                                          instruction_kind,
                                                          names_only_landmarks,
                                                          plan_subgoals, resolve_targets)
from agentic_grasp.core.planner.instruction.uncover import poorly_located, run_uncover
from agentic_grasp.core.planner.memory import EpisodicMemory
from agentic_grasp.core.planner.outcomes import (STATUS_BLOCKED, STATUS_CANCELED,
                                                 STATUS_FAILED, STATUS_SUCCEEDED,
                                                 GoalOutcome, TaskOutcome)
from agentic_grasp.core.planner.ports import Arm, Perceiver, require_port
from agentic_grasp.core.retrieval.priors import load_category_knowledge
from agentic_grasp.core.types import ObjectInstance


def _why_left(goal: Optional[GoalOutcome]) -> str:
    """Why a target of a multi-object task was not grasped, for the task's message."""
    if goal is None:
        return "not attempted: the task stopped before it"
    if goal.status == STATUS_BEYOND_HAND:
        return goal.message
    if goal.attempts:
        kinds = [a.failure_type for a in goal.attempts if a.failure_type]
        return (f"{goal.n_attempts} attempt(s) failed"
                + (f", last with {kinds[-1]}" if kinds else ""))
    return goal.message or goal.status


def _not_in_view(instruction: str, shown, searched: str) -> str:
    """The message of a named target that was not seen, even after looking behind what could
    hide it: the objects the instruction names only as a landmark, when there are any,
    are said to be landmarks (never that the target is one)."""
    landmarks = resolve_targets(instruction, shown)
    text = "the target the instruction names is not in view"
    if landmarks:
        text += (f" ({', '.join(landmarks)}, which it names, "
                 f"{'is' if len(landmarks) == 1 else 'are'} only a landmark)")
    return f"{text}; {searched}"
def _unseen_subject(instruction: str, objects: List[ObjectInstance]) -> bool:
    """The first object a named instruction mentions is a landmark (it follows a relation):
    the object it locates is not among ``objects``."""
    mentions = read_instruction(instruction, objects).mentions
    return bool(mentions) and mentions[0].role == "landmark"


def subgoal_instruction(object_id: str, name: str = "") -> str:
    """The instruction that makes perception report ``object_id`` as its target."""
    return f"pick up {object_id} (the {name})" if name else f"pick up {object_id}"


class TaskRunner:
    """The instruction level of the planner (module docstring); the class using it provides
    ``config``, ``configuration``, ``reasoner`` and ``plan_and_execute``."""

    def run_task(self, instruction: str, perceiver: Perceiver, arm: Arm,
                 memory: Optional[EpisodicMemory] = None,
                 cancel: Optional[CancelCheck] = None, on_event: Optional[EventSink] = None,
                 after_success: Optional[Callable[[str], None]] = None) -> TaskOutcome:
        """Decompose ``instruction`` into sub-goals and run Algorithm 1 for each.

        ``perceiver.perceive(instruction)`` returns a fresh PerceptionResult; each sub-goal
        is perceived with :func:`subgoal_instruction` so its target carries an affordance.
        ``after_success(object_id)`` is called after each grasp (put the object away).
        ``perceiver.look(instruction, camera)`` perceives the frame of the arm's wrist camera
        at the pose it reached: with it (``perceiver.wrist_camera``), a named target that is
        not in view is looked for behind what could hide it (uncover.py); without it, or
        when nothing is seen, the goal ends with the target not found (never with another
        object grasped in its place).
        """
        require_port(perceiver, Perceiver, "perceiver")
        require_port(arm, Arm, "arm")
        perceive = perceiver.perceive
        look = perceiver.look if perceiver.wrist_camera else None
        start = time.perf_counter()
        cancel = cancel or (lambda: False)
        emit = on_event or (lambda _event: None)
        task = TaskOutcome(instruction, None)
        first = perceive(instruction)
        task.perception_calls += 1
        task.overhead_s += self.config.time_model.perception_s
        if not first.ok:
            task.status, task.message = STATUS_FAILED, f"perception failed: {first.error}"
            task.wall_s = time.perf_counter() - start
            return task
        named = instruction_kind(instruction) == KIND_NAMED
        unfound = ""
        shown = first.to_object_instances()
        # not found, or "found" as an object the instruction names only as a landmark
        hidden = names_only_landmarks(instruction, shown)
        # in a list ("the X behind the Y, the Z and the W") the first object mentioned is a
        # landmark: the X it locates was not perceived, while Z and W were
        listed = named and not hidden and _unseen_subject(instruction, shown)
        if named and (hidden or listed or poorly_located(first.target, first.objects)):
            # the named target is not in view (or only a sliver of it): look behind what
            # could hide it. What the instruction also mentions is a landmark ("behind the
            # box"), never a stand-in for the target.
            found = run_uncover(self, instruction, first, arm, look, emit, cancel)
            task.views = list(found.views)
            looks = sum(v.reached for v in found.views)
            task.perception_calls += looks
            task.overhead_s += self.config.time_model.perception_s * looks
            if found.found:
                first = found.perception
            elif listed and not cancel():
                # the other targets of the list are in view: they are taken, and the result
                # names the one that was not found
                unfound = f"; the object its first landmark locates not found: {found.message}"
            elif hidden or cancel():
                task.plan = TaskPlan(instruction, KIND_NAMED)
                emit(TaskPlanEvent(task.plan))
                task.status = STATUS_CANCELED if cancel() else STATUS_FAILED
                task.message = _not_in_view(instruction, shown, found.message)
                task.wall_s = time.perf_counter() - start
                emit(TaskResultEvent(instruction, task.status, (), task.message))
                return task
        objects = first.to_object_instances()
        # the scene-graph reasoning's own graph (its configuration and camera): the same one
        # the constraints of each sub-goal come from
        graph = self.reasoner.scene_graph(objects) if self.configuration.scene_graph else None
        plan = self._plan(instruction, objects, graph, first.backend)
        task.plan = plan
        emit(TaskPlanEvent(plan))
        if not plan.subgoals:
            task.status = STATUS_FAILED
            task.message = (_not_in_view(instruction, shown, "no perceived object is the one "
                                         "it names") if named
                            else "the instruction names no perceived object")
            task.wall_s = time.perf_counter() - start
            return task
        names = {o.id: o.name for o in objects}
        queue = list(plan.target_ids)
        inserted: set = set()
        # Sub-goals that failed, to be tried once more after the others: an object taken
        # away since may have been what blocked it (the neighbour the hand hit, the object
        # that hid it). Only when something was taken since; never one refused as beyond
        # the hand (its size does not change).
        revisit: List[str] = []
        progressed: set = set()         # failed ones with a success after them
        revisited: set = set()
        last_goal: dict = {}            # target id -> its last GoalOutcome
        planned = set(plan.target_ids)
        looked_after = 0                # grasps when the table was last looked at again
        while True:
            if not queue:
                queue = [t for t in revisit if t in progressed]
                revisited.update(queue)
                revisit = []
            if not queue and plan.kind == KIND_CLEAR and task.grasped \
                    and len(task.grasped) > looked_after and not cancel():
                # clearing means every object: one hidden behind another is in view once
                # that one is gone, so the table is looked at again after each round
                looked_after = len(task.grasped)
                again = perceive(instruction)
                task.perception_calls += 1
                task.overhead_s += self.config.time_model.perception_s
                fresh = [] if not again.ok else [
                    s for s in plan_subgoals(instruction, again.to_object_instances()).subgoals
                    if s.target_id not in planned]
                for sub in fresh:
                    sub.reason = "seen once others were taken away"
                    plan.subgoals.append(sub)
                    names[sub.target_id] = next((o.name for o in again.to_object_instances()
                                                 if o.id == sub.target_id), "")
                planned.update(s.target_id for s in fresh)
                queue = [s.target_id for s in fresh]
            if not queue:
                break
            if cancel():
                task.status, task.message = STATUS_CANCELED, "canceled between sub-goals"
                break
            target_id = queue.pop(0)
            sub = subgoal_instruction(target_id, names.get(target_id, ""))

            def refresh(_sub: str = sub) -> PerceptionResult:
                return perceive(_sub)

            if not task.goals and first.target is not None and first.target.id == target_id \
                    and first.target.affordance is not None:
                perception = first          # nothing has moved since: no second look needed
            else:
                perception = perceive(sub)
                task.perception_calls += 1
                task.overhead_s += self.config.time_model.perception_s
            goal = self.plan_and_execute(perception, target_id, arm, memory, cancel, on_event,
                                         reperceive=refresh)
            task.goals.append(goal)
            if goal.status == STATUS_BLOCKED:
                new = [p for p in goal.prerequisites if p not in inserted]
                if new:         # a support dependency the plan did not foresee: do it first
                    inserted.update(new)
                    queue = new + [target_id] + [q for q in queue if q not in new]
                    continue
            if goal.status == STATUS_CANCELED:
                task.status, task.message = STATUS_CANCELED, goal.message
                break
            last_goal[target_id] = goal
            if goal.success:
                if after_success is not None:
                    after_success(target_id)
                progressed.update(revisit)
            else:
                if not self.config.continue_after_subgoal_failure:
                    break
                if goal.status != STATUS_BEYOND_HAND and target_id not in revisited \
                        and len(plan.target_ids) > 1:
                    revisit.append(target_id)
        if task.status != STATUS_CANCELED:
            done = set(task.grasped)
            all_done = all(t in done for t in plan.target_ids)
            task.status = STATUS_SUCCEEDED if all_done else STATUS_FAILED
            task.message = (f"grasped {len(done)} of {len(plan.target_ids)} target(s)"
                            if not all_done else f"all {len(done)} target(s) grasped")
            if revisited:
                task.message += ("; tried again after others were taken away: "
                                 + ", ".join(sorted(revisited)))
            left = [t for t in plan.target_ids if t not in done]
            if left:
                task.message += "; left: " + "; ".join(
                    f"{t} ({_why_left(last_goal.get(t))})" for t in left)
            task.message += unfound
            if plan.order_matters and done:
                grasped = [t for t in task.grasped if t in plan.target_ids]
                planned = [t for t in plan.target_ids if t in done]
                if grasped != planned:
                    task.message += ("; order kept where it could be: "
                                     + " -> ".join(grasped) + " (planned "
                                     + " -> ".join(plan.target_ids) + ")")
        task.wall_s = time.perf_counter() - start
        emit(TaskResultEvent(instruction, task.status, tuple(task.grasped), task.message))
        return task

    def _plan(self, instruction: str, objects: List[ObjectInstance], graph: object,
              backend: str) -> TaskPlan:
        """The task's sub-goals. A sort orders by each object's fragility or size weighed
        from perception and from what the knowledge base knows its category to be
        (sorting.py), with the semantics and the knowledge base of the configuration: the
        heuristic sees no category, and without retrieval there is no knowledge base."""
        kind = instruction_kind(instruction)
        cfg = self.configuration
        if kind not in SORT_KINDS or not (cfg.retrieval and cfg.semantics):
            return plan_subgoals(instruction, objects, graph)
        by = BY_FRAGILITY if kind == KIND_SORT else BY_SIZE
        view, estimates = sort_view(objects, by, load_category_knowledge(),
                                    perception_error(backend))
        plan = plan_subgoals(instruction, view, graph)
        for sub in plan.subgoals:
            est = estimates.get(sub.target_id)
            if est is not None and not sub.prerequisite_for:
                sub.reason = sub.reason.split(" (")[0] + f" ({est.note})"
        return plan


__all__ = ["TaskRunner", "subgoal_instruction"]
