"""Models and pure logic: what is observed of a fleet (hosts, GPUs, units, why a host did not
answer), how the reconciler labels its units, and what pure code needs to know of a kind of
fleet (FleetRules). Below the drivers: nothing here does I/O or imports an SSH library."""
