"""Adapters: the kinds of fleet. Each kind is a driver (base.FleetDriver) registered by the
fleet file's `transport` in registry.DRIVERS; callers never know which kind they talk to."""
