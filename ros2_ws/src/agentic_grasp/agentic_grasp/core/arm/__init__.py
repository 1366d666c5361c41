"""The Franka Emika Panda with its hand, as the core sees it.

- :mod:`.backend`: the executor's arm-backend interface and the checks on a request;
- :mod:`.session`: the simulated arm's phase protocol (APPROACH, CLOSE, LIFT, ABORT);
- :mod:`.kinematics`: forward and inverse kinematics with the Franka Hand, on the
  :mod:`.panda_model` (joint limits, DH chain, closed-form branches);
- :mod:`.closing_axis`: the direction in which the fingers close, from approach and wrist yaw.
"""
