"""Agents in any language, at their model wire: the recording proxy (:mod:`.proxy`), the endpoints it serves
(:mod:`.endpoints`) and the runs it groups requests into (:mod:`.runs`). See ``docs/any-language.md``.
"""
