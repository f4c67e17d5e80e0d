"""``python -m bias_utils.book --models "..." [--quick] [--dtype bfloat16]``: runs the notebooks and builds the book."""

import os
import sys

from .build import book_cli

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.exit(book_cli())
