"""Fleets: drivers (local processes, SSH), the host agent, GPU inventory, placement."""
