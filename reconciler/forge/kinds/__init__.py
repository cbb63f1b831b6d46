"""Pure logic: one module per PR comment kind, each rendering its view with its template
(`render(view, fill)`); forge/comments.py registers them."""
