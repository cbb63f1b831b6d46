"""denv: run LLM inference fleets from git."""

__version__ = "0.1.0"
