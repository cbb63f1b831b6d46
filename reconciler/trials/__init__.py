"""Deployments on a fleet's trial GPUs, for bench runs, parity checks, optimizer trials and
promotion checks: where a trial lands (plan), which process owns it (owner), and its units up
for as long as a `with` block runs, torn down after (deployment)."""
