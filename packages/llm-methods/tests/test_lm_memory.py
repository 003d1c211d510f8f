"""The core's scoring never materialises a float32 log-softmax over [B, T, V] (issue 26)."""

from __future__ import annotations

import torch

from llm_methods.lm import token_logprobs, wrap


def _wide_vocab_lm(vocab: int = 4096):  # type: ignore[no-untyped-def]
    from llm_methods.zoo.models import tiny_llama
    from llm_methods.zoo.tokenizer import train_bpe

    tok = train_bpe(["a b c d e f g h"] * 4, 280)
    return wrap(tok, tiny_llama(vocab, n_layers=1, hidden=16, heads=2, max_len=256, seed=0))


def test_token_logprobs_peak_is_below_one_logits_tensor(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from llm_methods.lm import scoring
    from llm_methods.perk.memory import PeakMemory

    lm = _wide_vocab_lm()
    B, T, V = 4, 128, 4096
    ids = torch.randint(2, V, (B, T), generator=torch.Generator().manual_seed(0)).tolist()
    with torch.no_grad():
        want = torch.log_softmax(lm.model(input_ids=torch.tensor(ids)).logits.float(), -1)
        want = want[:, :-1].gather(-1, torch.tensor(ids)[:, 1:, None]).squeeze(-1)
    monkeypatch.setattr(scoring, "LOGSOFTMAX_BLOCK", 1 << 16)  # 256 KiB blocks
    with PeakMemory() as mem:
        got = token_logprobs(lm, ids, batch_size=B)
    torch.testing.assert_close(torch.stack(got), want, rtol=0, atol=1e-5)
    full = B * T * V * 4  # one float32 [B, T, V] tensor: 8 MiB
    assert mem.peak < full / 4, f"peak {mem.peak} bytes vs one logits tensor {full}"


def test_core_does_not_import_the_zoo() -> None:
    """The zoo builds on the core (trains with ``lm.train``, wraps with ``lm.wrap``); the core
    reaches ``zoo:`` specs through the plugin table only, so no module of ``llm_methods.lm``
    imports ``llm_methods.zoo`` (issue 26: the two imported each other)."""
    import ast
    import subprocess
    import sys
    from pathlib import Path

    import llm_methods.lm as core

    for path in Path(core.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            assert not any(n.startswith("llm_methods.zoo") for n in names), path.name
    code = "import sys, llm_methods.lm; print('llm_methods.zoo' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_default_lora_targets_are_peft_defaults(tiny) -> None:  # type: ignore[no-untyped-def]
    import pytest
    from peft.utils import TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING as DEFAULTS

    from llm_methods.lm import LMError
    from llm_methods.lm.adapters import default_lora_targets

    assert default_lora_targets(tiny.model) == list(DEFAULTS["llama"])
    with pytest.raises(LMError, match="no peft default LoRA targets"):
        default_lora_targets(torch.nn.Linear(2, 2))
