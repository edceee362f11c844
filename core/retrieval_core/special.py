"""Old flat path of the special functions (:mod:`retrieval_core.stats.special`), kept as re-exports."""
from .stats.special import (  # noqa: F401
    betainc, betaincinv, beta_hdi, t_sf, t_ppf,
)
