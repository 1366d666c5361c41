"""Subcommands of ``agentic-grasp``: each module has add_arguments(parser) and run(args)."""
