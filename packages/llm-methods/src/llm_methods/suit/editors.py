"""ROME, MEMIT, AlphaEdit and SUIT on one key/value machinery (:mod:`llm_methods.suit.keys`).

Value targets (ROME §3.1 / MEMIT Eq. 16, the official ``compute_v`` / ``compute_z`` loop): a
vector added to the residual stream after layer ``L`` at the subject's last token is optimised so
that the prompt continues with ``target_new`` (−log p, plus KL(current ‖ unedited) of the
next-token distribution at the subject of ``"{subject} is a"`` and a weight decay ‖δ‖/‖h‖²),
projected onto the ball of radius ``clamp·‖h‖`` after each step, stopping once the loss is
below 5e-2; h is the unedited residual (MEMIT/AlphaEdit ``compute_z``) or, for ROME, the
unedited MLP output there (``compute_v`` adds δ to the MLP output). SUIT restricts it to δ' = (hᵀw₂ − hᵀw₁)w₁ + (hᵀw₁ − hᵀw₂)w₂ = −(hᵀ(w₁ − w₂))(w₁ − w₂),
a rank-one form along w₁ − w₂, with penalty λ(ŵ₁ᵀŵ₂)².

Weight updates of the FFN output projection ``W`` ``[d, d_ff]`` (keys ``K`` ``[n, d_ff]``,
residuals ``R`` ``[n, d]``, key second moment ``C``):

- ROME (rank one, one layer): ΔW = δ (C⁻¹k̄)ᵀ / (k*ᵀC⁻¹k̄), k̄ the key averaged over the
  context templates, k* the key of the bare prompt;
- MEMIT (spread over ``layers``): ΔW = Rᵀ K (λ_C C + KᵀK)⁻¹, R split as (z − z_cur)/(layers left);
- AlphaEdit: ΔW = [(P(KᵀK + K_pᵀK_p) + αI)⁻¹ P Kᵀ R]ᵀ with P the projector on the null space
  of C (eigenvalues below ``null_threshold``, absolute as the official code) and K_p the keys
  of earlier edits;
- SUIT: AlphaEdit with keys k' = (I − U_m U_mᵀ)k, and the update reads only k' (ΔW ← ΔW(I − UUᵀ)).

MEMIT / AlphaEdit / SUIT keys are averaged over the templates as the official ``compute_ks``
(the first template weighs 1/2, the others share 1/2).
``tests/test_reference_rome_memit_alphaedit.py`` checks ROME, MEMIT and AlphaEdit against the
official code; SUIT's own formulas are checked in ``tests/test_suit_formulas.py`` and its editor
wiring in ``tests/test_suit_editing.py``.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from llm_methods.lm import (
    LM,
    LMError,
    capture_sublayers,
    collate,
    replace_residual,
    reuse_prefix,
)
from llm_methods.lm.scoring import final_hidden, head_logits
from llm_methods.suit.data import EditRequest
from llm_methods.suit.keys import (
    CONTEXT_TEMPLATES,
    edit_weight,
    prompt_with_subject,
    request_keys,
)

__all__ = [
    "EARLY_STOP_LOSS",
    "METHODS",
    "EditConfig",
    "Editor",
    "fresh_copy",
    "kl_to_initial",
    "null_space_projector",
    "null_space_share",
    "project_out",
    "projected_update",
    "value_loss",
    "value_targets",
]

METHODS = ("rome", "memit", "alphaedit", "suit")
KL_PROMPT = "{} is a"
EARLY_STOP_LOSS = 5e-2  # official compute_v / compute_z: stop once the value loss is below
RIDGE = 1e-10  # ROME: C + RIDGE·mean eigenvalue·I, so that a singular C (few tokens) solves


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
    null_threshold: float = 2e-2  # AlphaEdit's absolute threshold on C's eigenvalues
    null_relative: bool = False  # True: threshold × the largest eigenvalue (before issue 27)
    tau: float = 0.4
    lam: float = 0.3
    seed: int = 0
    templates: tuple[str, ...] = CONTEXT_TEMPLATES


def null_space_projector(c: torch.Tensor, threshold: float, relative: bool = False) -> torch.Tensor:
    """AlphaEdit's P = Û Ûᵀ, Û the eigenvectors of C = E[kkᵀ] with eigenvalue < ``threshold``
    (the official ``get_project``: singular values of the count-normalised second moment below
    an absolute 2e-2), or < ``threshold`` × the largest eigenvalue when ``relative``."""
    evals, evecs = torch.linalg.eigh(c.double())
    limit = threshold * evals.max() if relative else threshold
    u = evecs[:, evals < limit]
    return (u @ u.T).float()


def null_space_share(keys: torch.Tensor, projector: torch.Tensor) -> float:
    """Mean over keys ``[n, d_ff]`` of ‖P k‖² / ‖k‖²: the share of their energy in C's null
    space. Near 1, AlphaEdit's projection leaves the keys unconstrained (C does not cover them)."""
    k = keys.double()
    p = projector.double().to(k.device)
    return float((((k @ p) * k).sum(1) / (k * k).sum(1).clamp_min(1e-30)).mean())


def project_out(k: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """SUIT's keys k' = (I − U Uᵀ) k for rows ``k`` ``[n, d_ff]`` and an orthonormal basis ``u``
    ``[d_ff, m]`` of the subject subspace (the component of k in span(U) removed)."""
    u = u.to(k)
    return k - (k @ u) @ u.T


def projected_update(
    k: torch.Tensor,
    resid: torch.Tensor,
    projector: torch.Tensor,
    cache: torch.Tensor,
    l2: float,
    u: torch.Tensor | None = None,
) -> torch.Tensor:
    """AlphaEdit's ΔW ``[d, d_ff]`` = [(P(KᵀK + K_pᵀK_p) + αI)⁻¹ P Kᵀ R]ᵀ (AlphaEdit Eq. 14,
    the official ``upd_matrix``) for keys ``k`` ``[n, d_ff]`` (SUIT: already
    :func:`project_out`), residuals ``resid`` ``[n, d]``, null-space projector P, the earlier
    edits' ``cache`` = K_pᵀK_p and α = ``l2``. SUIT (``u`` given): the update reads only the
    keys' component outside span(U), ΔW ← ΔW (I − U Uᵀ), so ΔW U = 0. In float64."""
    k, resid = k.double(), resid.double()
    p = projector.double().to(k.device)
    eye = torch.eye(k.shape[1], dtype=k.dtype, device=k.device)
    a = p @ (k.T @ k + cache.double().to(k.device)) + l2 * eye
    delta_w = torch.linalg.solve(a, p @ k.T @ resid).T
    if u is not None:
        u = u.double().to(k.device)
        delta_w = delta_w - (delta_w @ u) @ u.T
    return delta_w


def _suit_delta(h: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor) -> torch.Tensor:
    """δ' = (hᵀw₂ − hᵀw₁)w₁ + (hᵀw₁ − hᵀw₂)w₂ for h ``[n, d]`` and w₁, w₂ ``[d]`` (one pair
    for every row) or ``[n, d]`` (a pair per row)."""
    a = ((h * w2).sum(-1) - (h * w1).sum(-1))[:, None]
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
    reference: str = "residual",
) -> torch.Tensor:
    """Change ``[n, d]`` of the residual stream after ``layer`` at each subject's last token
    (main prompt) that makes the model say ``target_new``.

    ``reference`` names the vector whose norm scales the weight decay and the clamp:
    ``"residual"`` (MEMIT / AlphaEdit ``compute_z``: the layer's output) or ``"ffn"`` (ROME
    ``compute_v``, which adds δ to the MLP output: that output's norm)."""
    if reference not in ("residual", "ffn"):
        raise ValueError(f"reference must be 'residual' or 'ffn', got {reference!r}")
    clamp = cfg.clamp if clamp is None else clamp
    flags = [(p, p.requires_grad) for p in lm.model.parameters()]
    for p, _ in flags:  # gradients only for the value vector, not the 135M weights
        p.requires_grad_(False)
    try:
        return _value_targets(lm, layer, requests, cfg, suit, clamp, reference)
    finally:
        for p, flag in flags:
            p.requires_grad_(flag)


def _value_targets(
    lm: LM,
    layer: int,
    requests: Sequence[EditRequest],
    cfg: EditConfig,
    suit: bool,
    clamp: float,
    reference: str,
) -> torch.Tensor:
    gen = torch.Generator().manual_seed(cfg.seed)  # CPU on purpose: same draws on every device
    return _batch_targets(lm, layer, list(requests), cfg, suit, clamp, gen, reference)


def kl_to_initial(current: torch.Tensor, initial: torch.Tensor) -> torch.Tensor:
    """KL(current ‖ initial) of next-token log-prob rows ``[n, V]`` averaged over rows: the
    official ``kl_div(initial, current, log_target=True, reduction="batchmean")`` of ROME's
    ``compute_v`` / MEMIT's and AlphaEdit's ``compute_z``."""
    return torch.sum(current.exp() * (current - initial)) / current.shape[0]


def value_loss(
    nll: torch.Tensor, kl: torch.Tensor, add: torch.Tensor, h0: torch.Tensor, cfg: EditConfig
) -> torch.Tensor:
    """ROME / MEMIT / AlphaEdit value objective: NLL + kl_factor·KL + weight_decay·‖δ‖/‖h‖²
    (``‖δ‖``, not squared, over the squared norm of the unedited vector, as the official
    ``compute_v`` / ``compute_z``)."""
    decay = cfg.weight_decay * add.norm() / h0.float().norm() ** 2
    return nll + cfg.kl_factor * kl + decay


def _batch_targets(
    lm: LM,
    layer: int,
    reqs: list[EditRequest],
    cfg: EditConfig,
    suit: bool,
    clamp: float,
    gen: torch.Generator,
    reference: str = "residual",
) -> torch.Tensor:
    """The official value loop (ROME ``compute_v``, AlphaEdit ``compute_z``) of each request,
    ``[n, d]``: Adam on its δ for at most ``cfg.steps`` forwards (``steps − 1`` updates),
    stopping once its loss is below :data:`EARLY_STOP_LOSS`, after each update δ projected onto
    the ball of radius ``clamp·‖h‖`` (h: the unedited vector of the main prompt, or the
    unedited MLP output there for ``reference="ffn"``, ROME). KL is taken at the subject's last
    token of ``"{subject} is a"``, the position δ is added at. SUIT optimises (w₁, w₂) of
    δ' = (hᵀw₂ − hᵀw₁)(w₁ − w₂) (rank one, along w₁ − w₂) and projects by scaling both.

    The requests' loops run side by side in one batch of rows (issue 40: one forward per step
    for the batch instead of one per request). They stay independent: a request's rows see
    only its own δ, the summed loss gives each δ its own gradient, Adam is elementwise, and a
    request that stopped keeps the δ it stopped with (its rows are restored after each later
    step); so each δ is what its own loop gives, up to the float rounding of a larger batch."""
    rows: list[list[int]] = []
    idx: list[int] = []
    owner: list[int] = []  # the request of each row
    main: list[int] = []  # each request's first template row (its δ, h and clamp)
    at_rows: list[int] = []  # the (row, position) pairs whose next token the loss reads
    at_pos: list[int] = []
    spans: list[list[int]] = []  # per request and template: first index into at_rows
    kl_at: list[int] = []  # per request: index into at_rows of its KL position
    targets: list[torch.Tensor] = []
    for q, req in enumerate(reqs):
        t_rows, t_idx, starts = _rows(lm, req, cfg.templates)
        kl_ids, kl_i = prompt_with_subject(lm, KL_PROMPT, req.subject)
        target = list(lm.tokenizer(req.target_new, add_special_tokens=False).input_ids)
        base = len(rows)
        main.append(base)
        spans.append([])
        for r, start in enumerate(starts):
            spans[-1].append(len(at_rows))
            at_rows += [base + r] * len(target)
            at_pos += [start - 1 + j for j in range(len(target))]
        kl_at.append(len(at_rows))
        at_rows.append(base + len(t_rows))
        at_pos.append(kl_i)
        rows += [*t_rows, kl_ids]
        idx += [*t_idx, kl_i]
        owner += [q] * (len(t_rows) + 1)
        targets.append(torch.as_tensor(target, device=lm.device)[:, None])
    batch = collate(rows, lm.tokenizer.pad_token_id, lm.device)
    pick = torch.arange(len(rows), device=lm.device)
    at = torch.as_tensor(idx, device=lm.device)
    own = torch.as_tensor(owner, device=lm.device)
    read = (torch.as_tensor(at_rows, device=lm.device), torch.as_tensor(at_pos, device=lm.device))
    n, d = len(reqs), lm.hidden_size
    if suit:  # each request draws its w₁ then its w₂, in request order
        draws = [torch.randn(d, generator=gen) / d**0.5 for _ in range(2 * n)]
        w1 = torch.stack(draws[0::2]).to(lm.device).requires_grad_()
        w2 = torch.stack(draws[1::2]).to(lm.device).requires_grad_()
        params = [w1, w2]
    else:
        delta = torch.zeros(n, d, device=lm.device, requires_grad=True)
        params = [delta]
    opt = torch.optim.Adam(params, lr=cfg.lr)
    state: dict[str, torch.Tensor] = {}

    def fn(h: torch.Tensor) -> torch.Tensor:
        h0 = h[pick, at]
        add = _suit_delta(h0.float(), w1[own], w2[own]) if suit else delta[own]
        state["add"], state["h0"] = add, h0.detach()
        h = h.clone()
        h[pick, at] = h0 + add.to(h.dtype)
        return h

    kl_init: torch.Tensor | None = None
    refs: list[torch.Tensor] = []  # ROME: the unedited MLP output (δ does not change it)
    result: list[torch.Tensor | None] = [None] * n
    stopped: list[int] = []
    # layers 0..layer run once: the residual they give is the same at every step (δ is added
    # after them and no gradient reaches them), so later steps run only the layers after
    with reuse_prefix(lm, layer):
        for it in range(max(cfg.steps, 1)):
            with replace_residual(lm, layer, fn), capture_sublayers(lm, [layer], "ffn") as ffn:
                hidden = final_hidden(lm, batch)
            if not refs:
                out = ffn[lm.layer_index(layer)]
                refs = [out[m, idx[m]] if reference == "ffn" else state["h0"][m] for m in main]
            logp = torch.log_softmax(head_logits(lm, hidden[read]).float(), -1)
            kl_logp = logp[kl_at]
            if kl_init is None:
                kl_init = kl_logp.detach().clone()
            losses = {}
            for q in range(n):
                if q in stopped:
                    continue
                k = len(targets[q])
                nll = torch.stack(
                    [-logp[s : s + k].gather(1, targets[q]).mean() for s in spans[q]]
                ).mean()
                kl = kl_to_initial(kl_logp[q : q + 1], kl_init[q : q + 1])
                loss = value_loss(nll, kl, state["add"][main[q]], refs[q], cfg)
                if suit:
                    cos = torch.dot(w1[q], w2[q]) / (w1[q].norm() * w2[q].norm()).clamp_min(1e-12)
                    loss = loss + cfg.lam * cos**2
                result[q] = state["add"][main[q]].detach().float().cpu()  # CPU: see request_keys
                if float(loss.detach()) < EARLY_STOP_LOSS or it == cfg.steps - 1:
                    stopped.append(q)
                else:
                    losses[q] = loss
            if not losses:
                break
            kept = [p.detach().clone() for p in params]
            opt.zero_grad()
            torch.stack(list(losses.values())).sum().backward()
            opt.step()
            with torch.no_grad():
                for q in losses:  # project within the L2 ball of radius clamp·‖h‖
                    limit = clamp * refs[q].float().norm()
                    if suit:
                        h0 = state["h0"][main[q]].float()[None]
                        norm = _suit_delta(h0, w1[q], w2[q]).norm()
                        if norm > limit:  # δ' is quadratic in (w₁, w₂)
                            factor = (limit / norm).sqrt()
                            w1[q].mul_(factor)
                            w2[q].mul_(factor)
                    elif delta[q].norm() > limit:
                        delta[q].mul_(limit / delta[q].norm())
                if stopped:  # a stopped request keeps its δ
                    gone = torch.as_tensor(stopped, device=lm.device)
                    for p, old in zip(params, kept, strict=True):
                        p[gone] = old[gone]
    done = [r for r in result if r is not None]  # every request has run at least one forward
    assert len(done) == n
    return torch.stack(done)


@torch.no_grad()
def _residual_at_subject(lm: LM, layer: int, requests: Sequence[EditRequest]) -> torch.Tensor:
    rows, idx = zip(*(prompt_with_subject(lm, r.prompt, r.subject) for r in requests), strict=True)
    batch = collate(list(rows), lm.tokenizer.pad_token_id, lm.device)
    from llm_methods.lm import forward_residual

    # the forward stops after ``layer`` (the layers after it, the final norm and the logits
    # cannot change the residual read here)
    h = forward_residual(lm, [layer], batch.input_ids, batch.attention_mask)[lm.layer_index(layer)]
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
                        self.stats[layer], self.cfg.null_threshold, self.cfg.null_relative
                    )
                self.cache_c[layer] = torch.zeros_like(self.stats[layer])

    @property
    def layers(self) -> tuple[int, ...]:
        if self.method == "rome":
            return (self.lm.layer_index(self.cfg.rome_layer),)
        return tuple(self.lm.layer_index(i) for i in self.cfg.layers)

    def _keys(self, layer: int, requests: Sequence[EditRequest]) -> torch.Tensor:
        k = request_keys(
            self.lm,
            [layer],
            [r.prompt for r in requests],
            [r.subject for r in requests],
            self.cfg.templates,
            grouped=True,
        )[layer]
        if self.method == "suit":
            k = project_out(k, self.subject_basis[layer])
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
        """ROME's rank-one update (``execute_rome``): u = C⁻¹k̄ (k̄ the key averaged over the
        context templates, ``compute_u``), ΔW = δ uᵀ / (k*ᵀu) with k* the key of the bare
        prompt (``compute_v``), so ΔW k* = δ."""
        layer = self.layers[0]
        delta = value_targets(
            self.lm, layer, [req], self.cfg, clamp=self.cfg.rome_clamp, reference="ffn"
        )[0]
        k_mean = request_keys(self.lm, [layer], [req.prompt], [req.subject], self.cfg.templates)
        k_star = request_keys(self.lm, [layer], [req.prompt], [req.subject], ("{}",))
        k, k_star = k_mean[layer][0].double(), k_star[layer][0].double()
        c = self.stats[layer].double()
        ridge = RIDGE * torch.trace(c) / len(c)  # official: C⁻¹; only a singular C needs it
        c_inv_k = torch.linalg.solve(c + ridge * torch.eye(len(c), dtype=c.dtype), k)
        self._apply(layer, torch.outer(delta.double(), c_inv_k) / torch.dot(c_inv_k, k_star))

    def _batch(self, requests: list[EditRequest]) -> None:
        top = self.layers[-1]
        z = _residual_at_subject(self.lm, top, requests)
        z = z + value_targets(self.lm, top, requests, self.cfg, suit=self.method == "suit")
        for i, layer in enumerate(self.layers):
            k = self._keys(layer, requests).double()
            resid = (
                (z - _residual_at_subject(self.lm, top, requests)) / (len(self.layers) - i)
            ).double()
            if self.method == "memit":
                a = self.cfg.mom2_weight * self.stats[layer].double() + k.T @ k
                delta_w = resid.T @ torch.linalg.solve(a, k.T).T
            else:
                u = self.subject_basis[layer] if self.method == "suit" else None
                delta_w = projected_update(
                    k, resid, self.projectors[layer], self.cache_c[layer], self.cfg.l2, u
                )
            self._apply(layer, delta_w)
        if self.method in ("alphaedit", "suit"):
            for layer in self.layers:
                k = self._keys(layer, requests)
                self.cache_c[layer] += k.T @ k


def fresh_copy(lm: LM) -> LM:
    """A deep copy of ``lm`` (its own weights) for one independent editing run."""
    from llm_methods.lm import wrap

    return wrap(lm.tokenizer, copy.deepcopy(lm.model), lm.name)
