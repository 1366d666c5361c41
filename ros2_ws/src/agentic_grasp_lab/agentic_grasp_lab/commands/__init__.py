"""The lab's subcommands of ``agentic-grasp``: ``bench`` (one subcommand per benchmark) and
``eval``. setup.py registers them in the ``agentic_grasp.commands`` entry-point group."""
