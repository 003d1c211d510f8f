"""ADL in diffing-toolkit's layout, and the per-token KL diffing method (issue 26)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import torch

from llm_methods.adl.diff import activation_difference
from llm_methods.lm import LMError, encode_texts, wrap

TEXTS = [
    "The quick brown fox jumps over it and over it again.",
    "A list is a mutable sequence of items in order.",
    "Functions are defined with def and return values.",
]


@pytest.fixture
def pair(tiny):  # type: ignore[no-untyped-def]
    model = copy.deepcopy(tiny.model)
    with torch.no_grad():
        model.model.layers[0].mlp.down_proj.weight.add_(0.05)
        model.lm_head.weight.mul_(1.3)  # tied: changes the output distribution too
    return tiny, wrap(tiny.tokenizer, model, "ft")


def test_toolkit_layout_files_and_values(pair: Any, tmp_path: Path) -> None:
    from llm_methods.adl.toolkit import lens_probabilities, write_toolkit_results

    base, ft = pair
    diff = activation_difference(base, ft, TEXTS, layer=1, n_positions=7)
    folder = write_toolkit_results(tmp_path / "res", "org/fineweb-sample", diff, ft, k=10)
    assert folder == tmp_path / "res" / "layer_1" / "fineweb-sample"
    for j in range(7):
        got = torch.load(folder / f"mean_pos_{j}.pt", weights_only=True)
        torch.testing.assert_close(got, diff.delta[j])
        meta = json.loads((folder / f"mean_pos_{j}.meta").read_text())
        assert meta == {"count": 3, "activation_dim": 64, "position": j, "token_id": None}
        torch.testing.assert_close(
            torch.load(folder / f"ft_mean_pos_{j}.pt", weights_only=True), diff.mean_ft[j]
        )
        probs, ids, inv_probs, inv_ids = torch.load(
            folder / f"logit_lens_pos_{j}.pt", weights_only=True
        )
        full, inv = lens_probabilities(ft, diff.delta[j])
        assert ids.tolist() == torch.topk(full, 10).indices.tolist()
        torch.testing.assert_close(probs, full[ids])
        torch.testing.assert_close(inv_probs, inv[inv_ids])
        assert (folder / f"base_logit_lens_pos_{j}.pt").is_file()
    norms = torch.load(tmp_path / "res" / "model_norms_fineweb-sample.pt", weights_only=True)
    assert norms["skip_tokens"] == 5 and norms["num_sequences"] == 3
    assert float(norms["ft_model_norms"][1]) == pytest.approx(diff.norm_ft)
    with pytest.raises(LMError, match="already holds results"):
        write_toolkit_results(tmp_path / "res", "org/fineweb-sample", diff, ft)


def test_per_token_kl_equals_brute_force(pair, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from llm_methods.adl.kl import kl_summary, per_token_kl
    from llm_methods.lm import scoring

    base, ft = pair
    ids = encode_texts(base, TEXTS)
    monkeypatch.setattr(scoring, "LOGSOFTMAX_BLOCK", 3 * 300)  # several blocks per batch
    got = per_token_kl(base, ft, ids, temperature=2.0, batch_size=2)
    for row, kl in zip(ids, got, strict=True):
        x = torch.tensor([row])
        with torch.no_grad():
            lb = (base.model(input_ids=x).logits[0] / 2.0).log_softmax(-1)
            lf = (ft.model(input_ids=x).logits[0] / 2.0).log_softmax(-1)
        want = torch.nn.functional.kl_div(lb, lf, log_target=True, reduction="none").sum(-1)
        torch.testing.assert_close(kl, want, rtol=1e-4, atol=1e-6)
        assert float(kl.min()) >= -1e-6
    same = per_token_kl(base, base, ids)
    assert max(float(k.abs().max()) for k in same) < 1e-6
    res = kl_summary(base, ft, TEXTS, top=2)
    assert res.stats["tokens"] == sum(len(r) for r in ids) and len(res.top_texts) == 2
    assert res.top_tokens[0][3] == pytest.approx(
        max(float(k.max()) for k in per_token_kl(base, ft, ids)), rel=1e-5
    )
    with pytest.raises(LMError, match="temperature"):
        per_token_kl(base, ft, ids, temperature=0)


def test_adl_claims_planted() -> None:
    """Each ADL claim can hold and fail on intervals over seeds (issue 40); a null method (a
    baseline's vector in δ̄'s place: gap 0) is "not held" for (a); (b) is inconclusive when
    mixing leaves the domain above one epoch (issue 26: 2.6 epochs at 1:1) or when there is no
    trace at 1:0 to remove."""
    from llm_methods.adl.experiment import judge

    def seeds(delta: list[float], base: float = 0.1, ft: float = 0.2) -> list[dict[str, float]]:
        return [{"delta": d, "mean_base": base, "mean_ft": ft} for d in delta]

    trace = seeds([0.95, 1.0, 0.9])  # gap 0.7-0.8 over the better baseline (0.2)
    gone = seeds([0.2, 0.22, 0.18])  # gap -0.02-0.02
    null = seeds([0.2, 0.2, 0.2])  # the better baseline in the method's place: gap 0 exactly
    a, b = judge(trace, gone, mixed_epochs=0.7)
    assert (a.verdict, b.verdict) == ("held", "held")
    a, b = judge(trace, trace, mixed_epochs=0.7)
    assert (a.verdict, b.verdict) == ("held", "not held")
    a, b = judge(null, null, mixed_epochs=0.7)
    assert a.verdict == "not held" and a.effect.method == "exact"
    assert b.verdict == "inconclusive" and "trace exists" in b.reason
    assert judge(trace, gone, mixed_epochs=2.6)[1].verdict == "inconclusive"
    # a gap that straddles the margin at 3 seeds is underpowered, not a verdict
    a, _ = judge(seeds([0.2, 0.5, 0.3]), gone, mixed_epochs=0.7)
    assert a.verdict == "inconclusive" and a.reason == "underpowered"


def test_toolkit_norms_file_keeps_every_layer(pair: Any, tmp_path: Path) -> None:
    """A second layer merges into ``model_norms_{name}.pt`` (the toolkit keeps every run layer);
    before the fix the second write replaced the file with its own layer only. A file from
    another setting is refused unless ``overwrite``, and nothing is written when refused."""
    from llm_methods.adl.toolkit import write_toolkit_results

    base, ft = pair
    res, name = tmp_path / "res", "org/fineweb-sample"
    diffs = [activation_difference(base, ft, TEXTS, layer=layer, n_positions=3) for layer in (0, 1)]
    for diff in diffs:
        write_toolkit_results(res, name, diff, ft, k=5)
    norms = torch.load(res / "model_norms_fineweb-sample.pt", weights_only=True)
    assert sorted(norms["ft_model_norms"]) == sorted(norms["base_model_norms"]) == [0, 1]
    for diff in diffs:
        assert float(norms["ft_model_norms"][diff.layer]) == pytest.approx(diff.norm_ft)
        assert float(norms["base_model_norms"][diff.layer]) == pytest.approx(diff.norm_base)
    res2 = tmp_path / "res2"  # another folder: layer 0 of 3 texts, then layer 1 of 2 texts
    write_toolkit_results(res2, name, diffs[0], ft, k=5)
    other = activation_difference(base, ft, TEXTS[:2], layer=1, n_positions=3)
    with pytest.raises(LMError, match=r"num_sequences \d+/3 differ from this run's \d+/2"):
        write_toolkit_results(res2, name, other, ft, k=5)
    assert not (res2 / "layer_1").exists()
    write_toolkit_results(res2, name, other, ft, k=5, overwrite=True)
    norms = torch.load(res2 / "model_norms_fineweb-sample.pt", weights_only=True)
    assert list(norms["ft_model_norms"]) == [1] and norms["num_sequences"] == 2


def test_toolkit_refuses_a_foreign_norms_file(pair: Any, tmp_path: Path) -> None:
    from llm_methods.adl.toolkit import write_toolkit_results

    base, ft = pair
    (tmp_path / "model_norms_fineweb-sample.pt").write_text("a user's file")
    diff = activation_difference(base, ft, TEXTS, layer=0, n_positions=2)
    with pytest.raises(LMError, match=r"model_norms_fineweb-sample\.pt: not a readable norms"):
        write_toolkit_results(tmp_path, "org/fineweb-sample", diff, ft, k=5)
    assert (tmp_path / "model_norms_fineweb-sample.pt").read_text() == "a user's file"
