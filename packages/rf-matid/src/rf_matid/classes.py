"""Class vocabulary of RF-MatID: 16 fine-grained classes grouped into 5 superclasses.

Class indices follow upstream: the alphabetical order (Python ``sorted``) of the class names
present in a dataset root; superclass indices are the alphabetical order of the 5 prefixes.
"""

from __future__ import annotations

SUPERCLASSES: tuple[str, ...] = tuple(
    sorted(("brick", "stone", "wood", "syntheticMaterial", "glass"))
)

# Fine-grained classes written by the synthetic generator (the real dataset uses the same
# ``<superclass><NN>`` naming). Descriptions say which material each synthetic class models.
SYNTHETIC_CLASSES: dict[str, str] = {
    "brick01": "solid red clay brick",
    "brick02": "perforated (hollow-core) clay brick",
    "brick03": "aerated concrete block",
    "glass01": "float glass pane",
    "glass02": "tempered glass pane",
    "glass03": "laminated glass (PVB interlayer)",
    "stone01": "marble slab",
    "stone02": "granite slab",
    "stone03": "poured concrete slab",
    "stone04": "ceramic tile",
    "syntheticMaterial01": "acrylic (PMMA) sheet",
    "syntheticMaterial02": "PVC sheet",
    "syntheticMaterial03": "polycarbonate sheet",
    "wood01": "softwood board (pine)",
    "wood02": "hardwood board (oak)",
    "wood03": "plywood board",
}

APPLICATION_MODES: tuple[str, ...] = ("all_classes", "super_classes")


def superclass_of(class_name: str) -> str:
    """Superclass of a fine-grained class name, by case-insensitive prefix (as upstream)."""
    lowered = class_name.lower()
    for superclass in SUPERCLASSES:
        if lowered.startswith(superclass.lower()):
            return superclass
    raise ValueError(
        f"class name {class_name!r} has no known superclass prefix; expected one of {SUPERCLASSES}"
    )


def class_vocabulary(class_names: list[str] | tuple[str, ...], mode: str) -> tuple[str, ...]:
    """Sorted label vocabulary for ``mode`` ('all_classes' or 'super_classes')."""
    if mode == "all_classes":
        return tuple(sorted(set(class_names)))
    if mode == "super_classes":
        return tuple(sorted({superclass_of(name) for name in class_names}))
    raise ValueError(f"application_mode must be one of {APPLICATION_MODES}, got {mode!r}")


def label_indices(
    class_names: list[str] | tuple[str, ...],
    mode: str,
    vocabulary: tuple[str, ...] | None = None,
) -> tuple[list[int], tuple[str, ...]]:
    """Integer label per sample and the vocabulary, for per-sample fine class names.

    ``vocabulary`` (default: ``class_vocabulary(class_names, mode)``) fixes the label order, e.g.
    the classes of every position folder when some folders' samples were skipped; a sample whose
    label is not in it raises ``ValueError``.
    """
    if vocabulary is None:
        vocabulary = class_vocabulary(class_names, mode)
    elif mode not in APPLICATION_MODES:
        raise ValueError(f"application_mode must be one of {APPLICATION_MODES}, got {mode!r}")
    index = {name: i for i, name in enumerate(vocabulary)}
    keys = [superclass_of(name) for name in class_names] if mode == "super_classes" else class_names
    missing = sorted(set(keys) - set(index))
    if missing:
        raise ValueError(f"labels {missing} are not in the vocabulary {vocabulary}")
    return [index[key] for key in keys], tuple(vocabulary)
