"""bias-profiles: audit gender stereotypes in language models.

Two studies, each a subpackage, over the layers they share (lowest first: ``core``, ``report``, ``models``), and the
question joining them above both:

- Study 1, stereotype profiles (``bias_utils.profiles``):
  ``profiles.dictionaries → profiles.contexts → models.embeddings → profiles.projection → profiles.space →
  profiles.axis_validity → profiles.population_profiles → profiles.layers``
- Study 2, BOLD occupational audit (``bias_utils.audit``):
  ``audit.bold_prompts → models.generation → core.lexicon → audit.bold → audit.occupations → audit.replication``
- Does the bias inside drive the bias written (``bias_utils.intrinsic_extrinsic``): completion profiles, the link
  against workforce shares, the erasure of the gender concept. Neither study imports the other.
- The book (``bias_utils.book``): parameter checks, every model side by side, the front page, runs and the build.

Each subpackage lists its public names by role and imports them on first use; DESIGN.md draws the package map,
the layers and the public API.
"""

__all__ = ["__version__"]

__version__ = "0.1.0"
