"""The client side of the graph, for the CLI, the MCP server, tests and benchmarks:
GraphClient (a synchronous client node), the planner's GraspObject client, the retrieval
client, the MCP bridge and the grasp report."""
