"""Reports of results: tables and files (``report``: Markdown, JSON, HTML) and their
plots (``plot``, drawn with ``plot_curves`` on the axes of ``plot_axes``; matplotlib
is optional)."""
