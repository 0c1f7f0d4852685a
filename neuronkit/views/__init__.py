"""Views: they only read compile logs. Text tables (``text``), HTML (``html``), PNG charts
(``charts``), the Chrome trace (``chrome_trace``); the widget and CLI build on them."""
