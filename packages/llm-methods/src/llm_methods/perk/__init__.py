"""PERK: test-time LoRA memory for long contexts (arXiv 2507.06415). Core only so far:
``data`` (BabiLong reader + offline generator) and ``model`` (inner/outer loops); no CLI or
experiment yet (see README.md)."""
