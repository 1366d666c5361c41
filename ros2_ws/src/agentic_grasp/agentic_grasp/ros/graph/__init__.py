"""The node graph, declared once (description), and starting it as processes (launcher)."""
