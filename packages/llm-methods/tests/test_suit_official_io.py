"""`suit edit` beyond the official releases (review of issue 27, #10): C and P in the official
AlphaEdit file layout (in and out), the null-space threshold / clamp / KL flags, and the
general-ability probe in the edit report."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from llm_methods.cli import main
from llm_methods.lm.errors import LMError
from llm_methods.suit.metrics import FEWSHOT_ANTONYMS, antonym_items
from llm_methods.suit.official_io import (
    PROJECTION_FILE,
    read_official_stats,
    read_projection,
    stats_path,
    write_official_stats,
    write_projection,
)


def official_npz(path: Path, keys: np.ndarray) -> None:
    """What the official ``layer_stats`` leaves on disk: ``CombinedStat(mom2=SecondMoment())``'s
    state (keys prefixed ``mom2.``), Σ kkᵀ not divided by the count, saved with numpy.savez."""
    path.parent.mkdir(parents=True, exist_ok=True)
    state = {
        "constructor": "util.runningstats.SecondMoment()",
        "count": len(keys),
        "mom2": keys.T @ keys,
    }
    np.savez(path, **{f"mom2.{k}": v for k, v in state.items()})


def test_reads_the_official_layer_stats_file(tmp_path: Path) -> None:
    keys = np.random.default_rng(0).normal(size=(50, 6)).astype(np.float32)
    root = tmp_path / "data" / "stats"
    official_npz(
        root
        / "Llama3-8B"
        / "wikipedia_stats"
        / "model.layers.4.mlp.down_proj_float32_mom2_100000.npz",
        keys,
    )
    (c,) = read_official_stats(root, [4], {4: 6}).values()
    expected = torch.from_numpy(keys.astype(np.float64).T @ keys.astype(np.float64) / 50)
    torch.testing.assert_close(c.double(), expected, rtol=1e-5, atol=1e-6)


def test_written_stats_have_the_official_name_and_fields(tmp_path: Path) -> None:
    c = {1: torch.eye(4) * 2.0, 2: torch.full((4, 4), 0.5)}
    paths = write_official_stats(tmp_path, "tiny", "pydoc", c, count=10, sample_size=3)
    assert [p.relative_to(tmp_path).as_posix() for p in paths] == [
        "tiny/pydoc_stats/model.layers.1.mlp.down_proj_float32_mom2_3.npz",
        "tiny/pydoc_stats/model.layers.2.mlp.down_proj_float32_mom2_3.npz",
    ]
    with np.load(paths[0]) as data:  # no pickles: loads with numpy's default allow_pickle=False
        assert set(data.files) == {"mom2.constructor", "mom2.count", "mom2.mom2"}
        assert int(data["mom2.count"]) == 10 and float(data["mom2.mom2"][0, 0]) == 20.0
    back = read_official_stats(tmp_path, [1, 2], {1: 4, 2: 4})
    assert all(torch.equal(back[i], c[i]) for i in c)
    assert (
        stats_path(tmp_path, "m", "wikipedia", 7).name
        == "model.layers.7.mlp.down_proj_float32_mom2.npz"
    )


def test_bad_stats_and_projection_files_name_the_file(tmp_path: Path) -> None:
    root = tmp_path / "stats"
    with pytest.raises(LMError, match="no such stats folder"):
        read_official_stats(root, [0], {0: 3})
    bad = root / "m" / "wikipedia_stats" / "model.layers.0.mlp.down_proj_float32_mom2.npz"
    bad.parent.mkdir(parents=True)
    np.savez(bad, **{"mom2.count": 3})
    with pytest.raises(LMError, match=r"down_proj_float32_mom2.npz: field 'mom2.mom2' missing"):
        read_official_stats(root, [0], {0: 3})
    official_npz(bad, np.ones((3, 5), np.float32))
    with pytest.raises(LMError, match=r"is \(5, 5\) but layer 0's keys have 3 dims"):
        read_official_stats(root, [0], {0: 3})
    official_npz(bad.with_name("model.layers.0.mlp.down_proj_float64_mom2.npz"), np.ones((2, 3)))
    with pytest.raises(LMError, match="2 files"):
        read_official_stats(root, [0], {0: 3})
    with pytest.raises(LMError, match=r"no file matching model\.layers\.1"):
        read_official_stats(root, [1], {1: 3})
    p = tmp_path / PROJECTION_FILE
    torch.save(torch.zeros(2, 3, 3), p)
    with pytest.raises(LMError, match=r"null_space_project.pt: holds 2 layers but 1 edit"):
        read_projection(p, [0], {0: 3})
    with pytest.raises(LMError, match=r"layer 1 is \(3, 3\), expected \(4, 4\)"):
        read_projection(p, [0, 1], {0: 3, 1: 4})
    p.write_bytes(b"not a tensor")
    with pytest.raises(LMError, match=r"null_space_project\.pt: not a tensor file"):
        read_projection(p, [0], {0: 3})


def test_projection_file_is_one_stacked_tensor_in_layer_order(tmp_path: Path) -> None:
    proj = {3: torch.eye(4), 5: torch.zeros(4, 4)}
    path = write_projection(tmp_path / PROJECTION_FILE, proj, [3, 5])
    raw = torch.load(path, weights_only=True)  # what the official code saves: one tensor
    assert isinstance(raw, torch.Tensor) and raw.shape == (2, 4, 4) and torch.equal(raw[0], proj[3])
    back = read_projection(path, [3, 5], {3: 4, 5: 4})
    assert torch.equal(back[5], proj[5]) and torch.equal(back[3], proj[3])


def test_antonym_items_are_few_shot_and_held_out() -> None:
    items = antonym_items(shots=3)
    assert len(items) == len(FEWSHOT_ANTONYMS) == 12
    for i, (prompt, choices, answer) in enumerate(items):
        word, antonym = FEWSHOT_ANTONYMS[i]
        assert prompt.endswith(f"\n{word}:") and prompt.count("\n") == 3
        assert choices[answer] == f" {antonym}" and f"{word}: {antonym}" not in prompt


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A 3-layer zoo Llama with a BPE tokenizer, saved as an HF folder, and synthetic requests."""
    from llm_methods.suit.data import synth_world, write_counterfact
    from llm_methods.zoo.models import tiny_llama
    from llm_methods.zoo.tokenizer import train_bpe

    root = tmp_path_factory.mktemp("suit-cli")
    reqs = synth_world(3, 0)[:2]
    texts = [f"{r.prompt.format(r.subject)}{r.target_true}." for r in reqs] * 4
    tok = train_bpe([*texts, "The quick brown fox."], 300)
    model = tiny_llama(len(tok), 3, 32, 2, max_len=128, seed=0)
    model.save_pretrained(root / "model")
    tok.save_pretrained(root / "model")
    return root / "model", write_counterfact(reqs, root / "req.json")


def _edit(model: Path, reqs: Path, out: Path, *extra: str) -> dict:
    args = [
        "suit",
        "edit",
        "--model",
        str(model),
        "--requests",
        str(reqs),
        "--method",
        "alphaedit",
        "--layers",
        "0,1",
        "--steps",
        "3",
        "--batch",
        "2",
        "--device",
        "cpu",
        "--out",
        str(out),
        *extra,
    ]
    assert main(args) == 0
    return json.loads((out / "edit.json").read_text())


def _weights(out: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(str(out / "edited_weights.safetensors"))


def test_edit_exports_and_imports_c_and_p(tiny_model, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    model, reqs = tiny_model
    first = _edit(model, reqs, tmp_path / "a", "--export-stats", "--export-projection")
    npz = sorted((tmp_path / "a" / "stats").rglob("*.npz"))
    assert [p.relative_to(tmp_path / "a" / "stats").as_posix() for p in npz] == [
        f"model/pydoc_stats/model.layers.{i}.mlp.down_proj_float32_mom2_128.npz" for i in (0, 1)
    ]
    p = torch.load(tmp_path / "a" / PROJECTION_FILE, weights_only=True)
    assert p.shape == (2, 128, 128) and len(first["files"]) == 3
    # importing what was exported gives the same edit
    _edit(
        model,
        reqs,
        tmp_path / "b",
        "--import-stats",
        str(tmp_path / "a" / "stats"),
        "--import-projection",
        str(tmp_path / "a" / PROJECTION_FILE),
    )
    a, b = _weights(tmp_path / "a"), _weights(tmp_path / "b")
    assert all(torch.allclose(a[k], b[k], atol=1e-6) for k in a)
    # an imported P is the one used: P = 0 leaves AlphaEdit nothing to change
    torch.save(torch.zeros_like(p), tmp_path / "zero.pt")
    _edit(model, reqs, tmp_path / "c", "--import-projection", str(tmp_path / "zero.pt"))
    from transformers import AutoModelForCausalLM

    base = AutoModelForCausalLM.from_pretrained(model).state_dict()
    for k, w in _weights(tmp_path / "c").items():  # saved under the model's own names
        assert k.startswith("model.layers.") and k.endswith(".mlp.down_proj.weight"), k
        assert torch.equal(w, base[k])
        assert not torch.equal(a[k], w)


def test_threshold_clamp_and_kl_flags_reach_the_editor(tiny_model, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    model, reqs = tiny_model
    rep = _edit(
        model,
        reqs,
        tmp_path / "lo",
        "--null-threshold",
        "1e-30",
        "--clamp",
        "0.5",
        "--kl-factor",
        "0",
        "--export-projection",
    )
    flags = {"null_threshold": 1e-30, "clamp": 0.5, "kl_factor": 0.0, "steps": 3}
    assert {k: rep["config"][k] for k in flags} == flags
    _edit(model, reqs, tmp_path / "hi", "--null-threshold", "1e30", "--export-projection")
    lo = torch.load(tmp_path / "lo" / PROJECTION_FILE, weights_only=True)
    hi = torch.load(tmp_path / "hi" / PROJECTION_FILE, weights_only=True)
    # every eigenvalue of C is below 1e30 (P = I) and none below 1e-30 (P = 0)
    assert float(lo.abs().max()) == 0.0
    torch.testing.assert_close(hi[0], torch.eye(128), atol=1e-4, rtol=0)


def test_edit_report_has_the_general_ability_probe(tiny_model, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    model, reqs = tiny_model
    rep = _edit(model, reqs, tmp_path / "o")
    ga = rep["general_ability"]
    assert set(ga) == {"before", "after"} and set(ga["before"]) == {"ppl", "fewshot_acc"}
    assert ga["before"]["ppl"] > 1 and 0 <= ga["after"]["fewshot_acc"] <= 100
    assert "fewshot_acc" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("extra", "match"),
    [
        (["--null-threshold", "0"], "--null-threshold and --clamp must be > 0"),
        (["--kl-factor", "-1"], "--kl-factor >= 0"),
        (["--method", "memit", "--export-projection"], "need --method alphaedit or suit"),
        (["--import-stats", "nowhere", "--export-stats"], "cannot go with --import-stats"),
    ],
)
def test_bad_flags_are_one_line(tmp_path: Path, capsys, extra, match) -> None:  # type: ignore[no-untyped-def]
    from iclr26_common.testing import assert_one_line_error

    reqs = tmp_path / "r.json"
    main(["suit", "synth", "--subjects", "2", "--out", str(reqs)])
    capsys.readouterr()
    line = assert_one_line_error(
        main,
        ["suit", "edit", "--requests", str(reqs), "--out", str(tmp_path / "o"), *extra],
        capsys,
    )
    assert match in line and not (tmp_path / "o").exists()
