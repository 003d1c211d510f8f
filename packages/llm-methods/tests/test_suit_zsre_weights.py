"""Issue 41, SUIT: zsRE requests are scored by token accuracy (the official
``compute_rewrite_quality_zsre``), ``suit edit`` saves its edited weights under the model's own
parameter names with a way to load them, and ``edit.json`` lists per-request results.

Every test here fails on d9942d3 (there, zsRE was scored with CounterFact's p(new) > p(true),
requests had no ``kind``, the weights were named ``layers.{i}.down_proj.weight`` with no loader,
and ``edit.json`` held aggregates only)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from llm_methods.cli import main
from llm_methods.suit.data import EditRequest, read_zsre

PROMPTS = [
    "A list is a {} sequence",
    "Functions are defined with the {} statement",
    "Exceptions are raised with {} and handled",
    "The quick brown {} jumps over",
]
SUBJECTS = ["mutable", "def", "raise", "fox"]


def _zsre_records() -> list[dict[str, object]]:
    return [
        {
            "subject": subject,
            "src": prompt.format(subject),
            "rephrase": f"In short, {prompt.format(subject)}",
            "alt": "Zanzibar Quartz",
            "answers": ["Rome"],
            "loc": "nq question: who wrote the lazy dog",
            "loc_ans": "Shakespeare Tolstoy",
        }
        for prompt, subject in zip(PROMPTS, SUBJECTS, strict=True)
    ]


@torch.no_grad()
def _greedy_target(lm, prompt: str, n: int = 3) -> str:  # type: ignore[no-untyped-def]
    """The model's own greedy continuation of ``prompt`` as text that re-tokenises to the same
    tokens (shortened until it does): a target this model outputs."""
    from llm_methods.lm import encode_texts

    ids = encode_texts(lm, [prompt])[0]
    new: list[int] = []
    for _ in range(n):
        logits = lm.model(input_ids=torch.tensor([ids + new])).logits[0, -1]
        new.append(int(logits.argmax()))
    for k in range(n, 0, -1):
        text = lm.tokenizer.decode(new[:k])
        if text.strip() and lm.tokenizer(text, add_special_tokens=False).input_ids == new[:k]:
            return text
    raise AssertionError(f"no round-tripping greedy target for {prompt!r}")


def test_zsre_is_token_accuracy_untrained_near_zero_and_own_output_full(tiny, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """An untrained 2-layer model scored 100 -> 100 on zsRE under the CounterFact comparison; the
    official zsRE score is token accuracy of the answer: near 0 for an untrained model, 100 for
    a model that outputs the answer (its own greedy continuation), on the rewrite prompt,
    the paraphrase and the neighbourhood alike."""
    from llm_methods.suit.metrics import edit_metrics, request_metrics

    path = tmp_path / "z.json"
    path.write_text(json.dumps(_zsre_records()))
    requests = read_zsre(path)
    assert all(r.kind == "zsre" for r in requests)
    scores = edit_metrics(tiny, requests)
    assert scores["efficacy"] <= 10 and scores["generalization"] <= 10
    assert scores["specificity"] <= 10

    own = []
    for prompt, subject in zip(PROMPTS, SUBJECTS, strict=True):
        text = prompt.format(subject)
        paraphrase = f"In short, {text}"
        loc = "nq question: who wrote the lazy dog?"
        own.append(
            EditRequest(
                case_id=len(own),
                prompt=prompt,
                subject=subject,
                target_new=_greedy_target(tiny, text),
                target_true=" Rome",
                paraphrase_prompts=(paraphrase,),
                neighborhood_prompts=(loc,),
                neighborhood_targets=(_greedy_target(tiny, loc),),
                kind="zsre",
            )
        )
    # the paraphrase's greedy continuation differs in general: score it on its own target too
    scores = edit_metrics(tiny, own)
    assert scores["efficacy"] == 100.0 and scores["specificity"] == 100.0
    rows = request_metrics(tiny, own)
    assert [row["efficacy"] for row in rows] == [100.0] * len(own)
    assert {row["kind"] for row in rows} == {"zsre"}


def test_zsre_reader_official_layout_and_target_choice(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The official MENDQADataset edits towards answers[0] and asks the neighbourhood question as
    ``loc + "?"`` (the default target); ``target="alt"`` keeps MEND / EasyEdit's new answer."""
    path = tmp_path / "z.json"
    path.write_text(json.dumps(_zsre_records()[:1]))
    (answers,) = read_zsre(path)
    (alt,) = read_zsre(path, target="alt")
    assert alt.target_new == " Zanzibar Quartz" and answers.target_new == " Rome"
    assert alt.neighborhood_prompts == ("nq question: who wrote the lazy dog?",)
    assert alt.neighbour_answers() == [" Shakespeare Tolstoy"]
    with pytest.raises(ValueError, match="zsRE target must be one of"):
        read_zsre(path, target="gold")


@pytest.fixture()
def tiny_folder(tiny, tmp_path) -> Path:  # type: ignore[no-untyped-def]
    folder = tmp_path / "base"
    tiny.model.save_pretrained(folder)
    tiny.tokenizer.save_pretrained(folder)
    return folder


def test_suit_edit_saves_loadable_hf_named_weights_and_per_request_results(
    tiny_folder, tmp_path, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    """``suit edit`` on a zsRE file: ``edited_weights.safetensors`` is keyed by the HF model's
    own parameter names, ``load_edited(OUT)`` and the ``--save-model`` folder (through
    ``load_lm``) are the edited model (same logits as each other, not the base model's, and
    the per-request results of ``edit.json`` recomputed on them)."""
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM

    from llm_methods.lm import load_lm
    from llm_methods.suit.data import read_requests
    from llm_methods.suit.metrics import request_metrics
    from llm_methods.suit.weights import load_edited

    monkeypatch.setenv("ICLR26_CACHE", str(tmp_path / "cache"))
    requests = tmp_path / "z.json"
    requests.write_text(json.dumps(_zsre_records()[:2]))
    out = tmp_path / "o"
    argv = ["suit", "edit", "--model", str(tiny_folder), "--requests", str(requests)]
    argv += ["--method", "rome", "--rome-layer", "0", "--steps", "3", "--batch", "1"]
    argv += ["--device", "cpu", "--quiet", "--save-model", "--out", str(out)]
    assert main(argv) == 0
    report = json.loads((out / "edit.json").read_text())
    saved = load_file(str(out / "edited_weights.safetensors"))
    assert set(saved) == {"model.layers.0.mlp.down_proj.weight"}
    # an ordinary folder (d875146: save_pretrained's model.safetensors was 0600)
    assert all(f.stat().st_mode & 0o777 == 0o644 for f in (out / "model").iterdir())
    hf = AutoModelForCausalLM.from_pretrained(out / "model", local_files_only=True)
    assert set(saved) <= set(hf.state_dict())
    assert torch.equal(
        hf.state_dict()["model.layers.0.mlp.down_proj.weight"], saved[next(iter(saved))]
    )

    rows = report["requests"]
    assert [row["case_id"] for row in rows] == [0, 1] and rows[0]["kind"] == "zsre"
    assert (
        set(rows[0]["before"])
        == set(rows[0]["after"])
        == {
            "efficacy",
            "generalization",
            "specificity",
        }
    )

    base = load_lm(str(tiny_folder), device="cpu")
    edited = load_edited(out, device="cpu")
    full = load_lm(str(out / "model"), device="cpu")
    prompt = torch.tensor([base.tokenizer(PROMPTS[0].format(SUBJECTS[0])).input_ids])
    with torch.no_grad():
        logits = [lm.model(input_ids=prompt).logits[0, -1] for lm in (base, edited, full)]
    assert torch.allclose(logits[1], logits[2], atol=1e-5)
    assert not torch.allclose(logits[0], logits[1], atol=1e-5)
    reqs = read_requests(requests)
    for lm in (edited, full):
        again = request_metrics(lm, reqs)
        assert [{k: r[k] for k in rows[0]["after"]} for r in again] == [
            row["after"] for row in rows
        ]


def test_apply_edited_weights_refuses_foreign_names(tiny, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A file of the old layout (``layers.{i}.down_proj.weight``) is named in one line."""
    from safetensors.torch import save_file

    from llm_methods.lm import LMError
    from llm_methods.suit.editors import fresh_copy
    from llm_methods.suit.weights import apply_edited_weights

    path = tmp_path / "old.safetensors"
    save_file({"layers.0.down_proj.weight": tiny.layers[0].mlp.down_proj.weight.detach()}, path)
    with pytest.raises(LMError, match=r"'layers\.0\.down_proj\.weight' is not a parameter"):
        apply_edited_weights(fresh_copy(tiny), path)
