"""The instruction level of the planner: an instruction's sub-goals (:mod:`.tasks`), a hidden
named target looked for behind what could hide it (:mod:`.uncover`), and the run of a whole
instruction over its sub-goals (:mod:`.run`).

Import the modules themselves: this package imports none of them, so that the records of
core/planner/outcomes.py can name a TaskPlan without loading the task runner (which reports
those records as events).
"""
