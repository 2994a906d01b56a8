"""The assistant: the command line today; the LangGraph agent, tools and sweeps build on it."""
