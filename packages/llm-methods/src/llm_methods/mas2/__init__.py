"""MAS²: self-generative, self-configuring, self-rectifying multi-agent systems (arXiv 2509.24323).

A generator writes a workflow over AFlow-style operators in a small validated DSL (:mod:`.dsl`),
an implementer assigns a backbone model from a costed pool to each node, a rectifier rewrites the
workflow or the assignment while it runs (:mod:`.execute`); Collaborative Tree Optimization trains
the three meta-agents with value-weighted DPO (:mod:`.cto`). Generated code runs only in
:mod:`.sandbox`. Light imports only.
"""
