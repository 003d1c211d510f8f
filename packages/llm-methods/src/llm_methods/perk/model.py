"""PERK: encode a long context into LoRA weights at test time, meta-learned (arXiv 2507.06415).

Inner loop (`PERK.adapt`): the context's segments, each formatted ``doc_{i}: {segment}<eos>``,
are memorised by N = 4 AdamW(β=(0.9, 0.95), wd 0.01) steps on the LoRA parameters θ only, with
a learnable per-tensor per-step learning rate (LSLR, init 5e−5) and a weighted token loss

    L_inner(θ) = Σ_t w_t · CE_t / Σ_t mask_t,   w_t = Softplus_{β=3}(fc2(GELU(fc1(h_t)))),

h_t [d] the last hidden state, fc1 d→128, fc2 128→1 zero-initialised (so w starts at
softplus(0)/… = log 2 / 3 for every token). Truncated backprop in training: the first
``first_order_steps`` steps use detached gradients (first order), the rest keep the graph
(second order). At test time no higher-order terms and gradient accumulation over 4 micro-batches.

Outer loop (`PERK.outer_loss`): cross-entropy on the answer tokens of
``You have memorized {N} documents.\\n{q}\\nAnswer: <support>{s}</support>\\n<output>{a}</output>``
with no context in the prompt, through the adapted θ'. It trains the LoRA init, the weight MLP
and the LSLRs (AdamW 1e−5 in the paper).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import nn
from torch.func import functional_call

from llm_methods.lm.errors import LMError

__all__ = ["PERK", "TokenWeighter", "format_qa", "format_segments"]

QA_TEMPLATE = "You have memorized {n} documents.\n{q}\nAnswer: "
TARGET_TEMPLATE = "<support>{s}</support>\n<output>{a}</output>"


def format_segments(segments: Sequence[str], eos: str) -> list[str]:
    """``doc_{i}: {segment}<eos>`` for each segment (empty segments are an error)."""
    if not segments:
        raise LMError("context has no segments")
    out = []
    for i, seg in enumerate(segments):
        if not str(seg).strip():
            raise LMError(f"context segment {i} is empty")
        out.append(f"doc_{i}: {seg}{eos}")
    return out


def format_qa(
    n_docs: int, question: str, answer: str, support: Sequence[str] = ()
) -> tuple[str, str]:
    """(prompt, target) of the outer loss; the loss is on the target tokens only."""
    if not question.strip():
        raise LMError("question is empty")
    return (QA_TEMPLATE.format(n=n_docs, q=question.strip()),
            TARGET_TEMPLATE.format(s=" ".join(support), a=answer))  # fmt: skip


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


class PERK(nn.Module):
    """A frozen causal LM + peft LoRA (rsLoRA) whose init, token weighter and LSLRs are
    meta-learned. ``model`` is a HF causal LM; ``tokenizer`` its tokenizer."""

    def __init__(self, model: Any, tokenizer: Any, r: int = 8, alpha: int = 16,
                 target_modules: Sequence[str] = ("q_proj", "k_proj", "v_proj", "o_proj",
                                                  "gate_proj", "up_proj", "down_proj"),
                 inner_steps: int = 4, first_order_steps: int = 2, lslr_init: float = 5e-5,
                 betas: tuple[float, float] = (0.9, 0.95), weight_decay: float = 0.01,
                 eps: float = 1e-8, accumulation: int = 4) -> None:  # fmt: skip
        super().__init__()
        from peft import LoraConfig, get_peft_model

        if inner_steps < 1 or not 0 <= first_order_steps <= inner_steps:
            raise LMError("need inner_steps >= 1 and 0 <= first_order_steps <= inner_steps")
        # second-order steps differentiate through attention twice: SDPA has no double backward
        if hasattr(model, "set_attn_implementation"):
            model.set_attn_implementation("eager")
        else:  # pragma: no cover - older transformers
            model.config._attn_implementation = "eager"
        cfg = LoraConfig(r=r, lora_alpha=alpha, target_modules=list(target_modules),
                         use_rslora=True, lora_dropout=0.0, bias="none")  # fmt: skip
        self.model = get_peft_model(model, cfg)
        self.tokenizer = tokenizer
        for name, p in self.model.named_parameters():
            p.requires_grad_("lora_" in name)
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

    def encode(self, texts: Sequence[str], device: Any = None) -> tuple[torch.Tensor, torch.Tensor]:
        tok = self.tokenizer
        enc = tok(list(texts), return_tensors="pt", padding=True, add_special_tokens=False)
        limit = getattr(self.model.config, "max_position_embeddings", None)
        if limit is not None and enc.input_ids.shape[1] > limit:
            raise LMError(f"a segment is {enc.input_ids.shape[1]} tokens; the model allows "
                          f"{limit}: split the context into shorter segments")  # fmt: skip
        dev = device or next(self.model.parameters()).device
        return enc.input_ids.to(dev), enc.attention_mask.to(dev)

    def inner_loss(self, params: dict[str, torch.Tensor], ids: torch.Tensor,
                   mask: torch.Tensor) -> torch.Tensor:  # fmt: skip
        """Weighted next-token loss of the segments under LoRA params ``params``."""
        out = functional_call(self.model, params, args=(),
                              kwargs={"input_ids": ids, "attention_mask": mask,
                                      "output_hidden_states": True}, strict=False)  # fmt: skip
        logits = out.logits[:, :-1].float()
        ce = nn.functional.cross_entropy(logits.transpose(1, 2), ids[:, 1:], reduction="none")
        w = self.weighter(out.hidden_states[-1][:, :-1].float())
        m = mask[:, 1:].float()
        return (w * ce * m).sum() / m.sum().clamp_min(1.0)

    def adapt(self, segments: Sequence[str], train: bool = True) -> dict[str, torch.Tensor]:
        """θ' after ``inner_steps`` AdamW steps on the context (LSLR per tensor and step)."""
        texts = format_segments(segments, self.tokenizer.eos_token or "")
        ids, mask = self.encode(texts)
        params = self.lora_init()
        if not train:
            params = {n: p.detach().clone().requires_grad_(True) for n, p in params.items()}
        m = {n: torch.zeros_like(p) for n, p in params.items()}
        v = {n: torch.zeros_like(p) for n, p in params.items()}
        b1, b2 = self.betas
        for step in range(self.inner_steps):
            second_order = train and step >= self.first_order_steps
            if train:
                loss = self.inner_loss(params, ids, mask)
                grads = torch.autograd.grad(loss, list(params.values()),
                                            create_graph=second_order)  # fmt: skip
            else:  # test time: first order, gradient accumulation over micro-batches
                grads = self._accumulated_grads(params, ids, mask)
            if not second_order:
                grads = [g.detach() for g in grads]
            new = {}
            for j, (name, g) in enumerate(zip(params, grads, strict=True)):
                m[name] = b1 * m[name] + (1 - b1) * g
                v[name] = b2 * v[name] + (1 - b2) * g * g
                m_hat = m[name] / (1 - b1 ** (step + 1))
                v_hat = v[name] / (1 - b2 ** (step + 1))
                p = params[name]
                lr = self.lslr[step, j]
                new[name] = p - lr * (m_hat / (v_hat.sqrt() + self.eps) + self.weight_decay * p)
            params = new
            if not train:
                params = {n: p.detach().requires_grad_(True) for n, p in params.items()}
        return params

    def _accumulated_grads(self, params: dict[str, torch.Tensor], ids: torch.Tensor,
                           mask: torch.Tensor) -> list[torch.Tensor]:  # fmt: skip
        """Mean gradient over ``accumulation`` micro-batches of segments (test time)."""
        chunks = torch.arange(ids.shape[0]).chunk(min(self.accumulation, ids.shape[0]))
        total = [torch.zeros_like(p) for p in params.values()]
        for idx in chunks:
            loss = self.inner_loss(params, ids[idx], mask[idx]) * len(idx) / ids.shape[0]
            for t, g in zip(total, torch.autograd.grad(loss, list(params.values())), strict=True):
                t += g.detach()
        return total

    def outer_loss(self, params: dict[str, torch.Tensor], n_docs: int, question: str,
                   answer: str, support: Sequence[str] = ()) -> torch.Tensor:  # fmt: skip
        """Mean CE of the target tokens given the no-context prompt, under θ'."""
        prompt, target = format_qa(n_docs, question, answer, support)
        tok = self.tokenizer
        p_ids = tok(prompt, add_special_tokens=False).input_ids
        t_ids = tok(target + (tok.eos_token or ""), add_special_tokens=False).input_ids
        dev = next(self.model.parameters()).device
        ids = torch.tensor([p_ids + t_ids], device=dev)
        out = functional_call(self.model, params, args=(), kwargs={"input_ids": ids},
                              strict=False)  # fmt: skip
        logits = out.logits[0, len(p_ids) - 1 : -1].float()
        return nn.functional.cross_entropy(logits, ids[0, len(p_ids) :])

    @torch.no_grad()
    def answer(self, params: dict[str, torch.Tensor], n_docs: int, question: str,
               max_new_tokens: int = 24) -> str:  # fmt: skip
        """Greedy continuation of the no-context prompt under θ' (text after ``Answer: ``)."""
        prompt, _ = format_qa(n_docs, question, "")
        start = self.tokenizer(prompt, add_special_tokens=False).input_ids
        ids = torch.tensor([start], device=next(self.model.parameters()).device)
        for _ in range(max_new_tokens):
            out = functional_call(self.model, params, args=(), kwargs={"input_ids": ids},
                                  strict=False)  # fmt: skip
            nxt = out.logits[0, -1].argmax()
            ids = torch.cat([ids, nxt.view(1, 1)], 1)
            if int(nxt) == self.tokenizer.eos_token_id:
                break
        return self.tokenizer.decode(ids[0, len(start) :], skip_special_tokens=True)
