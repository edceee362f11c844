"""Old flat path of the set-level metrics (:mod:`retrieval_core.metrics.set_level`,
dispatcher in :mod:`retrieval_core.metrics.apply`), kept as re-exports.
"""
from .metrics.apply import set_level_values  # noqa: F401
from .metrics.set_level import SetData, SetMetric, ami_values, fnmr_values, nmi_values, pcf_values  # noqa: F401
