"""ROME, MEMIT, AlphaEdit and SUIT on one key/value machinery (:mod:`llm_methods.suit.keys`).

Value targets (ROME §3.1 / MEMIT Eq. 16): a vector added to the residual stream after layer ``L``
at the subject's last token is optimised so that the prompt continues with ``target_new``
(−log p, plus KL to the unedited next-token distribution on ``"{subject} is a"`` and a weight
decay ‖δ‖²/‖h‖²), clamped to ``clamp·‖h‖``. SUIT restricts it to the 2-D form
δ' = (hᵀw₂ − hᵀw₁)w₁ + (hᵀw₁ − hᵀw₂)w₂ with penalty λ(ŵ₁ᵀŵ₂)².

Weight updates of the FFN output projection ``W`` ``[d, d_ff]`` (keys ``K`` ``[n, d_ff]``,
residuals ``R`` ``[n, d]``, key second moment ``C``):

- ROME (rank one, one layer): ΔW = δ (C⁻¹k)ᵀ / (kᵀC⁻¹k);
- MEMIT (spread over ``layers``): ΔW = Rᵀ K (λ_C C + KᵀK)⁻¹, R split as (z − z_cur)/(layers left);
- AlphaEdit: ΔW = [(P(KᵀK + K_pᵀK_p) + αI)⁻¹ P Kᵀ R]ᵀ with P the projector on the null space
  of C (eigenvalues below ``null_threshold``) and K_p the keys of earlier edits;
- SUIT: AlphaEdit with keys k' = (I − U_m U_mᵀ)k, and the update reads only k' (ΔW ← ΔW(I − UUᵀ)).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from llm_methods.lm import LM, LMError, collate, replace_residual
from llm_methods.suit.data import EditRequest
from llm_methods.suit.keys import (
    CONTEXT_TEMPLATES,
    edit_weight,
    prompt_with_subject,
    request_keys,
)

__all__ = ["METHODS", "EditConfig", "Editor", "fresh_copy", "null_space_projector", "value_targets"]

METHODS = ("rome", "memit", "alphaedit", "suit")
KL_PROMPT = "{} is a"


@dataclass(frozen=True)
class EditConfig:
    """Hyper-parameters (defaults: the AlphaEdit/MEMIT Llama-3 and ROME recipes, scaled)."""

    layers: tuple[int, ...] = (3, 4, 5, 6)
    rome_layer: int = 4
    steps: int = 20
    lr: float = 0.5
    kl_factor: float = 0.0625
    weight_decay: float = 0.5
    clamp: float = 0.75
    rome_clamp: float = 4.0
    mom2_weight: float = 15000.0
    l2: float = 10.0
    null_threshold: float = 2e-2
    tau: float = 0.4
    lam: float = 0.3
    seed: int = 0
    templates: tuple[str, ...] = CONTEXT_TEMPLATES


def null_space_projector(c: torch.Tensor, threshold: float) -> torch.Tensor:
    """AlphaEdit's P = Û Ûᵀ, Û the eigenvectors of C with eigenvalue < ``threshold`` × the largest."""
    evals, evecs = torch.linalg.eigh(c.double())
    u = evecs[:, evals < threshold * evals.max()]
    return (u @ u.T).float()


def _suit_delta(h: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor) -> torch.Tensor:
    """δ' = (hᵀw₂ − hᵀw₁)w₁ + (hᵀw₁ − hᵀw₂)w₂ for h ``[n, d]``."""
    a = (h @ w2 - h @ w1)[:, None]
    return a * w1 - a * w2


def _rows(
    lm: LM, req: EditRequest, templates: Sequence[str]
) -> tuple[list[list[int]], list[int], list[int]]:
    """(ids, subject index, target start) for the rewrite prompt under each context template."""
    target = list(lm.tokenizer(req.target_new, add_special_tokens=False).input_ids)
    rows, idx, starts = [], [], []
    for t in templates:
        ids, i = prompt_with_subject(lm, t.format(req.prompt), req.subject)
        rows.append(ids + target[:-1])
        idx.append(i)
        starts.append(len(ids))
    return rows, idx, starts


def value_targets(
    lm: LM,
    layer: int,
    requests: Sequence[EditRequest],
    cfg: EditConfig,
    suit: bool = False,
    clamp: float | None = None,
) -> torch.Tensor:
    """Change ``[n, d]`` of the residual stream after ``layer`` at each subject's last token
    (main prompt) that makes the model say ``target_new``."""
    clamp = cfg.clamp if clamp is None else clamp
    flags = [(p, p.requires_grad) for p in lm.model.parameters()]
    for p, _ in flags:  # gradients only for the value vector, not the 135M weights
        p.requires_grad_(False)
    try:
        return _value_targets(lm, layer, requests, cfg, suit, clamp)
    finally:
        for p, flag in flags:
            p.requires_grad_(flag)


def _value_targets(
    lm: LM, layer: int, requests: Sequence[EditRequest], cfg: EditConfig, suit: bool, clamp: float
) -> torch.Tensor:
    gen = torch.Generator().manual_seed(cfg.seed)  # CPU on purpose: same draws on every device
    return torch.stack([_one_target(lm, layer, r, cfg, suit, clamp, gen) for r in requests])


def _one_target(
    lm: LM, layer: int, req: EditRequest, cfg: EditConfig, suit: bool, clamp: float,
    gen: torch.Generator,
) -> torch.Tensor:  # fmt: skip
    rows, idx, starts = _rows(lm, req, cfg.templates)
    kl_ids, kl_i = prompt_with_subject(lm, KL_PROMPT, req.subject)
    rows.append(kl_ids)
    idx.append(kl_i)
    target = list(lm.tokenizer(req.target_new, add_special_tokens=False).input_ids)
    batch = collate(rows, lm.tokenizer.pad_token_id, lm.device)
    pick = torch.arange(len(rows), device=lm.device)
    at = torch.as_tensor(idx, device=lm.device)
    with torch.no_grad():
        out0 = lm.model(input_ids=batch.input_ids, attention_mask=batch.attention_mask)
        kl_ref = torch.log_softmax(out0.logits[-1, len(kl_ids) - 1].float(), -1)
    d = lm.hidden_size
    if suit:
        w1 = (torch.randn(d, generator=gen) / d**0.5).to(lm.device).requires_grad_()
        w2 = (torch.randn(d, generator=gen) / d**0.5).to(lm.device).requires_grad_()
        params = [w1, w2]
    else:
        delta = torch.zeros(d, device=lm.device, requires_grad=True)
        params = [delta]
    opt = torch.optim.Adam(params, lr=cfg.lr)
    state: dict[str, torch.Tensor] = {}

    def fn(h: torch.Tensor) -> torch.Tensor:
        h0 = h[pick, at]
        add = _suit_delta(h0.float(), w1, w2) if suit else delta.expand_as(h0)
        limit = clamp * h0.detach().float().norm(dim=-1, keepdim=True)
        scale = torch.clamp(limit / add.norm(dim=-1, keepdim=True).clamp_min(1e-12), max=1.0)
        add = add * scale.detach()
        state["add"], state["h0"] = add, h0.detach()
        h = h.clone()
        h[pick, at] = h0 + add.to(h.dtype)
        return h

    for _ in range(cfg.steps + 1):
        with replace_residual(lm, layer, fn):
            logits = lm.model(input_ids=batch.input_ids, attention_mask=batch.attention_mask).logits
        logp = torch.log_softmax(logits.float(), -1)
        nll = []
        for r, s in enumerate(starts):
            pos = torch.arange(s - 1, s - 1 + len(target), device=lm.device)
            nll.append(-logp[r, pos, torch.as_tensor(target, device=lm.device)].mean())
        kl = torch.sum(kl_ref.exp() * (kl_ref - logp[-1, len(kl_ids) - 1]))
        add, h0 = state["add"][0], state["h0"][0]
        loss = torch.stack(nll).mean() + cfg.kl_factor * kl
        loss = loss + cfg.weight_decay * add.norm() ** 2 / h0.float().norm() ** 2
        if suit:
            cos = torch.dot(w1, w2) / (w1.norm() * w2.norm()).clamp_min(1e-12)
            loss = loss + cfg.lam * cos**2
        if _ == cfg.steps:
            break
        opt.zero_grad()
        loss.backward()
        opt.step()
    return state["add"][0].detach().float().cpu()  # CPU: see request_keys


@torch.no_grad()
def _residual_at_subject(lm: LM, layer: int, requests: Sequence[EditRequest]) -> torch.Tensor:
    rows, idx = zip(*(prompt_with_subject(lm, r.prompt, r.subject) for r in requests), strict=True)
    batch = collate(list(rows), lm.tokenizer.pad_token_id, lm.device)
    from llm_methods.lm import capture_residual

    with capture_residual(lm, [layer]) as store:
        lm.model(input_ids=batch.input_ids, attention_mask=batch.attention_mask)
    h = store[lm.layer_index(layer)]
    return h[torch.arange(len(rows)), torch.as_tensor(idx)].float().cpu()  # CPU: see request_keys


@dataclass
class Editor:
    """Sequential editor for one method on one model; holds everything that must be reset
    between independent runs (the cache of earlier edits' keys). ``stats`` maps each edit layer
    to its key second moment C of the *unedited* model; ``subject_basis`` to U_m (SUIT);
    ``projectors`` to AlphaEdit's null-space projector of C (computed when missing, so editors
    with the same ``stats`` and ``null_threshold`` may share one dict)."""

    lm: LM
    method: str
    cfg: EditConfig
    stats: dict[int, torch.Tensor]
    subject_basis: dict[int, torch.Tensor] = field(default_factory=dict)
    cache_c: dict[int, torch.Tensor] = field(default_factory=dict)
    projectors: dict[int, torch.Tensor] = field(default_factory=dict)
    n_edits: int = 0

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise LMError(f"unknown edit method {self.method!r}; known: {', '.join(METHODS)}")
        if self.layers[-1] == self.lm.n_layers - 1:
            raise LMError(
                f"edit layer {self.layers[-1]} is the last layer: a value set there cannot reach "
                "the answer positions; choose earlier layers"
            )
        for layer in self.layers:
            edit_weight(self.lm, layer)
            if layer not in self.stats:
                raise LMError(f"no key statistics for layer {layer}")
            if self.method == "suit" and layer not in self.subject_basis:
                raise LMError(f"SUIT needs a subject subspace for layer {layer}")
        if self.method in ("alphaedit", "suit"):
            for layer in self.layers:
                if layer not in self.projectors:  # a function of the fixed C: shareable
                    self.projectors[layer] = null_space_projector(
                        self.stats[layer], self.cfg.null_threshold
                    )
                self.cache_c[layer] = torch.zeros_like(self.stats[layer])

    @property
    def layers(self) -> tuple[int, ...]:
        if self.method == "rome":
            return (self.lm.layer_index(self.cfg.rome_layer),)
        return tuple(self.lm.layer_index(i) for i in self.cfg.layers)

    def _keys(self, layer: int, requests: Sequence[EditRequest]) -> torch.Tensor:
        k = request_keys(self.lm, [layer], [r.prompt for r in requests], [r.subject for r in requests],
                         self.cfg.templates)[layer]  # fmt: skip
        if self.method == "suit":
            u = self.subject_basis[layer].to(k)
            k = k - (k @ u) @ u.T
        return k

    def edit(self, requests: Sequence[EditRequest]) -> None:
        """Apply ``requests`` (one batch; ROME goes one request at a time)."""
        if self.method == "rome":
            for r in requests:
                self._rome(r)
        else:
            self._batch(list(requests))
        self.n_edits += len(requests)

    @torch.no_grad()
    def _apply(self, layer: int, delta_w: torch.Tensor) -> None:
        w = edit_weight(self.lm, layer).weight
        w += delta_w.to(device=w.device, dtype=w.dtype)

    def _rome(self, req: EditRequest) -> None:
        layer = self.layers[0]
        delta = value_targets(self.lm, layer, [req], self.cfg, clamp=self.cfg.rome_clamp)[0]
        k = request_keys(self.lm, [layer], [req.prompt], [req.subject], self.cfg.templates)[layer][
            0
        ]
        k = k.double()
        c = self.stats[layer].double()
        c_inv_k = torch.linalg.solve(c + 1e-6 * torch.eye(len(c), dtype=c.dtype), k)
        self._apply(layer, torch.outer(delta.double(), c_inv_k) / torch.dot(c_inv_k, k))

    def _batch(self, requests: list[EditRequest]) -> None:
        top = self.layers[-1]
        z = _residual_at_subject(self.lm, top, requests)
        z = z + value_targets(self.lm, top, requests, self.cfg, suit=self.method == "suit")
        for i, layer in enumerate(self.layers):
            k = self._keys(layer, requests).double()
            resid = (
                (z - _residual_at_subject(self.lm, top, requests)) / (len(self.layers) - i)
            ).double()
            eye = torch.eye(k.shape[1], dtype=k.dtype)
            if self.method == "memit":
                a = self.cfg.mom2_weight * self.stats[layer].double() + k.T @ k
                delta_w = resid.T @ torch.linalg.solve(a, k.T).T
            else:
                p = self.projectors[layer].double()
                a = p @ (k.T @ k + self.cache_c[layer].double()) + self.cfg.l2 * eye
                delta_w = torch.linalg.solve(a, p @ k.T @ resid).T
                if self.method == "suit":
                    u = self.subject_basis[layer].double()
                    delta_w = delta_w - (delta_w @ u) @ u.T
            self._apply(layer, delta_w)
        if self.method in ("alphaedit", "suit"):
            for layer in self.layers:
                k = self._keys(layer, requests)
                self.cache_c[layer] += k.T @ k


def fresh_copy(lm: LM) -> LM:
    """A deep copy of ``lm`` (its own weights) for one independent editing run."""
    from llm_methods.lm import wrap

    return wrap(lm.tokenizer, copy.deepcopy(lm.model), lm.name)
