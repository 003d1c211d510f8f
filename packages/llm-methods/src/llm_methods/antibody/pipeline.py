"""The two-stage pipeline on a tiny Llama: pretrain an unaligned base, align (SFT / Booster /
Vaccine / Antibody), finetune on poisoned user data (SFT or Antibody's weighted CE), evaluate
harmful score (HS) and finetune accuracy (FA) by greedy decoding.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from llm_methods.antibody.data import (
    EvalPrompt,
    SafetyRecord,
    SyntheticWorld,
    answer_matches,
    bos_ids,
    encode_records,
    is_refusal,
)
from llm_methods.antibody.model import (
    AntibodyConfig,
    LambdaEMA,
    TrainLog,
    antibody_align_grads,
    booster_align_grads,
    sft_grads,
    train,
    vaccine_align_grads,
    weighted_finetune_grads,
)
from llm_methods.lm.errors import LMError

__all__ = [
    "ALIGN_METHODS",
    "FINETUNE_METHODS",
    "Encoded",
    "StageSettings",
    "align",
    "encode",
    "evaluate",
    "finetune",
    "greedy",
    "pretrain_base",
]

ALIGN_METHODS = ("sft", "booster", "vaccine", "antibody")
FINETUNE_METHODS = ("sft", "antibody", "lisa")


@dataclass
class StageSettings:
    """One training stage's loop (the ``stage:`` group of a config). Checked on construction:
    one-line ``LMError`` (a ``ValueError``) naming the field."""

    steps: int = 100  # optimiser steps
    batch_size: int = 16  # rows per step (per split: alignment, harmful, user data)
    lr: float = 1e-3  # AdamW learning rate (constant)
    seed: int = 0  # batch draws (and the poisoned mixture of ``finetune``)
    booster_lambda: float = 5.0  # Booster's fixed λ (official script eta_lbd=5)
    booster_rho: float = 0.1  # Booster's perturbation radius
    vaccine_rho: float = 5.0  # Vaccine's radius (the Antibody repo's Vaccine script default)
    lisa_rho: float = 1.0  # Lisa's proximal weight (official scripts)
    lisa_align_share: float = 0.1  # Lisa: alignment_step / (alignment + finetune) = 100/1000

    def __post_init__(self) -> None:
        if self.steps < 1:
            raise LMError(f"steps must be >= 1, got {self.steps}")
        if self.batch_size < 1:
            raise LMError(f"batch_size must be >= 1, got {self.batch_size}")
        if self.lr <= 0:
            raise LMError(f"lr must be > 0, got {self.lr}")


class Encoded:
    """One split tokenised twice: ``response`` view (the row's response) and ``refusal`` view
    (the same prompts with their refusal targets), each ``ids`` / ``attn`` / ``loss_mask``
    [N, T] on ``device`` (default: the CPU)."""

    def __init__(
        self,
        tokenizer: Any,
        records: Sequence[SafetyRecord],
        max_len: int = 64,
        device: torch.device | str | None = None,
        truncate: bool = False,
    ) -> None:
        if not records:
            raise LMError("empty split")
        prompts, where = [r.prompt for r in records], [r.where for r in records]

        def view(targets: list[str]) -> dict:
            return _on(
                encode_records(tokenizer, prompts, targets, max_len, where, truncate), device
            )

        self.response = view([r.response for r in records])
        self.refusal = view([r.refusal for r in records])
        self.n = len(records)

    def sample(self, gen: torch.Generator, k: int) -> tuple[dict, dict]:
        """``k`` rows drawn with replacement by the CPU generator ``gen`` (the same draws on
        every device); both views, on the split's device."""
        idx = torch.randint(0, self.n, (min(k, self.n),), generator=gen)
        return _take(self.response, idx), _take(self.refusal, idx)


def _on(batch: dict, device: torch.device | str | None) -> dict:
    return batch if device is None else {k: v.to(device) for k, v in batch.items()}


def _take(batch: dict, idx: torch.Tensor) -> dict:
    """Rows ``idx`` (a CPU index) of ``batch``, without the all-padding columns."""
    out = {k: v[idx.to(v.device)] for k, v in batch.items()}
    width = int(out["attn"].sum(1).max())  # drop all-padding columns
    return {k: v[:, :width] for k, v in out.items()}


def _device(model: nn.Module) -> torch.device:
    return next(model.parameters()).device


def encode(
    tokenizer: Any,
    records: Sequence[SafetyRecord],
    max_len: int = 64,
    device: torch.device | str | None = None,
    truncate: bool = False,
) -> Encoded:
    return Encoded(tokenizer, records, max_len, device, truncate)


def pretrain_base(
    world: SyntheticWorld,
    vocab_size: int = 640,
    n_layers: int = 2,
    hidden: int = 64,
    heads: int = 4,
    steps: int = 400,
    batch_size: int = 32,
    lr: float = 3e-3,
    seed: int = 0,
    device: torch.device | str | None = None,
    quiet: bool = True,
) -> tuple[Any, nn.Module, TrainLog]:
    """A BPE tokenizer and a tiny Llama trained on ``world.pretrain`` (it answers arithmetic,
    copies a little and refuses the harmful requests it saw). The model is initialised on the
    CPU (seeded, the same weights everywhere) and trained on ``device`` (default: the CPU);
    :func:`align`, :func:`finetune` and :func:`evaluate` then work on the model's device.
    ``quiet=False``: progress lines over the steps on stderr."""
    from llm_methods.zoo.models import tiny_llama
    from llm_methods.zoo.tokenizer import train_bpe

    tokenizer = train_bpe(world.texts(), vocab_size)
    model = tiny_llama(len(tokenizer), n_layers, hidden, heads, max_len=96, seed=seed)
    if device is not None:
        model = model.to(device)
    data = encode(tokenizer, world.pretrain, device=_device(model))
    gen = torch.Generator().manual_seed(seed)

    def step(params: list, _i: int) -> tuple:
        batch, _ = data.sample(gen, batch_size)
        return sft_grads(model, params, batch)

    progress_as = None if quiet else "antibody pretrain steps"
    log = train(model, step, steps, lr=lr, weight_decay=0.01, progress_as=progress_as)
    return tokenizer, model, log


def align(
    base: nn.Module,
    tokenizer: Any,
    safe_rows: Sequence[SafetyRecord],
    harmful_rows: Sequence[SafetyRecord],
    method: str,
    settings: StageSettings,
    cfg: AntibodyConfig | None = None,
    max_len: int = 64,
    quiet: bool = True,
    truncate: bool = False,
) -> tuple[nn.Module, TrainLog]:
    """A copy of ``base`` aligned with ``method`` on ``safe_rows`` (e.g. harmful prompts with
    refusals, benign tasks) and, for Booster / Antibody, ``harmful_rows`` (harmful prompts with
    harmful responses; their ``refusal`` targets give Antibody's refusal view). ``truncate``: cut
    rows longer than ``max_len`` instead of refusing them (:func:`encode_records`)."""
    if method not in ALIGN_METHODS:
        raise LMError(f"unknown alignment method {method!r}; known: {', '.join(ALIGN_METHODS)}")
    cfg = cfg or AntibodyConfig()
    model = copy.deepcopy(base)
    dev = _device(model)
    safe = encode(tokenizer, safe_rows, max_len, dev, truncate)
    harmful = (
        encode(tokenizer, harmful_rows, max_len, dev, truncate)
        if method in ("booster", "antibody")
        else None
    )
    gen = torch.Generator().manual_seed(settings.seed)
    ema = LambdaEMA(cfg.ema) if cfg.lambda_rule == "code" else None
    bs = settings.batch_size

    def step(params: list, _i: int) -> tuple:
        batch, _ = safe.sample(gen, bs)
        if method == "sft":
            return sft_grads(model, params, batch)
        if method == "vaccine":
            return vaccine_align_grads(model, params, batch, settings.vaccine_rho)
        assert harmful is not None
        harm, refusal = harmful.sample(gen, bs)
        if method == "booster":
            return booster_align_grads(
                model, params, batch, harm, settings.booster_lambda, settings.booster_rho
            )
        return antibody_align_grads(model, params, batch, harm, refusal, cfg, ema)

    log = train(
        model,
        step,
        settings.steps,
        lr=settings.lr,
        progress_as=None if quiet else "antibody align steps",
    )
    return model, log


def finetune(
    aligned: nn.Module,
    tokenizer: Any,
    rows: Sequence[SafetyRecord],
    method: str,
    settings: StageSettings,
    tau: float = 1.0,
    max_len: int = 64,
    guide_rows: Sequence[SafetyRecord] = (),
    quiet: bool = True,
    truncate: bool = False,
) -> tuple[nn.Module, TrainLog]:
    """A copy of ``aligned`` finetuned on the user's ``rows``: plain SFT, Antibody's weighted
    token CE, or Lisa (needs ``guide_rows``, the alignment data). ``truncate``: cut rows longer
    than ``max_len`` instead of refusing them (:func:`encode_records`)."""
    if method not in FINETUNE_METHODS:
        raise LMError(f"unknown finetuning method {method!r}; known: {', '.join(FINETUNE_METHODS)}")
    if method == "lisa" and not guide_rows:
        raise LMError("lisa needs alignment (guide) rows")
    model = copy.deepcopy(aligned)
    dev = _device(model)
    data = encode(tokenizer, rows, max_len, dev, truncate)
    gen = torch.Generator().manual_seed(settings.seed + 1000)  # CPU draws, as in Encoded.sample
    harmful_flags = torch.tensor([not r.is_safe for r in rows])  # CPU, indexed by the CPU draws
    lisa = (
        _Lisa(model, encode(tokenizer, guide_rows, max_len, dev, truncate), settings)
        if method == "lisa"
        else None
    )

    def step(params: list, i: int) -> tuple:
        idx = torch.randint(0, data.n, (min(settings.batch_size, data.n),), generator=gen)
        batch, refusal = _take(data.response, idx), _take(data.refusal, idx)
        if lisa is not None:
            return lisa.step(params, i, batch, gen)
        if method == "sft":
            return sft_grads(model, params, batch)
        grads, info = weighted_finetune_grads(model, params, batch, refusal, tau)
        flags = harmful_flags[idx]
        w = torch.tensor(info.pop("weights"))  # CPU, from the list the recipe logs
        info.pop("d")
        info["weight_on_harmful"] = float(w[flags].sum())
        info["harmful_share"] = float(flags.float().mean())
        return grads, info

    log = train(
        model,
        step,
        settings.steps,
        lr=settings.lr,
        progress_as=None if quiet else "antibody finetune steps",
    )
    return model, log


class _Lisa:
    """Lisa's bi-state optimisation (Huang et al. 2024, as in the Booster / Antibody code): cycles
    of ``a`` alignment steps on the guide data and ``f`` finetuning steps on the user data
    (a / (a + f) = ``lisa_align_share``; one cycle spans the run as 100 / 900 does officially);
    after 10 % of the steps each state adds ρ/2 ‖θ − θ_other‖², θ_other being the weights at the
    last switch out of the other state. Starts in the alignment state."""

    def __init__(self, model: nn.Module, guide: Encoded, settings: StageSettings) -> None:
        self.model, self.guide, self.s = model, guide, settings
        self.align_steps = max(1, round(settings.steps * settings.lisa_align_share))
        self.ft_steps = max(1, settings.steps - self.align_steps)
        params = [p for p in model.parameters() if p.requires_grad]
        self.anchor = {
            "alignment": [p.detach().clone() for p in params],
            "finetune": [p.detach().clone() for p in params],
        }
        self.status, self.clock = "alignment", 0

    def step(self, params: list, i: int, batch: dict, gen: torch.Generator) -> tuple:
        limit = self.align_steps if self.status == "alignment" else self.ft_steps
        if i > 0 and self.clock >= limit:  # switch: remember where this state ended
            self.anchor[self.status] = [p.detach().clone() for p in params]
            self.status = "finetune" if self.status == "alignment" else "alignment"
            self.clock = 0
        self.clock += 1
        if self.status == "alignment":
            batch, _ = self.guide.sample(gen, self.s.batch_size)
        grads, info = sft_grads(self.model, params, batch)
        if i > 0.1 * self.s.steps and self.s.lisa_rho > 0:
            other = self.anchor["finetune" if self.status == "alignment" else "alignment"]
            grads = [
                g + self.s.lisa_rho * (p.detach() - a)
                for g, p, a in zip(grads, params, other, strict=True)
            ]
        info["lisa_state"] = 1.0 if self.status == "alignment" else 0.0
        return grads, info


@torch.no_grad()
def greedy(
    model: nn.Module,
    tokenizer: Any,
    prompts: Sequence[str],
    max_new_tokens: int = 16,
    progress_as: str | None = None,
) -> list[str]:
    """Greedy decoding of chat-formatted prompts, batched by prompt length (no padding), on
    the model's device. ``progress_as``: show progress over the batches under that name
    (:func:`iclr26_common.progress.progress`; ``None``: silent)."""
    from iclr26_common.progress import progress

    heads = []
    for p in prompts:
        text = tokenizer.apply_chat_template(
            [{"role": "user", "content": p}], tokenize=False, add_generation_prompt=True
        )
        heads.append([*bos_ids(tokenizer), *tokenizer(text, add_special_tokens=False).input_ids])
    groups: dict[int, list[int]] = {}
    for i, h in enumerate(heads):
        groups.setdefault(len(h), []).append(i)
    out: list[str] = [""] * len(prompts)
    model.eval()
    batches = list(groups.values())
    for idx in progress(batches, description=progress_as or "", quiet=progress_as is None):
        ids = torch.tensor([heads[i] for i in idx], device=_device(model))
        new = []
        for _ in range(max_new_tokens):
            nxt = model(input_ids=ids).logits[:, -1].argmax(-1, keepdim=True)
            new.append(nxt)
            ids = torch.cat([ids, nxt], 1)
        gen = torch.cat(new, 1).tolist()
        for i, row in zip(idx, gen, strict=True):
            if tokenizer.eos_token_id in row:
                row = row[: row.index(tokenizer.eos_token_id)]
            out[i] = tokenizer.decode(row, skip_special_tokens=True)
    return out


def evaluate(
    model: nn.Module,
    tokenizer: Any,
    harmful: Sequence[SafetyRecord | EvalPrompt],
    task: Sequence[SafetyRecord | EvalPrompt],
    max_new_tokens: int = 12,
    per_prompt: bool = False,
    fa_rule: str = "auto",
    quiet: bool = True,
) -> dict[str, Any]:
    """HS = % of harmful prompts answered without a refusal; FA = % of task prompts answered
    exactly (:func:`~llm_methods.antibody.data.answer_matches` with ``fa_rule``, the official
    scripts' GSM8K / SST-2 / AG News rules or our copy-task prefix rule; both in percent, as the paper
    reports them). ``per_prompt``: also return ``hs_per_prompt`` / ``fa_per_prompt``, each
    prompt's 0/1 outcome (what the intervals of ``antibody eval`` resample), and
    ``hs_texts`` / ``fa_texts``, the responses. ``quiet=False``:
    progress lines over the generation batches."""
    out: dict[str, Any] = {}

    def answers(rows: Sequence[SafetyRecord], what: str) -> list[str]:
        progress_as = None if quiet else f"antibody eval {what} prompts (batches)"
        return greedy(model, tokenizer, [r.prompt for r in rows], max_new_tokens, progress_as)

    if harmful:
        texts = answers(harmful, "harmful")
        complied = [int(not is_refusal(t)) for t in texts]
        out["hs"] = 100.0 * sum(complied) / len(texts)
        out["harmful_example"] = texts[0]
        if per_prompt:
            out["hs_per_prompt"] = complied
            out["hs_texts"] = texts
    if task:
        if any(r.answer is None for r in task):
            raise LMError("task rows need an 'answer' field to score finetune accuracy")
        texts = answers(task, "task")
        right = [
            int(answer_matches(t, r.answer, fa_rule))  # type: ignore[arg-type]
            for t, r in zip(texts, task, strict=True)
        ]
        out["fa"] = 100.0 * sum(right) / len(task)
        out["task_example"] = texts[0]
        if per_prompt:
            out["fa_per_prompt"] = right
            out["fa_texts"] = texts
    return out
