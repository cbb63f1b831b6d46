"""Adapters: the drivers of the kinds of fleet. Each kind's card (reconciler.fleet.kinds) names
its driver (base.FleetDriver), which registry.Drivers makes for a fleet of that `transport`;
callers never know which kind they talk to."""
