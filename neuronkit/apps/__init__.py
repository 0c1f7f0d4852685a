"""Apps, the top layer: the dashboard (state and widget), the command line, compile budgets
(with their pytest plugin and cell magic). May import every layer below."""
