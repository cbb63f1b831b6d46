"""The PR workflows: what denv does on a pull request — plan it (plan.py), bench it beside the
current release with parity (bench.py), and run its `/denv` comment commands (commands.py) —
against any forge (forge/protocol.py: the local forge or GitHub). Every comment comes from its
template under forge/templates. The CLI (cli/pr.py, cli/pr_runs.py) parses and prints only.
"""
