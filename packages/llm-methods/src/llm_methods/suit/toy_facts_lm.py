"""The toy facts LM: a zoo-style tiny Llama trained on a synthetic subject-relation-object world
(a language model of the world's facts, not an RL world model): the offline editing testbed
whose facts, paraphrases and counterfactual targets are all in-world.

The world is :func:`llm_methods.suit.data.synth_table` (invented place names with a capital,
language and continent drawn from the real objects of the fact table). Training text: every
true fact in every phrasing of :data:`llm_methods.suit.data.RELATIONS` (rewrite prompt and both
paraphrases, so paraphrase prompts are in-distribution), one sentence per row,
``"<bos>The capital of Kalomi is Rabat."``. A byte-level BPE tokenizer is trained on that text
and a ``tiny_llama`` on the rows (next-token loss on all real tokens). Edit requests
(:func:`world_requests`) pick ``target_new`` among the *other objects of the same relation that
occur in the world*, so the tokenizer has merged them and the model has produced them.

Cached under ``cache_root() / "suit-world" / "world-<recipe hash>"`` (atomic, built once; a
recipe change gives a new hash): an HF folder :func:`llm_methods.lm.load_lm` reads, plus
``world.json`` (the requests, CounterFact format) and ``world_model.json`` (recipe, loss, time;
the marker keeps the name it had when this module was ``world_model.py``, so cached builds stay
valid).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from iclr26_common.cachedir import build_once, recipe_digest
from llm_methods.suit.data import (
    RELATIONS,
    EditRequest,
    build_requests,
    fact_candidates,
    read_counterfact,
    synth_table,
    write_counterfact,
)

if TYPE_CHECKING:
    from collections.abc import Collection

    from llm_methods.lm.loading import LM

__all__ = [
    "MARKER",
    "REQUESTS_FILE",
    "WORLD_RELATIONS",
    "WorldSpec",
    "ensure_facts_lm",
    "load_world",
    "prompts",
    "train_facts_lm",
    "world_facts",
    "world_requests",
    "world_texts",
]

MARKER = "world_model.json"
# relation -> (column, rewrite prompt, paraphrases). The rewrite prompt ends with the subject, so
# the subject's last token is where the object is predicted (see the module docstring); the
# paraphrases are the fact table's three phrasings (subject inside or first).
WORLD_RELATIONS: dict[str, tuple[int, str, tuple[str, ...]]] = {
    rel: (col, f"{rel.title()} of {{}}", (prompt, *paraphrases))
    for rel, (col, prompt, paraphrases) in RELATIONS.items()
}
REQUESTS_FILE = "world.json"


@dataclass(frozen=True)
class WorldSpec:
    """Recipe of the world and its model (every field enters the cache hash)."""

    n_subjects: int = 24
    seed: int = 0
    vocab_size: int = 1024
    n_layers: int = 4
    hidden: int = 128
    heads: int = 4
    steps: int = 320
    batch_size: int = 64
    lr: float = 3e-3
    seq_len: int = 16

    def __post_init__(self) -> None:
        for name in (
            "n_subjects",
            "vocab_size",
            "n_layers",
            "hidden",
            "heads",
            "steps",
            "batch_size",
            "seq_len",
        ):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"WorldSpec.{name} must be >= 1, got {getattr(self, name)}")
        if self.n_subjects < 2:
            raise ValueError(f"WorldSpec.n_subjects must be >= 2, got {self.n_subjects}")
        if self.n_layers < 2:
            raise ValueError(
                f"WorldSpec.n_layers must be >= 2 (edits need a later layer), got {self.n_layers}"
            )
        if self.hidden % self.heads:
            raise ValueError(
                f"WorldSpec.hidden {self.hidden} is not a multiple of heads {self.heads}"
            )
        if not self.lr > 0:
            raise ValueError(f"WorldSpec.lr must be > 0, got {self.lr}")

    def digest(self) -> str:
        """Hash of the recipe and of the world's phrasings (a template change rebuilds)."""
        return recipe_digest({**dataclasses.asdict(self), "relations": WORLD_RELATIONS})


def world_facts(spec: WorldSpec) -> list[tuple[str, str, str, list[str]]]:
    """(relation, subject, true object, the relation's objects *in this world*) per fact."""
    table = synth_table(spec.n_subjects, spec.seed)
    out = []
    for rel, subj, obj, _ in fact_candidates(table):
        col = WORLD_RELATIONS[rel][0]
        out.append((rel, subj, obj, sorted({row[col] for row in table.values()})))
    return out


def prompts() -> dict[str, str]:
    """Relation -> rewrite prompt of the world (the prompt facts are probed and edited on)."""
    return {rel: prompt for rel, (_, prompt, _) in WORLD_RELATIONS.items()}


def world_texts(spec: WorldSpec, exclude: Collection[tuple[str, str]] = ()) -> list[str]:
    """Every true fact in every phrasing (rewrite prompt and paraphrases): ``"... is Rabat."``;
    without the facts ``exclude`` names as ``(relation, subject)`` pairs."""
    gone = set(exclude)
    for fact in gone:
        if not (isinstance(fact, tuple) and len(fact) == 2):
            raise ValueError(f"exclude: expected (relation, subject) pairs, got {fact!r}")
    out = []
    for rel, subj, obj, _ in world_facts(spec):
        if (rel, subj) in gone:
            continue
        _, prompt, paraphrases = WORLD_RELATIONS[rel]
        out.extend(f"{t.format(subj)} {obj}." for t in (prompt, *paraphrases))
    return out


def world_requests(
    spec: WorldSpec, known: list[tuple[str, str, str]] | None = None
) -> list[EditRequest]:
    """CounterFact requests for ``known`` facts (default: all world facts); ``target_new`` is
    another in-world object of the same relation, neighbours are other subjects of the relation
    (with their own answers)."""
    facts = known if known is not None else [(r, s, o) for r, s, o, _ in world_facts(spec)]
    return build_requests(facts, seed=spec.seed, relations=WORLD_RELATIONS)


def _rows(tok: Any, texts: list[str], seq_len: int) -> tuple[list[list[int]], list[list[int]]]:
    chunks, masks = [], []
    for text in texts:
        ids = [tok.bos_token_id, *tok(text, add_special_tokens=False).input_ids, tok.eos_token_id]
        if len(ids) > seq_len:
            raise ValueError(
                f"WorldSpec.seq_len {seq_len} is shorter than {len(ids)} tokens of {text!r}"
            )
        pad = seq_len - len(ids)
        chunks.append(ids + [tok.pad_token_id] * pad)
        masks.append([1] * len(ids) + [0] * pad)
    return chunks, masks


def train_facts_lm(spec: WorldSpec) -> tuple[Any, Any, dict[str, Any]]:
    """Train the tokenizer and the tiny Llama from scratch; returns (tokenizer, model, info)."""
    from llm_methods.lm.threads import one_thread
    from llm_methods.lm.train import train_lm
    from llm_methods.zoo.models import tiny_llama
    from llm_methods.zoo.tokenizer import train_bpe

    texts = world_texts(spec)
    tok = train_bpe(texts, spec.vocab_size)
    chunks, masks = _rows(tok, texts, spec.seq_len)
    model = tiny_llama(len(tok), spec.n_layers, spec.hidden, spec.heads, max_len=64, seed=spec.seed)
    with one_thread():
        log = train_lm(
            model, chunks, spec.steps, spec.batch_size, spec.lr, seed=spec.seed, loss_mask=masks
        )
    model.eval()
    info = {
        "recipe": dataclasses.asdict(spec),
        "sentences": len(texts),
        "vocab": len(tok),
        "final_loss": round(sum(log.losses[-10:]) / 10, 4),
        "train_s": round(log.wall_s, 1),
    }
    return tok, model, info


def ensure_facts_lm(
    spec: WorldSpec | None = None, cache_dir: Path | None = None, rebuild: bool = False
) -> Path:
    """The cached folder of the facts LM (``load_lm(folder)``), built once per recipe; it
    also holds ``world.json``, the CounterFact requests of the facts the trained model knows
    (:func:`llm_methods.suit.metrics.known_facts` on the rewrite prompt, among the relation's
    in-world objects); ``world_model.json`` records ``facts`` and ``known``."""
    from iclr26_common.smollm2 import cache_root

    spec = spec or WorldSpec()
    target = (cache_dir or cache_root()) / "suit-world" / f"world-{spec.digest()}"

    def fill(staging: Path) -> str:
        from llm_methods.lm import wrap
        from llm_methods.lm.threads import one_thread
        from llm_methods.suit.metrics import known_facts

        tok, model, info = train_facts_lm(spec)
        facts = world_facts(spec)
        with one_thread():
            known = known_facts(wrap(tok, model, "suit-world"), facts, prompts())
        info.update(facts=len(facts), known=len(known))
        if len(known) < 2:
            raise ValueError(f"WorldSpec {spec}: the model knows {len(known)} facts; train longer")
        requests = world_requests(spec, known)
        if not requests:
            raise ValueError(
                f"WorldSpec {spec}: no known fact has another in-world object to "
                "edit to; train longer or use more subjects"
            )
        model.save_pretrained(staging)
        tok.save_pretrained(staging)
        write_counterfact(requests, staging / REQUESTS_FILE)
        return json.dumps(info, indent=1)

    return build_once(target, MARKER, fill, rebuild=rebuild)


def load_world(folder: Path) -> tuple[LM, list[EditRequest], dict[str, Any]]:
    """(LM in fp32 on :func:`~iclr26_common.device.choose_device`'s device, requests of the
    known facts, build info) from an :func:`ensure_facts_lm` folder."""
    from iclr26_common.device import choose_device
    from llm_methods.lm import load_lm

    folder = Path(folder)
    if not (folder / MARKER).is_file():
        raise ValueError(f"{folder}: not a toy-facts-LM folder (no {MARKER})")
    info = json.loads((folder / MARKER).read_text())
    return (
        load_lm(folder, choose_device(), "float32"),
        read_counterfact(folder / REQUESTS_FILE),
        info,
    )
