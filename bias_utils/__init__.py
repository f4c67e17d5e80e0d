"""bias-profiles: audit gender stereotypes in language models.

Two pipelines share this package:

- Study 1, stereotype profiles:
  ``dictionaries → contexts → embeddings → projection → space → axis_validity → profiles → layers``
- Study 2, BOLD occupational audit: ``bold → generation → lexicon → stats → occupations → replication``
- Across both: ``completions`` (a decoder's own completions on its stereotype axes), ``crossmodel`` (every
  model side by side), ``book`` (runs and the Jupyter Book)

Shared layers: ``errors`` (the package's errors and value rules), ``data``
(verified external files), ``cache`` (content-keyed, crash-safe storage),
``models`` (built-in offline models, hub ids, local folders, GGUF, other
backends), ``populations`` (names and gendered terms), ``results`` (where
tables land), ``plots``. DESIGN.md lists every module's public API and the
layers, lowest first, that imports may only descend.
"""

__all__ = ["__version__"]

__version__ = "0.1.0"
