"""Stand-in for the ``cachier`` package (torchmetrics' test cache of reference
values), found only when the real one is not installed: its folder is appended to
``sys.path`` by ``anchor_swap``, after site-packages, so spawned pool workers
(which inherit ``sys.path``) import it too. Values are recomputed, never cached."""


def cachier(*args, **kwargs):
    """``cachier.cachier(...)``: returns the function unchanged."""
    def decorate(fn):
        return fn
    return decorate
