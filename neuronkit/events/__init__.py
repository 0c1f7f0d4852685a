"""Events: what one compile event is (``event``), the log file's format and its checks (``schema``),
and facts about a list of events (``facts``). The record every layer above shares; imports
nothing else of neuronkit."""
