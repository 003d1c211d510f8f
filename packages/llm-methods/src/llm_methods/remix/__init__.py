"""ReMix: Reincarnating Mix-policy Proximal Policy Gradient (arXiv 2507.06892) on a GRPO base."""

from __future__ import annotations
