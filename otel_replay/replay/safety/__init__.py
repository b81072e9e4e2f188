"""The safety rules of a replay: which recorded code may be imported (``trust``), what a live replay was allowed
to run (``approvals``, ``refusals``, ``riskytools``), what it says on disk before its first real call
(``journal``, read back by ``audit``), and what stops the replayed code's unrecorded side effects (the audit
hook of ``guard`` with the checks of ``effects`` and the exemptions of ``exempt``, the kernel sandbox of
``sandbox`` over ``landlock``).

It must never loosen a refusal for convenience (a check it cannot make refuses, it does not let through), never
take an approval or a trust decision from the recording, and never import the engine or the session that runs
the agent (``otel_replay.replay.engine``, ``otel_replay.replay.session``): those call the rules, the rules do not
call them. Import from the submodules; this package exports nothing itself.
"""
