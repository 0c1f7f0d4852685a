"""Sources: every way a compile event is born. Dynamo's structured trace (``dynamo``, assembled by
the pure ``assemble``), native torch-neuronx's NEFF builds and eager kernels (``neuron``), kernels
forecast on CPU (``kernel_forecast``), compiles in progress (``starts``), torch's trace files read
after the fact (``trace_import``); ``torch_text`` is the one place that reads torch's wording.
A source hands events to a sink (``sink.EventSink``: the recorder). Imports: events, setup.
"""
