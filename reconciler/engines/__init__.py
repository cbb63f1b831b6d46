"""Engines: from a resolved deployment to the units (processes) that run it — argv, env,
ports, probes and metric names for vLLM, SGLang, the router and denv's simulator."""
