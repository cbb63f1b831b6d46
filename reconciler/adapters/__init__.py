"""Adapters that own a library for every layer: git (pygit2) and the client of
OpenAI-compatible endpoints (aiohttp).

They sit outside the layers (docs/architecture.md) because the lowest layer needs them (spec reads a
commit's files with git) as much as the highest (optimize sends load): a layer of their own
under spec would be the same thing with a longer name. So they import nothing of `reconciler`
but `reconciler.errors`, an import-linter contract keeps it so, and another keeps their
libraries out of every other module.
"""
