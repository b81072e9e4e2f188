"""The replay lab: a change (code, prompt, model) backtested against a cohort of recorded runs with their tools
held fixed, scored against the originals and a baseline, gated for CI (see ``docs/lab.md``)."""
