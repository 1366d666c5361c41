"""core.supervision: restart delays with backoff, the crash window, and when to give up."""
import pytest

from agentic_grasp.core.errors import ConfigError
from agentic_grasp.core.supervision import (EXIT_CONFIG, CrashHistory, RestartPolicy)


def test_delays_double_up_to_the_cap_then_it_gives_up():
    history = CrashHistory("perception", RestartPolicy(delay_s=0.5, backoff=2.0, max_delay_s=2.0,
                                                       max_crashes=4, window_s=60.0))
    delays = [history.on_exit(-9, t).delay_s for t in (0.0, 1.0, 2.0, 3.0)]
    assert delays == [0.5, 1.0, 2.0, 2.0]
    assert history.restarts == 4 and history.gave_up is None
    final = history.on_exit(-9, 4.0)
    assert not final.restart
    assert "perception crashed 5 times within 60 s" in final.reason
    assert history.gave_up == final.reason


def test_crashes_older_than_the_window_are_forgotten():
    history = CrashHistory("sim", RestartPolicy(delay_s=1.0, max_crashes=2, window_s=10.0))
    assert history.on_exit(-9, 0.0).delay_s == 1.0
    assert history.on_exit(-9, 5.0).delay_s == 2.0
    again = history.on_exit(-9, 30.0)              # both earlier crashes left the window
    assert again.restart and again.delay_s == 1.0


def test_a_node_that_was_up_a_while_restarts_after_the_first_delay_again():
    """Backoff is for a node crashing as it starts; one killed after serving for a while (a
    fault probe's SIGKILL) is back after the first delay each time, and still counted."""
    history = CrashHistory("sim", RestartPolicy(delay_s=0.5, backoff=2.0, max_delay_s=8.0,
                                                max_crashes=5, window_s=60.0, stable_s=5.0))
    delays = [history.on_exit(-9, t, up_s=6.0).delay_s for t in (0.0, 7.0, 14.0, 21.0, 28.0)]
    assert delays == [0.5] * 5
    assert not history.on_exit(-9, 35.0, up_s=6.0).restart      # the sixth in 60 s: gives up


def test_quick_crashes_in_a_row_back_off_and_a_stable_run_resets_them():
    history = CrashHistory("planner", RestartPolicy(delay_s=0.5, backoff=2.0, max_delay_s=8.0,
                                                    max_crashes=10, stable_s=5.0))
    quick = [history.on_exit(-11, t, up_s=1.0).delay_s for t in (0.0, 2.0, 4.0)]
    assert quick == [0.5, 1.0, 2.0]
    assert history.on_exit(-11, 20.0, up_s=10.0).delay_s == 0.5   # it had been up: reset
    assert history.on_exit(-11, 22.0, up_s=1.0).delay_s == 1.0


def test_a_configuration_error_is_never_restarted():
    history = CrashHistory("retrieval")
    decision = history.on_exit(EXIT_CONFIG, 0.0)
    assert not decision.restart and history.restarts == 0
    assert "configuration error" in decision.reason and "retrieval" in decision.reason


@pytest.mark.parametrize("code", [0, -2, 130, -15, 143, -14, 142])
def test_a_clean_exit_is_not_a_crash(code):
    decision = CrashHistory("planner").on_exit(code, 0.0)
    assert not decision.restart and "exited cleanly" in decision.reason


def test_an_invalid_policy_is_refused():
    with pytest.raises(ConfigError):
        RestartPolicy(backoff=0.5)
