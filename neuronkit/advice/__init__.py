"""Advice: findings about a log (what recompiled, why, what to change). One ``Advice`` type
(``finding``), one module per family of findings, ``diagnose`` assembles them. Imports
workloads (bucket planning, rank groups), log, sources (torch's wording), events."""
