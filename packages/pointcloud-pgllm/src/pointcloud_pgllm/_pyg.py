"""The PyTorch Geometric names this package uses, imported without torch's "`torch.jit.script`
is deprecated" warning.

While ``torch_geometric`` loads it scripts two classes of ``torch_geometric.nn.pool``, and torch
>= 2.10 warns at each call: wherever deprecation warnings are shown (pytest, ``python -X dev``,
``PYTHONWARNINGS=default``) every ``pointcloud-pgllm`` command printed it, ``--help`` included
(:mod:`pointcloud_pgllm.graph` imports PyG, and the CLI imports the graph module; issue 39 named
the same defect in atomistic-scaling). Only that one message is ignored, and only while PyG is
imported here; afterwards the process's warning filters are those a plain ``import
torch_geometric`` leaves (PyG and its dependencies add filters of their own while they load:
``warnings.catch_warnings`` would drop those too, so our two filters are removed by identity).
"""

from __future__ import annotations

import warnings

_MESSAGE = r"`torch\.jit\.script` is deprecated"

_added = []
for _category in (DeprecationWarning, FutureWarning):  # torch has used both categories
    warnings.filterwarnings("ignore", message=_MESSAGE, category=_category)
    _added.append(warnings.filters[0])
try:
    from torch_geometric.data import Data
    from torch_geometric.utils import add_self_loops, to_undirected
finally:
    for _entry in _added:
        if _entry in warnings.filters:
            warnings.filters.remove(_entry)
    _reset = getattr(warnings, "_filters_mutated", None)  # clears the modules' cached decisions
    if _reset is not None:
        _reset()

__all__ = ["Data", "add_self_loops", "to_undirected"]
