"""Layer selection, compression of a model's linear layers, distillation finetuning, evaluation,
and save/load of compressed layers (safetensors).

Distillation loss (MBOK, as the issue states it): L = KL(p_teacher^τ ‖ p_student^τ) (τ = 1,
token mean) + 10 · MSE(h_student, h_teacher) averaged over the decoder hidden states from the
first compressed block on (HF ``hidden_states``; earlier ones are identical by construction).
Only the compressed layers' trainable tensors are trained: for MBOK every Boolean kernel
(Boolean optimiser, η in units of the mean variation, see :mod:`~llm_methods.mbok.optim`) and
all scales (AdamW, ``scale_lr``); for OneBit-STE the latent weights (AdamW, ``latent_lr``) and
the two vectors (AdamW, the same ``scale_lr`` as MBOK's scales).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from llm_methods.lm.errors import LMError
from llm_methods.mbok.model import BooleanLinear
from llm_methods.mbok.optim import BooleanOptimizer
from llm_methods.mbok.quant import MBOKTrainLinear, OneBitLinear, RTNLinear

__all__ = [
    "COMPRESSORS",
    "BatchInput",
    "DistillConfig",
    "PrefixCache",
    "Teacher",
    "as_batch",
    "compress_model",
    "distill_loss",
    "finetune",
    "finetune_state_bytes",
    "load_compressed",
    "make_optimizers",
    "nll_and_perplexity",
    "perplexity_of",
    "save_compressed",
    "select_linears",
    "teacher_outputs",
    "weight_state_bytes",
]

COMPRESSORS = ("mbok", "onebit", "rtn")
KL_WEIGHT, MSE_WEIGHT, TAU = 1.0, 10.0, 1.0
#: a model batch ``{"input_ids", "attention_mask"}`` ``[B, T]``, or a tensor of input ids
BatchInput = dict[str, torch.Tensor] | torch.Tensor


def as_batch(
    batch: BatchInput, device: torch.device | str | None = None
) -> dict[str, torch.Tensor]:
    """The model batch ``{"input_ids", "attention_mask"}`` (``[B, T]`` each) of ``batch``.

    ``batch`` is such a dict (what :func:`~llm_methods.mbok.data.batches_of` gives; returned as
    it is, with an all-ones ``attention_mask`` added when it has none) or a tensor of input ids
    ``[B, T]`` (``[T]``: one row), whose every position is a real token (mask of ones), placed
    on ``device``. Anything else raises :class:`LMError` naming what was given."""
    if isinstance(batch, torch.Tensor):
        if batch.dim() not in (1, 2) or batch.is_floating_point() or batch.numel() == 0:
            raise LMError(
                "a batch tensor must hold input ids, [B, T] or [T] integers, got "
                f"{batch.dtype} of shape {tuple(batch.shape)}"
            )
        ids = (batch if batch.dim() == 2 else batch[None]).to(device)
        return {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
    if isinstance(batch, dict) and isinstance(batch.get("input_ids"), torch.Tensor):
        if "attention_mask" in batch:
            return batch
        return {**batch, "attention_mask": torch.ones_like(batch["input_ids"])}
    raise LMError(
        "a batch must be a dict with an 'input_ids' tensor (and 'attention_mask') or a [B, T] "
        f"tensor of input ids, got {type(batch).__name__}"
        + (f" with keys {sorted(batch)}" if isinstance(batch, dict) else "")
    )


def _blocks(model: nn.Module) -> tuple[str, nn.ModuleList]:
    from llm_methods.lm.loading import find_modules

    parts = find_modules(model)
    name = next(n for n, m in model.named_modules() if m is parts.layers)
    return name, parts.layers


def _parse_blocks(spec: str | None, n: int) -> list[int]:
    if spec in (None, "", "all"):
        return list(range(n))
    out: list[int] = []
    for part in str(spec).split(","):
        m = re.fullmatch(r"\s*(-?\d+)\s*(?:-\s*(-?\d+)\s*)?", part)
        if not m:
            raise LMError(f"bad --blocks entry {part!r}: expected 'all', 'I' or 'I-J'")
        lo = int(m.group(1))
        hi = int(m.group(2)) if m.group(2) is not None else lo
        for i in range(lo, hi + 1):
            if not -n <= i < n:
                raise LMError(f"block {i} out of range: the model has {n} decoder blocks")
            out.append(i % n)
    return sorted(set(out))


def select_linears(
    model: nn.Module, layers: Sequence[str] = ("all",), blocks: str | None = "all"
) -> list[str]:
    """Full module names of the ``nn.Linear`` layers in the chosen decoder blocks whose in-block
    name is one of ``layers`` (``q_proj``, ``mlp.down_proj``, ..., ``all``); raises
    :class:`LMError` naming an unknown layer and listing the available ones."""
    prefix, blocks_list = _blocks(model)
    chosen = _parse_blocks(blocks, len(blocks_list))
    available = sorted({n for n, m in blocks_list[0].named_modules() if isinstance(m, nn.Linear)})
    if not layers:
        raise LMError("no layer names given (use 'all' or e.g. q_proj mlp.down_proj)")
    for name in layers:
        if name != "all" and not any(a == name or a.endswith("." + name) for a in available):
            raise LMError(
                f"unknown layer name {name!r}; a decoder block has: {', '.join(available)}"
            )
    out = []
    for i in chosen:
        for sub, module in blocks_list[i].named_modules():
            if isinstance(module, nn.Linear) and any(
                n == "all" or sub == n or sub.endswith("." + n) for n in layers
            ):
                out.append(f"{prefix}.{i}.{sub}")
    return out


def _set(model: nn.Module, name: str, module: nn.Module) -> None:
    parent, _, child = name.rpartition(".")
    setattr(model.get_submodule(parent), child, module)


def compress_model(
    model: nn.Module,
    names: Sequence[str],
    method: str,
    k: int = 2,
    bits: int = 2,
    progress_as: str | None = None,
) -> dict[str, nn.Module]:
    """Replace each named ``nn.Linear`` in place: ``mbok`` -> :class:`MBOKTrainLinear` (K
    kernels), ``onebit`` -> :class:`OneBitLinear`, ``rtn`` -> :class:`RTNLinear` (``bits``).
    ``progress_as``: progress over the layers under that name
    (:func:`iclr26_common.progress.progress`; ``None``: silent)."""
    from iclr26_common.progress import progress

    if method not in COMPRESSORS:
        raise LMError(f"unknown method {method!r}; choose one of {', '.join(COMPRESSORS)}")
    if method == "mbok" and (not isinstance(k, int) or k < 1):
        raise LMError(f"number of Boolean kernels K must be >= 1, got {k}")
    if not names:
        raise LMError("no linear layers selected")
    new: dict[str, nn.Module] = {}
    for name in progress(names, description=progress_as or "", quiet=progress_as is None):
        linear = model.get_submodule(name)
        if not isinstance(linear, nn.Linear):
            raise LMError(f"{name} is not an nn.Linear (got {type(linear).__name__})")
        if method == "mbok":
            new[name] = MBOKTrainLinear.from_linear(linear, k)
        elif method == "onebit":
            new[name] = OneBitLinear(linear)
        else:
            new[name] = RTNLinear.from_linear(linear, bits)
        _set(model, name, new[name].to(linear.weight.device))
    return new


@torch.no_grad()
def billm_model(
    model: nn.Module, names: Sequence[str], batches: Sequence[dict[str, torch.Tensor]]
) -> dict[str, float]:
    """BiLLM-style PTQ of the named linears in place (fake-quantised dense weights): H = Σ XᵀX
    of each layer's inputs on ``batches``, then :func:`billm_binarize` per layer. Returns the
    mean bits per weight under our accounting and the mean salient-column fraction."""
    from llm_methods.mbok.quant import billm_binarize

    linears = {n: model.get_submodule(n) for n in names}
    hess = {
        n: torch.zeros(m.in_features, m.in_features, device=m.weight.device)
        for n, m in linears.items()
    }
    hooks = []
    for n, m in linears.items():

        def pre(_module, args, n=n):  # type: ignore[no-untyped-def]
            x = args[0].detach().float().reshape(-1, args[0].shape[-1])
            hess[n] += x.T @ x

        hooks.append(m.register_forward_pre_hook(pre))
    try:
        for batch in batches:
            model(**batch)
    finally:
        for hook in hooks:
            hook.remove()
    bits = weights = salient = 0.0
    for n, m in linears.items():
        approx, info = billm_binarize(m.weight, hess[n])
        m.weight.copy_(approx.to(m.weight.dtype))
        bits += info["bits_per_weight"] * m.weight.numel()
        weights += m.weight.numel()
        salient += info["salient_columns"] / m.in_features
    return {"bits_per_weight": bits / weights, "salient_fraction": salient / len(linears)}


def stored_summary(layers: dict[str, nn.Module]) -> dict[str, float]:
    """Real stored bytes of the compressed layers (scales counted; biases excluded from the
    bits/weight ratio) and their weight count."""
    total = weights = bias = 0
    for module in layers.values():
        total += module.stored_bytes()  # type: ignore[operator]
        weights += module.in_features * _out(module)
        if getattr(module, "bias", None) is not None:
            bias += module.bias.numel() * module.bias.element_size()
    return {
        "bytes": float(total),
        "weights": float(weights),
        "bits_per_weight": 8 * (total - bias) / max(weights, 1),
    }


def _out(module: nn.Module) -> int:
    for attr in ("out_features",):
        if hasattr(module, attr):
            return int(getattr(module, attr))
    buf = module.packed if hasattr(module, "packed") else module.planes
    return int(buf.shape[1])


# --- distillation -----------------------------------------------------------------------------


@dataclass
class DistillConfig:
    steps: int = 20
    bool_lr: float = 0.01  # η of the Boolean optimiser, in units of the mean |Q| (optim.py)
    scale_lr: float = 2e-5  # AdamW on MBOK's scales and OneBit's (g, h) alike
    latent_lr: float = 4e-4  # OneBit-STE: AdamW on the latent weights (our choice)
    # MBOK: False freezes the Boolean kernels (no flips; only the scales train): the control
    # that separates what the flips do from what AdamW on the scales does (issue 27 review #4)
    train_boolean: bool = True
    kl_weight: float = KL_WEIGHT
    mse_weight: float = MSE_WEIGHT
    tau: float = TAU


@dataclass
class Teacher:
    """Teacher outputs of one batch: log-probs (bf16 to save memory) and hidden states."""

    logprobs: torch.Tensor
    hidden: list[torch.Tensor]
    mask: torch.Tensor


def first_block(names: Sequence[str]) -> int:
    idx = [int(m.group(1)) for n in names if (m := re.search(r"\.(\d+)\.", n))]
    return min(idx) if idx else 0


@torch.no_grad()
def teacher_outputs(
    model: nn.Module, batch: BatchInput, from_block: int, tau: float = TAU
) -> Teacher:
    """The teacher's side of the distillation loss (module docstring, :func:`distill_loss`) for
    one batch: log p_teacher^τ = log_softmax(logits / τ) ``[B, T, V]`` (bf16), the hidden states
    from decoder block ``from_block`` on (HF ``hidden_states[from_block + 1:]``, ``[B, T, d]``
    each) and the token mask ``[B, T]``. ``batch``: a dict ``{"input_ids", "attention_mask"}``
    or a ``[B, T]`` tensor of input ids (every position a real token; :func:`as_batch`)."""
    batch = as_batch(batch, next(model.parameters()).device)
    out = model(**batch, output_hidden_states=True)
    lp = torch.log_softmax(out.logits.float() / tau, -1).to(torch.bfloat16)
    return Teacher(
        lp,
        [h.detach() for h in out.hidden_states[from_block + 1 :]],
        batch["attention_mask"].bool(),
    )


def distill_loss(
    model: nn.Module,
    batch: BatchInput,
    teacher: Teacher,
    from_block: int,
    cfg: DistillConfig,
) -> tuple[torch.Tensor, dict[str, float]]:
    """KL(teacher ‖ student) at temperature τ (×τ²) + w·MSE of hidden states, masked tokens
    (``batch`` as for :func:`teacher_outputs`)."""
    batch = as_batch(batch, next(model.parameters()).device)
    out = model(**batch, output_hidden_states=True)
    mask = teacher.mask
    s_lp = torch.log_softmax(out.logits.float() / cfg.tau, -1)
    t_lp = teacher.logprobs.float()
    kl = (t_lp.exp() * (t_lp - s_lp)).sum(-1)[mask].mean() * cfg.tau**2
    hs = out.hidden_states[from_block + 1 :]
    mse = torch.stack(
        [((a - b) ** 2).mean(-1)[mask].mean() for a, b in zip(hs, teacher.hidden, strict=True)]
    ).mean()
    loss = cfg.kl_weight * kl + cfg.mse_weight * mse
    return loss, {
        "kl": float(kl.detach()),
        "mse": float(mse.detach()),
        "loss": float(loss.detach()),
    }


def make_optimizers(layers: dict[str, nn.Module], cfg: DistillConfig) -> list[Any]:
    """MBOK: [BooleanOptimizer(every kernel, each its own tensor), AdamW(scales, scale_lr)]
    (``cfg.train_boolean=False``: the AdamW alone); OneBit: [AdamW(latent at latent_lr, (g, h)
    at scale_lr)]."""
    mbok = [m for m in layers.values() if isinstance(m, MBOKTrainLinear)]
    onebit = [m for m in layers.values() if isinstance(m, OneBitLinear)]
    if mbok and not onebit:
        scales = [p for m in mbok for p in (m.s_out, m.s_in)]
        adam = torch.optim.AdamW(scales, lr=cfg.scale_lr, weight_decay=0.0)
        if not cfg.train_boolean:
            return [adam]
        # per_slice: kernel k of a layer is its own Boolean tensor (own mean|Q| and β)
        return [BooleanOptimizer([m.kernels for m in mbok], lr=cfg.bool_lr, per_slice=True), adam]
    if onebit and not mbok:
        groups = [
            {"params": [m.latent for m in onebit], "lr": cfg.latent_lr},
            {"params": [p for m in onebit for p in (m.g, m.h)], "lr": cfg.scale_lr},
        ]
        return [torch.optim.AdamW(groups, weight_decay=0.0)]
    raise LMError("finetuning needs MBOK or OneBit layers (RTN is post-training only)")


def optimizer_state_bytes(optimizers: Sequence[Any]) -> int:
    """Bytes of optimiser state tensors (Boolean accumulators, Adam moments), not the weights."""
    total = 0
    for opt in optimizers:
        if isinstance(opt, BooleanOptimizer):
            total += opt.state_bytes()
        else:
            for state in opt.state.values():
                total += sum(
                    v.numel() * v.element_size()
                    for v in state.values()
                    if torch.is_tensor(v) and v.dim() > 0
                )
    return total


def weight_state_bytes(layers: dict[str, nn.Module]) -> dict[str, int]:
    """Bytes of the weights a finetune holds besides its optimiser state, each at the size the
    method needs (issue 41): ``latent_bytes``, OneBit's fp32 latent weights (4 B per weight);
    ``kernel_bytes``, MBOK's K Boolean kernels at 1 bit per weight each (their packed size,
    8 weights per byte per row; our training holds them as fp32 ±1 tensors for autograd, which
    is this implementation's cost, not the method's: README Deviations); ``scale_bytes``, the
    trained FP vectors of both (MBOK's K (s_out, s_in), OneBit's (g, h)) at their stored size.
    With :func:`optimizer_state_bytes`, the whole finetuning state (:func:`finetune_state_bytes`)."""
    latent = kernel = scale = 0
    for m in layers.values():
        if isinstance(m, OneBitLinear):
            latent += m.latent.numel() * m.latent.element_size()
            scale += sum(v.numel() * v.element_size() for v in (m.g, m.h))
        elif isinstance(m, MBOKTrainLinear):
            kernel += m.k * m.out_features * ((m.in_features + 7) // 8)
            scale += sum(v.numel() * v.element_size() for v in (m.s_out, m.s_in))
    return {"latent_bytes": latent, "kernel_bytes": kernel, "scale_bytes": scale}


def finetune_state_bytes(log: dict[str, Any]) -> int:
    """The whole finetuning state of a :func:`finetune` log: optimiser state + latent weights +
    Boolean kernels (1 bit per weight each) + trained scales, in bytes."""
    return int(log["state_bytes"] + log["latent_bytes"] + log["kernel_bytes"] + log["scale_bytes"])


def finetune(
    model: nn.Module,
    layers: dict[str, nn.Module],
    batches: Sequence[BatchInput],
    teachers: Sequence[Teacher],
    cfg: DistillConfig,
) -> dict[str, Any]:
    """``cfg.steps`` distillation steps cycling over ``batches`` (with their cached teacher
    outputs); returns the loss curve, the Boolean flips per step (and in total), the optimiser
    state bytes and the bytes of the trained weights (:func:`weight_state_bytes`: OneBit's FP
    latent weights, MBOK's Boolean kernels at 1 bit each, the scales of both)."""
    for p in model.parameters():
        p.requires_grad_(False)
    for module in layers.values():
        for p in module.parameters():
            p.requires_grad_(True)
        if isinstance(module, MBOKTrainLinear) and not cfg.train_boolean:
            module.kernels.requires_grad_(False)  # the scales-only control
    optimizers = make_optimizers(layers, cfg)
    from_block = first_block(list(layers))
    log: dict[str, Any] = {"loss": [], "kl": [], "mse": [], "flips": 0, "flips_per_step": []}
    model.train()
    for step in range(cfg.steps):
        j = step % len(batches)
        loss, parts = distill_loss(model, batches[j], teachers[j], from_block, cfg)
        for opt in optimizers:
            opt.zero_grad()
        loss.backward()
        for opt in optimizers:
            flipped = opt.step()
            if isinstance(opt, BooleanOptimizer):
                log["flips"] += int(flipped)
                log["flips_per_step"].append(int(flipped))
        for key in ("loss", "kl", "mse"):
            log[key].append(parts[key])
    model.eval()
    log["state_bytes"] = optimizer_state_bytes(optimizers)
    log.update(weight_state_bytes(layers))
    boolean = [o for o in optimizers if isinstance(o, BooleanOptimizer)]
    log["boolean_weights"] = sum(o.total for o in boolean)
    log["flip_fraction"] = log["flips"] / max(log["boolean_weights"], 1)
    return log


class PrefixCache:
    """Replays the frozen decoder blocks before ``from_block`` (pure speed-up, same numbers).

    Compression and distillation change only blocks ``from_block`` on (:func:`first_block` of
    the compressed names), so the output of block ``from_block - 1`` on a given batch is the
    same for the teacher and every student. Inside :meth:`active`, the first forward of a batch
    (keyed by its ``input_ids`` / ``attention_mask`` tensors, contents checked) runs every block
    and stores that output; later forwards of the same batch (any model of the same teacher)
    skip blocks ``0 .. from_block - 1`` and hand block ``from_block`` the stored tensor, so its
    input and everything after it are bitwise what the full forward computes. Inside, the
    skipped blocks' entries of ``hidden_states`` (``1 .. from_block - 1``) and of the returned
    KV cache are not computed: callers read ``hidden_states[from_block + 1:]`` and logits only.
    A forward by ``inputs_embeds`` or with position ids or a KV cache runs in full, unstored."""

    def __init__(self, from_block: int) -> None:
        self.from_block = from_block
        self._store: dict[tuple[Any, ...], tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = {}

    def _lookup(self, ids: torch.Tensor, mask: torch.Tensor | None) -> tuple[Any, Any]:
        mask = torch.ones_like(ids) if mask is None else mask
        key = (ids.data_ptr(), mask.data_ptr(), tuple(ids.shape), str(ids.device))
        hit = self._store.get(key)
        if hit is not None and torch.equal(hit[0], ids) and torch.equal(hit[1], mask):
            return key, hit[2]
        return key, None

    @contextmanager
    def active(self, model: nn.Module) -> Iterator[None]:
        """Replay the stored prefixes in ``model``'s forwards within the block."""
        if self.from_block <= 0:
            yield
            return
        _, blocks = _blocks(model)
        state: dict[str, Any] = {}

        def pre(_module, args, kwargs):  # type: ignore[no-untyped-def]
            ids, mask = kwargs.get("input_ids"), kwargs.get("attention_mask")
            if ids is None and args:
                ids = args[0]
            plain = (
                not args[1:]
                and all(kwargs.get(k) is None for k in ("inputs_embeds", "position_ids", "cache"))
                and kwargs.get("past_key_values") is None
            )
            state.clear()
            if isinstance(ids, torch.Tensor) and plain:
                state["key"], state["hidden"] = self._lookup(ids, mask)
                state["ids"], state["mask"] = ids, mask

        def replayed(i: int, layer: nn.Module) -> Any:
            last = i == self.from_block - 1

            def forward(hidden_states, *args, **kwargs):  # type: ignore[no-untyped-def]
                if state.get("hidden") is not None:
                    return state["hidden"] if last else hidden_states
                out = type(layer).forward(layer, hidden_states, *args, **kwargs)
                if last and "key" in state:
                    ids, mask = state["ids"], state["mask"]
                    mask = torch.ones_like(ids) if mask is None else mask
                    self._store[state["key"]] = (ids.clone(), mask.clone(), out.detach())
                return out

            return forward

        handle = model.register_forward_pre_hook(pre, with_kwargs=True)
        patched = list(blocks)[: self.from_block]
        for i, layer in enumerate(patched):
            layer.forward = replayed(i, layer)  # type: ignore[method-assign]
        try:
            yield
        finally:
            handle.remove()
            for layer in patched:
                del layer.forward
            state.clear()


@torch.no_grad()
def nll_and_perplexity(
    model: nn.Module, batches: Sequence[BatchInput]
) -> tuple[list[float], float]:
    """(:func:`sequence_nll`, :func:`perplexity_of`) from one forward per batch: per row, the
    mean next-token NLL over its real targets; over all rows, exp(mean NLL)."""
    out: list[float] = []
    nll, count = 0.0, 0
    device = next(model.parameters()).device
    for raw in batches:
        batch = as_batch(raw, device)
        logits = model(**batch).logits.float()
        ids, mask = batch["input_ids"], batch["attention_mask"].bool()
        lp = torch.log_softmax(logits[:, :-1], -1).gather(-1, ids[:, 1:, None])[..., 0]
        keep = mask[:, 1:] & mask[:, :-1]
        kept = keep.float()
        out += (-(lp * kept).sum(1) / kept.sum(1).clamp(min=1)).tolist()
        nll -= float(lp[keep].sum())
        count += int(keep.sum())
    return out, float(torch.exp(torch.tensor(nll / max(count, 1))))


def sequence_nll(model: nn.Module, batches: Sequence[BatchInput]) -> list[float]:
    """Mean next-token NLL (nats) of every sequence of ``batches`` ([B, T] rows, as for
    :func:`perplexity_of`), one value per row: the paired units of the experiment's perplexity
    claims (with equal token counts per row their mean is log :func:`perplexity_of`)."""
    return nll_and_perplexity(model, batches)[0]


def perplexity_of(model: nn.Module, batches: Sequence[BatchInput]) -> float:
    """Token-level perplexity exp(mean NLL) over all real next-token targets of ``batches``
    (dicts or tensors of input ids, as for :func:`teacher_outputs`)."""
    return nll_and_perplexity(model, batches)[1]


# --- save / load ------------------------------------------------------------------------------


def deployable(layers: dict[str, nn.Module]) -> dict[str, nn.Module]:
    """Inference forms: MBOK / OneBit -> packed :class:`BooleanLinear`; RTN as is."""
    return {n: (m.to_boolean() if hasattr(m, "to_boolean") else m) for n, m in layers.items()}


def save_compressed(layers: dict[str, nn.Module], path: Path, meta: dict[str, Any]) -> int:
    """Write the deployable layers to one safetensors file (``name.field`` keys; metadata:
    ``meta`` + each layer's kind and in_features). Returns the file size in bytes."""
    from safetensors.torch import save

    from iclr26_common.outputs import write_bytes

    tensors: dict[str, torch.Tensor] = {}
    kinds: dict[str, list[Any]] = {}
    for name, module in deployable(layers).items():
        kinds[name] = [type(module).__name__, module.in_features]
        for key, value in module.state_dict().items():
            if value is not None:
                tensors[f"{name}.{key}"] = value.detach().contiguous().cpu()
    metadata = {"meta": json.dumps(meta), "layers": json.dumps(kinds)}
    write_bytes(path, save(tensors, metadata=metadata))  # atomic, mode 0644 (save_file: 0600)
    return Path(path).stat().st_size


def load_compressed(model: nn.Module, path: Path) -> tuple[dict[str, nn.Module], dict[str, Any]]:
    """Install the layers of a :func:`save_compressed` file into ``model`` (in place)."""
    from safetensors import safe_open

    from iclr26_common.textio import input_file

    path = input_file(path, "compressed-model file", error=LMError)  # missing, or a folder
    try:
        with safe_open(str(path), "pt") as f:
            metadata = f.metadata() or {}
            tensors = {k: f.get_tensor(k) for k in f.keys()}
    except Exception as error:  # safetensors raises its own error types
        raise LMError(f"{path}: not a safetensors file ({error})") from error
    if "layers" not in metadata:
        raise LMError(f"{path}: missing 'layers' metadata (not written by mbok compress)")
    kinds = json.loads(metadata["layers"])
    installed: dict[str, nn.Module] = {}
    device = next(model.parameters()).device
    for name, (kind, in_features) in kinds.items():
        try:
            model.get_submodule(name)
        except AttributeError as error:
            raise LMError(f"{path}: layer {name!r} does not exist in this model") from error
        get = lambda key, name=name: tensors.get(f"{name}.{key}")  # noqa: E731
        if kind == "BooleanLinear":
            module: nn.Module = BooleanLinear(
                get("packed"), get("s_out"), get("s_in"), in_features, get("bias")
            )
        elif kind == "RTNLinear":
            module = RTNLinear(get("planes"), get("scale"), get("zero"), in_features, get("bias"))
        else:
            raise LMError(f"{path}: layer {name!r} has unknown kind {kind!r}")
        _set(model, name, module.to(device))
        installed[name] = module
    return installed, json.loads(metadata.get("meta", "{}"))
