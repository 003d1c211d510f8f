"""PERK: test-time LoRA memory for long contexts (arXiv 2507.06415): ``data`` (BabiLong reader,
generator, DataModule), ``model`` (inner/outer loops), ``icr`` (FT-ICR baseline), ``lit_module``,
``cli``, ``experiment`` (see README.md)."""
