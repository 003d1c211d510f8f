"""PyTorch Geometric, imported without torch's "`torch.jit.script` is deprecated" warning.

``import torch_geometric`` calls ``torch.jit.script`` while it loads (``torch_geometric.nn.pool``
scripts ``SelectOutput`` and ``ConnectOutput``), and torch >= 2.10 warns about every such call:
wherever deprecation warnings are shown (pytest, ``python -X dev``, ``PYTHONWARNINGS=default``)
every command printed it (issue 39). The filter covers that one message, only while PyG is
imported here; every module of this package takes its PyG names from this module, so whichever
of them loads first brings PyG in quietly. Nothing else is hidden, and the process's warning
filters end as a plain ``import torch_geometric`` leaves them (PyG and its dependencies add
their own while they load: those stay).
"""

from __future__ import annotations

import warnings

_JIT_SCRIPT_DEPRECATED = r"`torch\.jit\.script` is deprecated"

_ours = []
for _category in (DeprecationWarning, FutureWarning):
    warnings.filterwarnings("ignore", message=_JIT_SCRIPT_DEPRECATED, category=_category)
    _ours.append(warnings.filters[0])
try:
    from torch_geometric.data import Batch, Data
    from torch_geometric.loader import DataLoader
    from torch_geometric.nn import MessagePassing
    from torch_geometric.utils import scatter
finally:  # only our two filters go (warnings.catch_warnings would drop PyG's own as well)
    for _item in _ours:
        if _item in warnings.filters:
            warnings.filters.remove(_item)
    _mutated = getattr(warnings, "_filters_mutated", None)  # what filterwarnings calls after
    if _mutated is not None:  # a change: the per-module caches of decisions are reset
        _mutated()

__all__ = ["Batch", "Data", "DataLoader", "MessagePassing", "scatter"]
