"""Models: the PR comment templates (string.Template, `$name`; `$$` is a dollar sign)."""
