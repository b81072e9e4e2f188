"""Matching: how a call the replayed agent makes is compared with the recorded step it should repeat. The tool
tape (``tape``) and a lab's policy for it (``policy``, ``overrides``), what a step sent against what the replay
sends (``sentdiff``), content hashes across installations (``hashing``), the tool calls a model asked for
(``toolcalls``), and a divergence kept as data (``divergence``).

It only compares values it is given: it must never run agent or tool code, never import a module a recording
names, never open the network, a file or the store, and never decide what a replay may do (that is
:mod:`otel_replay.replay.safety`). Import from the submodules; this package exports nothing itself.
"""
