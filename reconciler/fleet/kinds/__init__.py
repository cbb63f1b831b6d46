"""Fleet-kind cards: everything specific to one kind of fleet (local, ssh, slurm), one module
each, found by the fleet file's `transport` through reconciler/spec/fleetkinds.py."""
