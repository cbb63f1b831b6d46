"""denv's engine simulator: an OpenAI-compatible server of the engine model (engines/model)."""
