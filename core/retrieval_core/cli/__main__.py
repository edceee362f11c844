"""``python -m retrieval_core.cli``: the command line (:func:`retrieval_core.cli.main`)."""
import sys

from .entry import main

if __name__ == "__main__":
    sys.exit(main())
