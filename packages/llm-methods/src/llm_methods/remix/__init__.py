"""ReMix: Reincarnating Mix-policy Proximal Policy Gradient (arXiv 2507.06892) on a GRPO base.

The main classes and functions are exported here and imported on first use
(``import llm_methods.remix`` does not import torch).
"""

from iclr26_common.exports import lazy_exports

#: Public name -> the submodule that defines it (imported on first access).
_EXPORTS = {
    "Problem": "llm_methods.remix.data",
    "make_reward_fn": "llm_methods.remix.data",
    "read_problems": "llm_methods.remix.data",
    "synth_problems": "llm_methods.remix.data",
    "RLConfig": "llm_methods.remix.model",
    "grpo_loss": "llm_methods.remix.model",
    "kl_convex_lambda": "llm_methods.remix.model",
    "mix_ppg_loss": "llm_methods.remix.model",
    "RLRunner": "llm_methods.remix.runner",
    "Rollout": "llm_methods.remix.runner",
    "TaskModelSpec": "llm_methods.remix.pretrain",
    "ensure_task_model": "llm_methods.remix.pretrain",
    "ProblemDataModule": "llm_methods.remix.lit_module",
    "ReMixModule": "llm_methods.remix.lit_module",
    "load_policy": "llm_methods.remix.lit_module",
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

__all__ = [*_EXPORTS]
