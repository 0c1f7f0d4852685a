"""Views: pure renderers, a compile log in and text, HTML, a table model or a figure out. They import
only events, log, sources' torch_text, advice, and workloads' shapes (60 s a graph, for projections)."""
