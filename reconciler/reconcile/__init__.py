"""The reconciler: desired state from git + observed state from the fleets -> a plan (a pure
diff) -> apply. Pure: revisions, labels, placing, ports, desired, changes, plan, render.
Adapter: source (git)."""
