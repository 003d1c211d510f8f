"""ADL's causal projection test works across a base/finetuned pair of different dtypes (the same
cast as across devices; the experiment's device choice: test_device_choice.py)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import torch

from llm_methods.adl.diff import projection_loss_change
from llm_methods.lm import wrap

TEXTS = ["A list is a mutable sequence of items.", "Functions are defined with def and return."]


def _perturbed(tiny: Any, dtype: torch.dtype) -> Any:
    model = copy.deepcopy(tiny.model).to(dtype)
    with torch.no_grad():
        model.model.layers[0].mlp.down_proj.weight.add_(0.05)
    return wrap(tiny.tokenizer, model, "ft")


def test_projection_loss_change_mixes_dtypes(tiny: Any) -> None:
    direction = torch.randn(64, generator=torch.Generator().manual_seed(0))
    base32 = tiny
    base64 = wrap(tiny.tokenizer, copy.deepcopy(tiny.model).double(), "base64")
    ft32, ft64 = _perturbed(tiny, torch.float32), _perturbed(tiny, torch.float64)
    same32 = projection_loss_change(base32, ft32, direction, 0, TEXTS)
    same64 = projection_loss_change(base64, ft64, direction, 0, TEXTS)
    assert same32 != 0.0
    # h^base is cast to the finetuned residual's dtype: a float32 base patched into a float64
    # finetune reads like the float64 pair, a float64 base into a float32 one like the float32 pair
    assert projection_loss_change(base32, ft64, direction, 0, TEXTS) == pytest.approx(
        same64, abs=1e-5
    )
    assert projection_loss_change(base64, ft32, direction, 0, TEXTS) == pytest.approx(
        same32, abs=1e-5
    )
