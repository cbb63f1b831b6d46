"""The spec layer: pydantic models of every denv file, loading them from a work tree or a
git commit with `path:line:col` errors, cross-file checks and JSON Schema."""
