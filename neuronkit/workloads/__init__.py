"""Workloads: what makes compiles happen, with bounded shapes: buckets and the shape audit,
``nk.generate`` (static cache, recompile limit, progress), warm-up, Trainer helpers, torchrun
launches and rank groups. Each runs under a recorder. Imports recorder and the layers below."""
