"""Views: they only read compile logs. Text tables (``text``), HTML (``html``), PNG charts
(``charts``), the Chrome trace (``chrome_trace``); the dashboard's state (``dashboard_state``), its
widget (``widget``) and the command line (``cli``) build on them."""
