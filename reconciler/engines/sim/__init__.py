"""denv's engine simulator: an OpenAI-compatible server with a performance model."""
