"""Anchor tests that fail on purpose with our drop-ins, each with its reason (the
differences are listed in docs/lightning.md and docs/ignite.md, "Differences on
purpose"). Keys: ``classname::name`` as pytest's junit report gives them."""
KNOWN = {"torchmetrics": {}, "ignite": {}}
