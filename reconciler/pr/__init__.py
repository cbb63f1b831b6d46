"""The PR workflows: what denv does on a pull request — plan it (plan.py), bench it beside the
current release with parity (bench.py), and run its `/denv` comment commands (commands.py,
dispatched from its registry `COMMANDS`, one module each; command.py says what one is) —
against any forge (forge/protocol.py: the local forge or GitHub). Every comment is a kind
forge/comments.py registers. The CLI (cli/pr.py, cli/pr_runs.py) parses and prints only.
"""
