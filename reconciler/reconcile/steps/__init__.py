"""The applier's steps, one module each, in the order reconcile/apply.py runs them: prepare,
stop (free), start, routers, roll (with its surge replicas), stop (trim); what they share is
in context.py."""
