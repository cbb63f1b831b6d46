"""`denv ui`: a read-only web app over the state the CLI reads (git's head, the fleets as
observed, the bot's kept rollout state, results and optimizer studies), served by aiohttp or
exported as static files. Pages are rendered on the server (jinja2, autoescaped); a small
script refreshes a page's content in place; charts are inline SVG. Nothing is fetched from
elsewhere at run time: pages work offline."""
