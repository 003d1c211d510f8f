from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest


@pytest.fixture(autouse=True)
def one_torch_thread() -> Iterator[None]:
    """The models here are tiny: on the shared 2-core machine two intra-op threads made forwards
    4-15x slower than one. Restored after each test."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


#: What a LightningCLI run writes into the current folder when a test forgets
#: ``--trainer.default_root_dir`` (the tiny configs keep their logger and checkpoints).
RUN_LITTER = ("lightning_logs", "config.yaml")


@pytest.fixture(autouse=True)
def nothing_written_into_the_cwd() -> Iterator[None]:
    """A test that runs a shipped config must pass ``--trainer.default_root_dir <tmp>``: fails
    the test that left ``lightning_logs/`` or ``config*.yaml`` in the current folder (the
    repository root under pytest)."""
    cwd = Path.cwd()

    def litter() -> set[str]:
        return {p.name for p in cwd.iterdir() if p.name in RUN_LITTER or p.match("config-*.yaml")}

    before = litter()
    yield
    new = litter() - before
    assert not new, f"the test wrote {sorted(new)} into {cwd}; pass --trainer.default_root_dir"


class CtrlC:
    """A wrapper of ``owner.name`` (installed by :func:`ctrl_c_at`) that counts its calls and
    raises ``KeyboardInterrupt`` (what Ctrl-C raises in the main thread) on call number ``at``
    (``0``: never); ``reset(at)`` clears the count."""

    def __init__(self, real: Callable[..., Any]) -> None:
        self.real, self.calls, self.at = real, 0, 0

    def reset(self, at: int = 0) -> None:
        self.calls, self.at = 0, at

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.calls += 1
        if self.calls == self.at:
            raise KeyboardInterrupt
        return self.real(*args, **kwargs)


@pytest.fixture
def ctrl_c_at(monkeypatch: pytest.MonkeyPatch) -> Callable[[Any, str], CtrlC]:
    """``ctrl_c_at(owner, name)``: ``owner.name`` replaced (for the test) by a :class:`CtrlC`
    wrapper, returned; set its ``at`` (``reset(at)``) to interrupt a command mid-work."""

    def install(owner: Any, name: str) -> CtrlC:
        wrapper = CtrlC(getattr(owner, name))
        monkeypatch.setattr(owner, name, wrapper)
        return wrapper

    return install


TEXTS = [
    "The quick brown fox jumps over the lazy dog.",
    "A list is a mutable sequence; a tuple is an immutable one.",
    "Functions are defined with the def statement and return values.",
    "Exceptions are raised with raise and handled with try and except.",
] * 5


@pytest.fixture(scope="session")
def tiny():  # type: ignore[no-untyped-def]
    """A 2-layer 64-d Llama with a 300-token BPE tokenizer, built in the test (untrained)."""
    from llm_methods.zoo.models import tiny_lm

    return tiny_lm(TEXTS, vocab_size=300, n_layers=2, hidden=64, heads=4, seed=0)


@pytest.fixture(scope="session")
def smollm2():  # type: ignore[no-untyped-def]
    """The real offline SmolLM2-135M (float32, CPU), loaded once per session and shared by the
    tests that only read it (forwards, hooks they remove); skips where the GGUF or ``gguf`` is
    missing. A test that changes the weights must load its own."""
    pytest.importorskip("gguf")
    from iclr26_common import smollm2 as locator

    try:
        locator.gguf_path()
    except FileNotFoundError as error:
        pytest.skip(str(error))
    from llm_methods.lm import load_lm

    return load_lm("smollm2", device="cpu")


@pytest.fixture
def nano_zoo(monkeypatch: pytest.MonkeyPatch) -> Callable[[int], Any]:
    """``nano_zoo(steps)`` registers ``nano`` in the zoo for this test (markov-domains, 300
    tokens, 1 layer, 16-d, ``steps`` training steps) and returns its ``ZooSpec``."""
    from llm_methods.zoo import registry

    def register(steps: int) -> Any:
        spec = registry.ZooSpec(
            "nano",
            "markov-domains",
            "test",
            vocab_size=300,
            n_layers=1,
            hidden=16,
            heads=2,
            seq_len=32,
            steps=steps,
            batch_size=4,
        )
        monkeypatch.setitem(registry.ZOO, "nano", spec)
        return spec

    return register


@pytest.fixture(scope="session")
def saved_tiny_lm(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., Path]:
    """``saved_tiny_lm(name, texts, **sizes)``: a :func:`~llm_methods.zoo.models.tiny_lm` of
    ``texts`` saved with its tokenizer into a fresh temporary folder ``name``; returns it."""

    def save(name: str, texts: list[str], **sizes: Any) -> Path:
        from llm_methods.zoo.models import tiny_lm

        lm = tiny_lm(texts, **sizes)
        folder = tmp_path_factory.mktemp(name)
        lm.model.save_pretrained(folder)
        lm.tokenizer.save_pretrained(folder)
        return folder

    return save


class AntibodyReference:
    """The antibody reference inputs shared by ``test_reference_antibody.py`` (alignment) and
    ``test_antibody_reference_weighting.py`` (weighted finetuning), in ``data/reference``."""

    folder = Path(__file__).parent / "data" / "reference"

    def load(self, official: str) -> dict[str, Any]:
        """``antibody_inputs.json`` with ``arrays`` (``antibody_inputs.npz``: the tiny Llama's
        ``model/...`` weights and the token batches) and ``official`` (the named ``.npz`` of
        official numbers)."""
        import json

        import numpy as np

        info = json.loads((self.folder / "antibody_inputs.json").read_text())
        info["arrays"] = dict(np.load(self.folder / "antibody_inputs.npz"))
        info["official"] = dict(np.load(self.folder / official))
        return info

    @staticmethod
    def model(ref: dict[str, Any]):  # type: ignore[no-untyped-def]
        """The tiny Llama of ``ref`` (eager attention) with its stored weights."""
        import torch
        from transformers import LlamaConfig, LlamaForCausalLM

        model = LlamaForCausalLM(LlamaConfig(**ref["model"], attn_implementation="eager"))
        arrays = ref["arrays"]
        state = {k[6:]: torch.from_numpy(v) for k, v in arrays.items() if k.startswith("model/")}
        model.load_state_dict(state)
        return model


@pytest.fixture(scope="session")
def antibody_reference() -> AntibodyReference:
    """Loads the antibody reference inputs and builds their tiny Llama (:class:`AntibodyReference`)."""
    return AntibodyReference()
