"""The forge: pull requests as the interface (comments, checks, approvals, bot PRs, merges).

`protocol.Forge` is what callers use; `github.GitHubForge` (PyGithub, only there) and
`local.LocalForge` (the embedded default) implement it; `select.open_forge` picks one from
the environment. Comments are rendered from `views` by `render`; markers, commands and
retry timing are pure logic. The forge knows no domain type: callers hand it views.
"""
