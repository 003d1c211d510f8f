"""PERK: encode a long context into LoRA weights at test time, meta-learned (arXiv 2507.06415).

Inner loop (`PERK.adapt`): the context's segments, each the text ``doc_{i}: {segment}<eos>``
with the ``doc_{i}:`` prompt masked out of the loss (upstream labels −100), are memorised by
N = 4 AdamW(β=(0.9, 0.95), wd 0.01) steps on the LoRA parameters θ only, with a learnable
per-tensor per-step learning rate (LSLR, init 5e−5) and a weighted token loss (upstream
``CausalLM.weighted_loss``)

    L_inner(θ) = Σ_{t: target t+1 unmasked} w_{t+1} · CE_t / Σ_i (len_i − 1),
    w_t = Softplus_{β=3}(fc2(GELU(fc1(h_t)))),

CE_t the loss of predicting token t+1 at position t, h_t [d] the last hidden state at position
t (so the weight of a target token is read at that token: upstream ``weights[:, 1:]``), fc1
d→128, fc2 128→1 zero-initialised (w starts at log 2 / 3 for every token); the denominator
counts every next-token position of the segments (upstream's packed ``.mean()``). Truncated
backprop in training: the first ``first_order_steps`` steps use detached gradients (first
order), the rest keep the graph (second order). During training the documents get a random
permutation of their ``doc_{i}`` numbers (upstream shuffles them). At test time no higher-order
terms, and gradient accumulation over 4 micro-batches (each micro-batch's loss / 4, summed).
LoRA dropout 0.1 (upstream) is active during the inner loop, as upstream's ``model.train()``.

Outer loop (`PERK.outer_loss`): cross-entropy on the answer tokens of the text ::

  You have memorized {N} documents.\n{q}\nAnswer: <support>{s}</support>\n<output>{a}</output><eos>

(supporting facts joined by newlines; without them the answer alone), tokenised whole with the
prompt masked, no context in the prompt, through the adapted θ'. It trains the LoRA init, the
weight MLP and the LSLRs (AdamW 1e−5, β=(0.9, 0.95) in the paper).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import nn
from torch.func import functional_call

from llm_methods.lm.errors import LMError
from llm_methods.lm.loading import cache_kwargs

__all__ = [
    "LORA_TARGETS",
    "PERK",
    "TokenWeighter",
    "adamw_update",
    "encode_prompt_response",
    "format_qa",
    "format_segments",
    "rslora",
]

QA_TEMPLATE = "You have memorized {n} documents.\n{q}\nAnswer:"
TARGET_TEMPLATE = "<support>{s}</support>\n<output>{a}</output>"
DOC_PROMPT = "doc_{i}:"
LORA_DROPOUT = 0.1
#: The projections rsLoRA adapts by default (every attention and MLP projection of a Llama block).
LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def format_segments(
    segments: Sequence[str], eos: str, doc_ids: Sequence[int] | None = None
) -> list[tuple[str, str]]:
    """(prompt ``doc_{i}:``, text ``doc_{i}: {segment}<eos>``) per segment, ``i`` from
    ``doc_ids`` (default 0, 1, ...); empty segments are an error."""
    if not segments:
        raise LMError("context has no segments")
    ids = list(range(len(segments))) if doc_ids is None else list(doc_ids)
    out = []
    for i, seg in zip(ids, segments, strict=True):
        if not str(seg).strip():
            raise LMError(f"context segment {ids.index(i)} is empty")
        prompt = DOC_PROMPT.format(i=i)
        out.append((prompt, f"{prompt} {seg}{eos}"))
    return out


def format_qa(
    n_docs: int, question: str, answer: str, support: Sequence[str] = ()
) -> tuple[str, str]:
    """(prompt, response) of the outer loss; the text is ``prompt + " " + response``."""
    if not question.strip():
        raise LMError("question is empty")
    response = TARGET_TEMPLATE.format(s="\n".join(support), a=answer) if support else answer
    return QA_TEMPLATE.format(n=n_docs, q=question.strip()), response


def encode_prompt_response(tokenizer: Any, prompt: str, text: str) -> tuple[list[int], int]:
    """(ids of the whole ``text``, number of leading prompt tokens to mask): the text is
    tokenised whole and its first ``len(tokenize(prompt))`` tokens are the prompt (upstream's
    ``encode_with_prompt_completion_format``)."""
    ids = list(tokenizer(text, add_special_tokens=False).input_ids)
    n_prompt = len(tokenizer(prompt, add_special_tokens=False).input_ids)
    return ids, min(n_prompt, len(ids))


def adamw_update(
    p: torch.Tensor,
    g: torch.Tensor,
    m: torch.Tensor,
    v: torch.Tensor,
    step: int,
    lr: torch.Tensor | float,
    betas: tuple[float, float],
    eps: float,
    weight_decay: float,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One differentiable AdamW step (decoupled decay), ``step`` counted from 1:
    m ← β₁m + (1−β₁)g, v ← β₂v + (1−β₂)g², p ← p − lr·(m̂/(√v̂ + ε) + λp). Returns (p, m, v);
    the graph runs through p, g (when it carries one) and a tensor ``lr`` (the LSLR)."""
    b1, b2 = betas
    m = b1 * m + (1 - b1) * g
    v = b2 * v + (1 - b2) * g * g
    m_hat, v_hat = m / (1 - b1**step), v / (1 - b2**step)
    return p - lr * (m_hat / (v_hat.sqrt() + eps) + weight_decay * p), m, v


class TokenWeighter(nn.Module):
    """w = Softplus(β=3)(fc2(GELU(fc1(h)))): h [B, T, d] -> [B, T]; fc2 zero-initialised."""

    def __init__(self, d: int, hidden: int = 128) -> None:
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(d, hidden), nn.Linear(hidden, 1)
        nn.init.zeros_(self.fc2.weight)
        nn.init.zeros_(self.fc2.bias)
        self.act, self.out = nn.GELU(), nn.Softplus(beta=3)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return self.out(self.fc2(self.act(self.fc1(h)))).squeeze(-1)


def rslora(
    model: Any, r: int, alpha: int, target_modules: Sequence[str], lora_dropout: float
) -> Any:
    """``model`` behind peft rsLoRA adapters (rank ``r``, ``alpha``, on ``target_modules``, no
    bias) with only the LoRA weights trainable: PERK's and FT-ICR's adapters."""
    from peft import LoraConfig, get_peft_model

    cfg = LoraConfig(
        r=r,
        lora_alpha=alpha,
        target_modules=list(target_modules),
        use_rslora=True,
        lora_dropout=lora_dropout,
        bias="none",
    )
    model = get_peft_model(model, cfg)
    for name, p in model.named_parameters():
        p.requires_grad_("lora_" in name)
    return model


class PERK(nn.Module):
    """A frozen causal LM + peft LoRA (rsLoRA, dropout 0.1) whose init, token weighter and
    LSLRs are meta-learned. ``model`` is a HF causal LM; ``tokenizer`` its tokenizer."""

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        r: int = 8,
        alpha: int = 16,
        target_modules: Sequence[str] = LORA_TARGETS,
        inner_steps: int = 4,
        first_order_steps: int = 2,
        lslr_init: float = 5e-5,
        betas: tuple[float, float] = (0.9, 0.95),
        weight_decay: float = 0.01,
        eps: float = 1e-8,
        accumulation: int = 4,
        lora_dropout: float = LORA_DROPOUT,
    ) -> None:
        super().__init__()
        if inner_steps < 1 or not 0 <= first_order_steps <= inner_steps:
            raise LMError("need inner_steps >= 1 and 0 <= first_order_steps <= inner_steps")
        # second-order steps differentiate through attention twice: SDPA has no double backward
        if hasattr(model, "set_attn_implementation"):
            model.set_attn_implementation("eager")
        else:  # pragma: no cover - older transformers
            model.config._attn_implementation = "eager"
        self.model = rslora(model, r, alpha, target_modules, lora_dropout)
        self.tokenizer = tokenizer
        self.lora_names = [n for n, p in self.model.named_parameters() if p.requires_grad]
        d = model.config.hidden_size
        self.weighter = TokenWeighter(d)
        self.lslr = nn.Parameter(torch.full((inner_steps, len(self.lora_names)), lslr_init))
        self.inner_steps, self.first_order_steps = inner_steps, first_order_steps
        self.betas, self.weight_decay, self.eps = betas, weight_decay, eps
        self.accumulation = accumulation

    # -- helpers -------------------------------------------------------------------------
    def lora_init(self) -> dict[str, torch.Tensor]:
        params = dict(self.model.named_parameters())
        return {n: params[n] for n in self.lora_names}

    def encode(
        self,
        pieces: Sequence[tuple[str, str]],
        device: Any = None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Right-padded ``ids``, ``mask`` and ``labels`` (−100 on each prompt and on padding)
        ``[n, T]`` for (prompt, text) pairs."""
        rows = [encode_prompt_response(self.tokenizer, p, t) for p, t in pieces]
        width = max(len(ids) for ids, _ in rows)
        limit = getattr(self.model.config, "max_position_embeddings", None)
        if limit is not None and width > limit:
            raise LMError(
                f"a segment is {width} tokens; the model allows {limit}: split the "
                "context into shorter segments"
            )
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        ids = torch.full((len(rows), width), pad, dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        labels = torch.full((len(rows), width), -100, dtype=torch.long)
        for r, (row, n_prompt) in enumerate(rows):
            ids[r, : len(row)] = torch.tensor(row)
            mask[r, : len(row)] = 1
            labels[r, n_prompt : len(row)] = torch.tensor(row[n_prompt:])
        dev = device or next(self.model.parameters()).device
        return ids.to(dev), mask.to(dev), labels.to(dev)

    def inner_loss(
        self,
        params: dict[str, torch.Tensor],
        ids: torch.Tensor,
        mask: torch.Tensor,
        labels: torch.Tensor,
    ) -> torch.Tensor:
        """Weighted next-token loss of the segments under LoRA params ``params`` (see the module
        docstring): target t+1's loss weighted by w at position t+1."""
        out = functional_call(
            self.model,
            params,
            args=(),
            kwargs={"input_ids": ids, "attention_mask": mask, "output_hidden_states": True},
            strict=False,
        )
        logits = out.logits[:, :-1].float()
        target = labels[:, 1:]
        ce = nn.functional.cross_entropy(
            logits.transpose(1, 2), target.clamp_min(0), reduction="none"
        ) * (target != -100)
        w = self.weighter(out.hidden_states[-1].float()) * mask  # [n, T]
        return (w[:, 1:] * ce).sum() / mask[:, 1:].sum().clamp_min(1)

    def adapt(
        self, segments: Sequence[str], train: bool = True, doc_ids: Sequence[int] | None = None
    ) -> dict[str, torch.Tensor]:
        """θ' after ``inner_steps`` AdamW steps on the context (LSLR per tensor and step).
        ``doc_ids``: the documents' numbers (training passes a random permutation)."""
        pieces = format_segments(segments, self.tokenizer.eos_token or "", doc_ids)
        ids, mask, labels = self.encode(pieces)
        params = self.lora_init()
        if not train:
            params = {n: p.detach().clone().requires_grad_(True) for n, p in params.items()}
        m = {n: torch.zeros_like(p) for n, p in params.items()}
        v = {n: torch.zeros_like(p) for n, p in params.items()}
        mode = self.model.training
        self.model.train()  # upstream adapts in train mode: LoRA dropout is active
        try:
            for step in range(self.inner_steps):
                second_order = train and step >= self.first_order_steps
                if train:
                    loss = self.inner_loss(params, ids, mask, labels)
                    grads = torch.autograd.grad(
                        loss, list(params.values()), create_graph=second_order
                    )
                else:  # test time: first order, gradient accumulation over micro-batches
                    grads = self._accumulated_grads(params, ids, mask, labels)
                if not second_order:
                    grads = [g.detach() for g in grads]
                new = {}
                for j, (name, g) in enumerate(zip(params, grads, strict=True)):
                    new[name], m[name], v[name] = adamw_update(
                        params[name],
                        g,
                        m[name],
                        v[name],
                        step + 1,
                        self.lslr[step, j],
                        self.betas,
                        self.eps,
                        self.weight_decay,
                    )
                params = new
                if not train:
                    params = {n: p.detach().requires_grad_(True) for n, p in params.items()}
        finally:
            self.model.train(mode)
        return params

    def _accumulated_grads(
        self,
        params: dict[str, torch.Tensor],
        ids: torch.Tensor,
        mask: torch.Tensor,
        labels: torch.Tensor,
    ) -> list[torch.Tensor]:
        """Σ over ``accumulation`` micro-batches of ∇(micro-batch loss / n micro-batches)
        (upstream's test-time ``inner_grad_accum``)."""
        chunks = torch.arange(ids.shape[0]).chunk(min(self.accumulation, ids.shape[0]))
        total = [torch.zeros_like(p) for p in params.values()]
        for idx in chunks:
            loss = self.inner_loss(params, ids[idx], mask[idx], labels[idx]) / len(chunks)
            for t, g in zip(total, torch.autograd.grad(loss, list(params.values())), strict=True):
                t += g.detach()
        return total

    def outer_loss(
        self,
        params: dict[str, torch.Tensor],
        n_docs: int,
        question: str,
        answer: str,
        support: Sequence[str] = (),
    ) -> torch.Tensor:
        """Mean CE of the response tokens (+ EOS) given the no-context prompt, under θ'."""
        prompt, response = format_qa(n_docs, question, answer, support)
        tok = self.tokenizer
        ids, n_prompt = encode_prompt_response(
            tok, prompt, f"{prompt} {response}{tok.eos_token or ''}"
        )
        dev = next(self.model.parameters()).device
        x = torch.tensor([ids], device=dev)
        out = functional_call(self.model, params, args=(), kwargs={"input_ids": x}, strict=False)
        logits = out.logits[0, n_prompt - 1 : -1].float()
        return nn.functional.cross_entropy(logits, x[0, n_prompt:])

    @torch.no_grad()
    def answer(
        self, params: dict[str, torch.Tensor], n_docs: int, question: str, max_new_tokens: int = 24
    ) -> str:
        """Greedy continuation (KV-cached) of the no-context prompt under θ' (the text after
        ``Answer:``), in eval mode."""
        prompt, _ = format_qa(n_docs, question, "")
        start = self.tokenizer(prompt, add_special_tokens=False).input_ids
        dev = next(self.model.parameters()).device
        mode = self.model.training
        self.model.eval()
        new: list[int] = []
        try:
            x = torch.tensor([start], device=dev)
            out = functional_call(
                self.model,
                params,
                args=(),
                kwargs={"input_ids": x, "use_cache": True},
                strict=False,
            )
            for _ in range(max_new_tokens):
                nxt = int(out.logits[0, -1].argmax())
                new.append(nxt)
                if nxt == self.tokenizer.eos_token_id:
                    break
                cache = getattr(out, "cache", None) or out.past_key_values
                kwargs = {
                    "input_ids": torch.tensor([[nxt]], device=dev),
                    "use_cache": True,
                    **cache_kwargs(self.model, cache),
                }
                out = functional_call(self.model, params, args=(), kwargs=kwargs, strict=False)
        finally:
            self.model.train(mode)
        return self.tokenizer.decode(new, skip_special_tokens=True)
