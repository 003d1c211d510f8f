"""Knowledge-edit requests: CounterFact / zsRE readers, a CounterFact writer, the offline fact
table SmolLM2 is probed on, and a synthetic subject-relation-object world.

CounterFact record (Meng et al., ROME): ``case_id``, ``requested_rewrite`` {``prompt`` with
``{}`` for the subject, ``subject``, ``target_new`` {``str``}, ``target_true`` {``str``}},
``paraphrase_prompts``, ``neighborhood_prompts``, ``generation_prompts``. Our one extension:
optional ``neighborhood_targets`` (same length as ``neighborhood_prompts``), each neighbour's own
true answer; when absent the standard rule applies (neighbours share ``target_true``).

zsRE record (MEND/ROME eval file): ``subject``, ``src`` (question containing the subject),
``rephrase``, ``alt`` (new answer), ``answers`` (true answers), ``loc``, ``loc_ans``. zsRE
requests are scored by token-level accuracy (``kind="zsre"``), as the official
``compute_rewrite_quality_zsre``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from iclr26_common.textio import input_file
from llm_methods.jsonl import read_text

__all__ = [
    "COUNTRIES",
    "RELATIONS",
    "ZSRE_TARGETS",
    "EditRequest",
    "build_requests",
    "check_request",
    "fact_candidates",
    "read_counterfact",
    "read_requests",
    "read_zsre",
    "synth_names",
    "synth_table",
    "synth_world",
    "with_leading_space",
    "write_counterfact",
]


@dataclass(frozen=True)
class EditRequest:
    """One rewrite: ``prompt.format(subject)`` should now continue with ``target_new``."""

    case_id: int
    prompt: str
    subject: str
    target_new: str
    target_true: str
    paraphrase_prompts: tuple[str, ...] = ()
    neighborhood_prompts: tuple[str, ...] = ()
    neighborhood_targets: tuple[str, ...] = ()
    generation_prompts: tuple[str, ...] = ()
    relation: str = ""
    extra: dict[str, Any] = field(default_factory=dict, compare=False)
    # how ``metrics.edit_metrics`` scores it: "counterfact" (p(new) > p(true) comparisons) or
    # "zsre" (token-level accuracy of the answers, ROME / MEMIT / AlphaEdit's zsRE evaluation)
    kind: str = "counterfact"

    @property
    def text(self) -> str:
        return self.prompt.format(self.subject)

    def neighbour_answers(self) -> list[str]:
        return list(self.neighborhood_targets) or [self.target_true] * len(
            self.neighborhood_prompts
        )


def _fail(where: str, what: str) -> ValueError:
    return ValueError(f"{where}: {what}")


def check_request(req: EditRequest, where: str) -> EditRequest:
    """Raises ``ValueError`` naming ``where`` and the field for a malformed request."""
    if req.prompt.count("{}") != 1:
        raise _fail(
            where,
            f"requested_rewrite.prompt {req.prompt!r} must contain exactly one '{{}}'"
            " where the subject goes",
        )
    if not req.subject.strip():
        raise _fail(where, "requested_rewrite.subject is empty")
    if not req.target_new.strip() or not req.target_true.strip():
        raise _fail(where, "requested_rewrite.target_new/target_true.str is empty")
    if req.target_new.strip() == req.target_true.strip():
        raise _fail(where, "target_new equals target_true")
    if req.neighborhood_targets and len(req.neighborhood_targets) != len(req.neighborhood_prompts):
        raise _fail(where, "neighborhood_targets and neighborhood_prompts differ in length")
    return req


def _field(rec: dict[str, Any], key: str, where: str) -> Any:
    if not isinstance(rec, dict) or key not in rec:
        raise _fail(where, f"missing field '{key}'")
    return rec[key]


def _strs(rec: dict[str, Any], key: str, where: str) -> tuple[str, ...]:
    value = rec.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _fail(where, f"field '{key}' must be a list of strings")
    return tuple(value)


def _load_json_records(path: Path) -> list[Any]:
    path = Path(path)
    input_file(path, error=ValueError)
    text = read_text(path, ValueError)
    try:
        if path.suffix == ".jsonl":
            return [json.loads(line) for line in text.splitlines() if line.strip()]
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"{path}: not valid JSON ({error.msg}, line {error.lineno})") from error
    if not isinstance(data, list):
        raise ValueError(f"{path}: expected a JSON list of records")
    return data


def with_leading_space(target: str) -> str:
    """ROME's convention for CounterFact targets: the released files store ``"English"`` and the
    official code tokenises ``" " + target`` (``rome_main`` / ``AlphaEdit_main`` prepend the
    space to ``target_new``, the evaluation tokenises ``f" {target}"``), so the continuation of
    "... is" is " English", not "isEnglish". A target that already starts with a space (our
    files before issue 27) is kept as it is."""
    return target if target.startswith(" ") else " " + target


def read_counterfact(path: Path) -> list[EditRequest]:
    """CounterFact ``.json`` (a list) or ``.jsonl``; errors name ``file:record:field``. Targets
    (``target_new``, ``target_true`` and our ``neighborhood_targets``) get ROME's leading space
    (:func:`with_leading_space`)."""
    out = []
    for i, rec in enumerate(_load_json_records(path)):
        where = f"{path}:record {i}"
        rw = _field(rec, "requested_rewrite", where)
        for key in ("prompt", "subject", "target_new", "target_true"):
            _field(rw, key, f"{where}:requested_rewrite")
        new, true = rw["target_new"], rw["target_true"]
        if (
            not isinstance(new, dict)
            or not isinstance(true, dict)
            or "str" not in new
            or "str" not in true
        ):
            raise _fail(where, "requested_rewrite.target_new/target_true must be {'str': ...}")
        req = EditRequest(
            case_id=int(rec.get("case_id", i)),
            prompt=str(rw["prompt"]),
            subject=str(rw["subject"]),
            target_new=with_leading_space(str(new["str"])),
            target_true=with_leading_space(str(true["str"])),
            paraphrase_prompts=_strs(rec, "paraphrase_prompts", where),
            neighborhood_prompts=_strs(rec, "neighborhood_prompts", where),
            neighborhood_targets=tuple(
                with_leading_space(t) for t in _strs(rec, "neighborhood_targets", where)
            ),
            generation_prompts=_strs(rec, "generation_prompts", where),
            relation=str(rw.get("relation_id", "")),
        )
        out.append(check_request(req, where))
    if not out:
        raise ValueError(f"{path}: no records")
    return out


def _bare(target: str) -> str:
    return target[1:] if target.startswith(" ") else target


ZSRE_TARGETS = ("alt", "answers")


def read_zsre(path: Path, target: str = "answers") -> list[EditRequest]:
    """zsRE eval records -> requests (``src`` with the subject replaced by ``{}``, ``kind`` "zsre").

    ``target`` picks the edit target: ``"answers"`` (default: ``answers[0]``, as ROME / MEMIT /
    AlphaEdit's ``MENDQADataset``) or ``"alt"`` (the file's new answer, as MEND / EasyEdit); the
    other one is kept as ``target_true``, which zsRE scoring does not use. The neighbourhood prompt is
    ``loc + "?"`` with ``loc_ans`` as its answer (the official neighbourhood)."""
    if target not in ZSRE_TARGETS:
        raise ValueError(f"zsRE target must be one of {ZSRE_TARGETS}, got {target!r}")
    out = []
    for i, rec in enumerate(_load_json_records(path)):
        where = f"{path}:record {i}"
        subject, src = str(_field(rec, "subject", where)), str(_field(rec, "src", where))
        if not subject.strip() or subject not in src:
            raise _fail(where, f"subject {subject!r} does not occur in src {src!r}")
        answers = _field(rec, "answers", where)
        true = answers[0] if isinstance(answers, list) and answers else answers
        loc, loc_ans = rec.get("loc"), rec.get("loc_ans")
        rephrase = rec.get("rephrase")
        alt = " " + str(_field(rec, "alt", where)).strip()
        true = " " + str(true).strip()
        new, old = (alt, true) if target == "alt" else (true, alt)
        req = EditRequest(
            case_id=int(rec.get("case_id", i)),
            prompt=src.replace(subject, "{}", 1),
            subject=subject,
            target_new=new,
            target_true=old,
            paraphrase_prompts=(str(rephrase),) if rephrase else (),
            neighborhood_prompts=(str(loc) + "?",) if loc else (),
            neighborhood_targets=(" " + str(loc_ans).strip(),) if loc else (),
            kind="zsre",
        )
        out.append(check_request(req, where))
    if not out:
        raise ValueError(f"{path}: no records")
    return out


def read_requests(path: Path, zsre_target: str = "answers") -> list[EditRequest]:
    """CounterFact or zsRE (edit target ``zsre_target``, see :func:`read_zsre`), told apart by
    the first record's fields."""
    records = _load_json_records(Path(path))
    if records and isinstance(records[0], dict) and "src" in records[0]:
        return read_zsre(path, zsre_target)
    return read_counterfact(path)


def write_counterfact(requests: list[EditRequest], path: Path) -> Path:
    """The released CounterFact layout: targets without the leading space that
    :func:`read_counterfact` adds back (ROME's convention)."""
    rows = []
    for r in requests:
        row: dict[str, Any] = {
            "case_id": r.case_id,
            "requested_rewrite": {
                "prompt": r.prompt,
                "subject": r.subject,
                "relation_id": r.relation,
                "target_new": {"str": _bare(r.target_new)},
                "target_true": {"str": _bare(r.target_true)},
            },
            "paraphrase_prompts": list(r.paraphrase_prompts),
            "neighborhood_prompts": list(r.neighborhood_prompts),
            "generation_prompts": list(r.generation_prompts),
        }
        if r.neighborhood_targets:
            row["neighborhood_targets"] = [_bare(t) for t in r.neighborhood_targets]
        row.update(r.extra)
        rows.append(row)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(rows, indent=1, ensure_ascii=False))
    return path


# --- offline fact table (country -> capital, language, continent) --------------------------------
# fmt: off
COUNTRIES: dict[str, tuple[str, str, str]] = {
    "France": ("Paris", "French", "Europe"), "Germany": ("Berlin", "German", "Europe"),
    "Italy": ("Rome", "Italian", "Europe"), "Spain": ("Madrid", "Spanish", "Europe"),
    "Portugal": ("Lisbon", "Portuguese", "Europe"), "Greece": ("Athens", "Greek", "Europe"),
    "Poland": ("Warsaw", "Polish", "Europe"), "Sweden": ("Stockholm", "Swedish", "Europe"),
    "Norway": ("Oslo", "Norwegian", "Europe"), "Finland": ("Helsinki", "Finnish", "Europe"),
    "Denmark": ("Copenhagen", "Danish", "Europe"), "Austria": ("Vienna", "German", "Europe"),
    "Hungary": ("Budapest", "Hungarian", "Europe"), "Ireland": ("Dublin", "English", "Europe"),
    "Russia": ("Moscow", "Russian", "Europe"), "Netherlands": ("Amsterdam", "Dutch", "Europe"),
    "Turkey": ("Ankara", "Turkish", "Asia"), "Japan": ("Tokyo", "Japanese", "Asia"),
    "China": ("Beijing", "Chinese", "Asia"), "India": ("New Delhi", "Hindi", "Asia"),
    "Thailand": ("Bangkok", "Thai", "Asia"), "Vietnam": ("Hanoi", "Vietnamese", "Asia"),
    "Indonesia": ("Jakarta", "Indonesian", "Asia"), "Iran": ("Tehran", "Persian", "Asia"),
    "Iraq": ("Baghdad", "Arabic", "Asia"), "Saudi Arabia": ("Riyadh", "Arabic", "Asia"),
    "South Korea": ("Seoul", "Korean", "Asia"), "Pakistan": ("Islamabad", "Urdu", "Asia"),
    "Israel": ("Jerusalem", "Hebrew", "Asia"), "Philippines": ("Manila", "Filipino", "Asia"),
    "Egypt": ("Cairo", "Arabic", "Africa"), "Kenya": ("Nairobi", "Swahili", "Africa"),
    "Nigeria": ("Abuja", "English", "Africa"), "Ethiopia": ("Addis Ababa", "Amharic", "Africa"),
    "Morocco": ("Rabat", "Arabic", "Africa"), "Ghana": ("Accra", "English", "Africa"),
    "Senegal": ("Dakar", "French", "Africa"), "Algeria": ("Algiers", "Arabic", "Africa"),
    "Brazil": ("Brasilia", "Portuguese", "South America"),
    "Argentina": ("Buenos Aires", "Spanish", "South America"),
    "Peru": ("Lima", "Spanish", "South America"), "Chile": ("Santiago", "Spanish", "South America"),
    "Colombia": ("Bogota", "Spanish", "South America"),
    "Venezuela": ("Caracas", "Spanish", "South America"),
    "Mexico": ("Mexico City", "Spanish", "North America"),
    "Canada": ("Ottawa", "English", "North America"),
    "Cuba": ("Havana", "Spanish", "North America"),
    "Australia": ("Canberra", "English", "Oceania"),
    "New Zealand": ("Wellington", "English", "Oceania"),
}
# relation -> (column, rewrite prompt, paraphrase prompts)
RELATIONS: dict[str, tuple[int, str, tuple[str, ...]]] = {
    "capital": (0, "The capital of {} is",
                ("The capital city of {} is", "{}'s capital city is called")),
    "language": (1, "The official language of {} is",
                 ("In {}, the official language is", "People in {} mostly speak")),
    "continent": (2, "{} is a country in",
                  ("{} is located on the continent of", "The continent where {} lies is")),
}
# fmt: on


def fact_candidates(
    countries: dict[str, tuple[str, str, str]] | None = None,
) -> list[tuple[str, str, str, list[str]]]:
    """(relation, subject, true object, all objects of that relation) for every table fact."""
    table = countries or COUNTRIES
    out = []
    for rel, (col, _, _) in RELATIONS.items():
        objects = sorted({row[col] for row in table.values()})
        out.extend((rel, subj, row[col], objects) for subj, row in table.items())
    return out


def build_requests(
    known: list[tuple[str, str, str]],
    seed: int = 0,
    n_neighbours: int = 4,
    relations: dict[str, tuple[int, str, tuple[str, ...]]] | None = None,
) -> list[EditRequest]:
    """CounterFact records from known (relation, subject, object) facts: a counterfactual target
    from the same relation's objects, paraphrases from other templates, neighbourhood prompts of
    other known subjects of the same relation (with their own answers). ``relations`` (default
    :data:`RELATIONS`) gives each relation's rewrite prompt and paraphrases."""
    relations = RELATIONS if relations is None else relations
    for rel, _, _ in known:
        if rel not in relations:
            raise ValueError(f"known: relation {rel!r} has no templates in relations")
    rng = np.random.default_rng(seed)
    by_rel: dict[str, list[tuple[str, str]]] = {}
    for rel, subj, obj in known:
        by_rel.setdefault(rel, []).append((subj, obj))
    out = []
    for rel, subj, obj in known:
        _, prompt, paraphrases = relations[rel]
        others = sorted({o for _, o in by_rel[rel] if o != obj})
        if not others:
            continue
        new = others[int(rng.integers(len(others)))]
        pool = [(s, o) for s, o in by_rel[rel] if s != subj and o != new]
        picks = rng.permutation(len(pool))[:n_neighbours]
        neigh = [pool[i] for i in picks]
        out.append(
            EditRequest(
                case_id=len(out),
                prompt=prompt,
                subject=subj,
                target_new=" " + new,
                target_true=" " + obj,
                paraphrase_prompts=tuple(p.format(subj) for p in paraphrases),
                neighborhood_prompts=tuple(prompt.format(s) for s, _ in neigh),
                neighborhood_targets=tuple(" " + o for _, o in neigh),
                generation_prompts=(f"{subj} is known for", f"Travelling to {subj}, you will see"),
                relation=rel,
            )
        )
    return out


_SYLLABLES = ("ka", "lo", "mi", "ra", "ten", "vo", "zu", "ber", "dal", "nor", "pel", "qui", "sar")


def _invent(rng: np.random.Generator, n: int, exclude: frozenset[str]) -> list[str]:
    names: set[str] = set()
    for _ in range(1000 * (n + 1)):
        if len(names) >= n:
            break
        k = int(rng.integers(2, 4))
        name = "".join(_SYLLABLES[int(i)] for i in rng.integers(len(_SYLLABLES), size=k)).title()
        if name not in exclude:
            names.add(name)
    if len(names) < n:
        raise ValueError(f"n={n}: cannot invent that many distinct names")
    return sorted(names)


def synth_names(n: int, seed: int = 0, exclude: frozenset[str] = frozenset()) -> list[str]:
    """``n`` distinct invented place names (2-3 syllables, title case, sorted), none in ``exclude``."""
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    return _invent(np.random.default_rng(seed), n, exclude)


def synth_table(n_subjects: int = 24, seed: int = 0) -> dict[str, tuple[str, str, str]]:
    """Invented place name -> (capital, language, continent), the objects drawn (seeded) from the
    real objects of :data:`COUNTRIES`."""
    if n_subjects < 2:
        raise ValueError(f"n_subjects must be >= 2, got {n_subjects}")
    rng = np.random.default_rng(seed)
    names = _invent(rng, n_subjects, frozenset())
    objects = [sorted({row[c] for row in COUNTRIES.values()}) for c in range(3)]
    return {n: tuple(o[int(rng.integers(len(o)))] for o in objects) for n in names}  # type: ignore[misc]


def synth_world(n_subjects: int = 24, seed: int = 0) -> list[EditRequest]:
    """A synthetic subject-relation-object world written as CounterFact records: invented place
    names with capitals / languages / continents drawn from the real objects of the table."""
    table = synth_table(n_subjects, seed)
    known = [(r, s, o) for r, s, o, _ in fact_candidates(table)]
    return build_requests(known, seed=seed)
