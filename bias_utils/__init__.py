"""bias-profiles: audit gender stereotypes in language models.

Two pipelines share this package:

* Study 1, stereotype profiles (Schuster et al. 2024):
  ``dictionaries`` -> ``contexts`` -> ``embeddings`` -> ``projection`` -> ``profiles``
* Study 2, the BOLD occupational audit (Dhamala et al. 2021 prompts):
  ``bold`` -> ``generation`` -> ``lexicon`` -> ``stats``

Shared layers: ``data`` (verified external files), ``cache`` (content-keyed,
crash-safe storage), ``models`` (built-in offline models, hub ids, local
folders, GGUF), ``populations`` (names and gendered terms), ``plots``.
"""

__all__ = ["__version__"]

__version__ = "0.1.0"
