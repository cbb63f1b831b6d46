"""Pure logic: the parity comment (`<!-- denv:parity -->`, templates/parity.md) from
`Parities`: each verdict, the prompts that differ named by index."""

from __future__ import annotations

from reconciler.forge.markers import marker, strip_marker
from reconciler.forge.render import Fill, code, table
from reconciler.forge.views import Parities, ParityView


def _verdict(view: ParityView, fill: Fill) -> str:
    mismatches = ""
    if view.mismatches:
        rows = [(str(m.prompt), str(m.position), code(m.detail)) for m in view.mismatches]
        mismatches = table(("prompt", "token", "difference"), rows, right=(0, 1)) + "\n"
    agreed = view.prompts - view.mismatched
    if view.gating:
        verdict = "pass" if view.passed else "FAIL: this candidate does not ship"
    else:
        verdict = f"{'pass' if view.passed else 'fail'} on the suite this pull request proposes"
    suite = f"Suite: {view.suite}." if view.suite else ""
    if not view.gating:
        suite += " The parity suite changed by this pull request: this verdict does not gate."
    return fill(
        verdict=verdict,
        suite=suite,
        candidate=view.candidate,
        reference=view.reference,
        mode=view.mode,
        rule=view.rule,
        counts=f"{agreed} of {view.prompts} prompts agree; {view.mismatched} differ.",
        mismatches=mismatches,
    )


def render(view: Parities, fill: Fill) -> str:
    """The verdicts (one per release a pull request changes) as one parity comment: each
    rendered from the template, all under the first's marker and above the last's footer."""
    bodies = [_verdict(verdict, fill) for verdict in view.verdicts]
    if len(bodies) == 1:
        return bodies[0]
    parts = [strip_marker(b, "parity").rstrip("\n") for b in bodies]
    parts = [p.rsplit("\n", 1)[0].rstrip() for p in parts[:-1]] + parts[-1:]
    return marker("parity") + "\n" + "\n\n---\n\n".join(parts) + "\n"
