"""ROME, MEMIT and AlphaEdit weight updates equal the official code's on a tiny Llama.

Reference numbers: ``tests/data/reference/suit_official.npz`` — ΔW of every edited
``down_proj`` produced once by the official ``apply_rome_to_model`` (kmeng01/rome),
``apply_memit_to_model`` (kmeng01/memit) and ``apply_AlphaEdit_to_model`` + ``get_project``
(jianghoucheng/AlphaEdit) in a scratch environment (repositories, commits, patches and the
driver in ``suit_official.source.json``). The shared inputs were written by :func:`write_inputs`
(our code, fixed seeds): a byte-level BPE tokenizer without BOS (GPT-2's convention, which the
official subject-index code assumes), a randomly initialised 4×32 Llama, the key second moment
C of layers 1 and 2 given explicitly (no Wikipedia statistics), four CounterFact requests and
the hyper-parameters; the official context templates were set to ours (ROME: the flat list;
MEMIT/AlphaEdit: ``[["{}"], [the two prefixed ones]]``, the official layout).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from iclr26_common.testing import assert_mutation_detected, assert_portable_close
from llm_methods.suit.data import EditRequest
from llm_methods.suit.editors import EditConfig, Editor

REF = Path(__file__).parent / "data" / "reference"
TOKENS = ("<|endoftext|>", "<|pad|>")
#: Relative tolerance of each edited layer's ΔW (``max |ours − official| / max |official|``,
#: iclr26_common.testing; entries O(1e-1..1e1)): the official code runs its value loop in float32
#: (AlphaEdit also its solve), ours solves in float64. At ~10x the largest difference measured on
#: AMD EPYC (2026-12-06) over ATEN_CPU_CAPABILITY=default (MKL_CBWR=COMPATIBLE; also with
#: ONEDNN_MAX_CPU_ISA=SSE41, oneDNN's oldest kernels), avx2, avx512 and unset: 4.3e-6 (AlphaEdit
#: layer 2, avx512; ROME 4.0e-6, MEMIT 2.2e-6). The mutation (C = I, the key statistics not used)
#: moves ΔW by >= 0.66 (ROME).
TOL = 4.3e-5


def _tokenizer(path: Path):  # -> PreTrainedTokenizerFast
    """The shared tokenizer: no BOS (``bos_token`` unset), right padding, as GPT-2's."""
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast(
        tokenizer_file=str(path), eos_token=TOKENS[0], pad_token=TOKENS[1]
    )


def _model(spec: dict, state: dict[str, np.ndarray]):  # -> LlamaForCausalLM
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(**spec, attn_implementation="eager")
    model = LlamaForCausalLM(config).eval()
    model.load_state_dict({k: torch.from_numpy(v) for k, v in state.items()})
    return model


def _requests(spec: dict) -> list[EditRequest]:
    """The requests as ours reads them (targets keep ROME's leading space)."""
    return [
        EditRequest(
            case_id=r["case_id"],
            prompt=r["prompt"],
            subject=r["subject"],
            target_new=r["target_new"]["str"],
            target_true=r["target_true"]["str"],
        )
        for r in spec["requests"]
    ]


def write_inputs(folder: Path) -> None:
    """Write the shared inputs (run once; the official driver reads the same files)."""
    from llm_methods.lm import wrap
    from llm_methods.suit.keys import _moments
    from llm_methods.zoo.models import tiny_llama
    from llm_methods.zoo.tokenizer import train_bpe

    words = [
        " English",
        " French",
        " piano",
        " guitar",
        " Sweden",
        " Spain",
        " Google",
        " Apple",
        " New York",
    ]
    texts = [
        "Here is a fact. I read this today: The mother tongue of is plays the which is "
        "located in was created by"
    ] * 3 + [w * 20 for w in words]
    texts.append("Danielle Darrieux Toko Yasuda Autonomous University of Madrid Apple A5")
    folder.mkdir(parents=True, exist_ok=True)
    train_bpe(texts, 420).backend_tokenizer.save(str(folder / "suit_tiny_tokenizer.json"))
    tok = _tokenizer(folder / "suit_tiny_tokenizer.json")
    spec = {
        "vocab_size": len(tok),
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_hidden_layers": 4,
        "num_attention_heads": 4,
        "num_key_value_heads": 4,
        "max_position_embeddings": 256,
        "tie_word_embeddings": False,
        "rope_theta": 10000.0,
        "rms_norm_eps": 1e-6,
        "bos_token_id": 0,
        "eos_token_id": 0,
        "pad_token_id": 1,
    }
    model = tiny_llama(
        len(tok), n_layers=4, hidden=32, heads=4, intermediate=64, seed=0, tie_embeddings=False
    )
    with torch.no_grad():  # std 0.16 instead of 0.02: O(1) keys, residuals and logits
        for p in model.parameters():
            if p.dim() == 2:
                p.mul_(8.0)
    gen = torch.Generator().manual_seed(0)
    chunks = torch.randint(5, len(tok), (256, 24), generator=gen).tolist()
    cov = _moments(wrap(tok, model, "tiny"), [1, 2], chunks, 64)
    arrays = {f"model/{k}": v.detach().numpy() for k, v in model.state_dict().items()}
    arrays.update({f"cov/{i}": c.numpy() for i, c in cov.items()})
    np.savez(folder / "suit_tiny_inputs.npz", **arrays)
    threshold = float(torch.linalg.eigvalsh(cov[1].double()).median())  # half of C null
    requests = [
        ("The mother tongue of {} is", "Danielle Darrieux", " English", " French"),
        ("{} plays the", "Toko Yasuda", " piano", " guitar"),
        ("{}, which is located in", "Autonomous University of Madrid", " Sweden", " Spain"),
        ("{} was created by", "Apple A5", " New York", " Apple"),
    ]
    hparams = {
        "layers": [1, 2],
        "rome_layer": 1,
        "v_loss_layer": 3,
        "v_num_grad_steps": 8,
        "v_lr": 0.5,
        "v_weight_decay": 0.5,
        "kl_factor": 0.0625,
        "clamp_norm_factor": 0.75,
        "rome_clamp_norm_factor": 4.0,
        "mom2_update_weight": 10.0,
        "L2": 0.1,
        "nullspace_threshold": threshold,
    }
    info = {
        "model": spec,
        "templates_rome": ["{}", "Here is a fact. {}", "I read this today: {}"],
        "templates_memit": [["{}"], ["Here is a fact. {}", "I read this today: {}"]],
        "requests": [
            {
                "case_id": i,
                "prompt": p,
                "subject": s,
                "target_new": {"str": n},
                "target_true": {"str": t},
            }
            for i, (p, s, n, t) in enumerate(requests)
        ],
        "hparams": hparams,
        "runs": {
            "rome": "requests 0, 1 one after the other (layer 1)",
            "memit": "requests 0, 1 in one batch (layers 1, 2)",
            "alphaedit": "requests 0, 1 then 2, 3 (two sequential batches, layers 1, 2)",
        },
    }
    (folder / "suit_tiny_inputs.json").write_text(json.dumps(info, indent=1) + "\n")


@pytest.fixture(scope="module")
def inputs() -> dict:
    info = json.loads((REF / "suit_tiny_inputs.json").read_text())
    arrays = np.load(REF / "suit_tiny_inputs.npz")
    info["state"] = {k[6:]: arrays[k] for k in arrays.files if k.startswith("model/")}
    info["cov"] = {
        int(k[4:]): torch.from_numpy(arrays[k]) for k in arrays.files if k.startswith("cov/")
    }
    info["official"] = dict(np.load(REF / "suit_official.npz"))
    return info


def _deltas(inputs: dict, method: str, identity_c: bool = False) -> dict[int, np.ndarray]:
    """Our ΔW of each edited layer for the run the official driver did (``inputs["runs"]``);
    ``identity_c``: the mutation, C = I (the key statistics not used)."""
    from llm_methods.lm import wrap

    h = inputs["hparams"]
    templates = tuple(inputs["templates_rome"])
    cfg = EditConfig(
        layers=tuple(h["layers"]),
        rome_layer=h["rome_layer"],
        steps=h["v_num_grad_steps"],
        lr=h["v_lr"],
        kl_factor=h["kl_factor"],
        weight_decay=h["v_weight_decay"],
        clamp=h["clamp_norm_factor"],
        rome_clamp=h["rome_clamp_norm_factor"],
        mom2_weight=h["mom2_update_weight"],
        l2=h["L2"],
        null_threshold=h["nullspace_threshold"],
        templates=templates,
    )
    tok = _tokenizer(REF / "suit_tiny_tokenizer.json")
    lm = wrap(tok, _model(inputs["model"], inputs["state"]), "tiny")
    cov = {
        i: torch.eye(len(c), dtype=c.dtype) if identity_c else c for i, c in inputs["cov"].items()
    }
    editor = Editor(lm, method, cfg, cov)
    before = {i: editor_weight(lm, i).clone() for i in editor.layers}
    reqs = _requests(inputs)
    batches = [reqs[:2], reqs[2:4]] if method == "alphaedit" else [reqs[:2]]
    for batch in batches:
        editor.edit(batch)
    return {i: (editor_weight(lm, i) - before[i]).numpy() for i in editor.layers}


def editor_weight(lm, layer: int) -> torch.Tensor:  # type: ignore[no-untyped-def]
    from llm_methods.suit.keys import edit_weight

    return edit_weight(lm, layer).weight.detach()


@pytest.mark.parametrize("method", ["rome", "memit", "alphaedit"])
def test_weight_update_equals_official(inputs: dict, method: str) -> None:
    ours = _deltas(inputs, method)
    want = {
        int(k.split("/")[1]): v for k, v in inputs["official"].items() if k.startswith(method + "/")
    }
    assert sorted(ours) == sorted(want)
    mutated = _deltas(inputs, method, identity_c=True)
    for layer, w in want.items():
        assert np.abs(w).max() > 0.1  # the official edit is not trivial
        assert_portable_close(ours[layer], w, tol=TOL, what=f"{method} layer {layer}")
        assert_mutation_detected(mutated[layer], w, tol=TOL, what=f"{method} {layer}, C = I")


def test_sidecar_names_the_official_runs() -> None:
    source = json.loads((REF / "suit_official.source.json").read_text())
    assert {"rome", "memit", "alphaedit"} <= set(source["official"])
    for entry in source["official"].values():
        assert len(entry["commit"]) == 40


if __name__ == "__main__" and sys.argv[1:2] == ["--write-inputs"]:
    write_inputs(Path(sys.argv[2]))
