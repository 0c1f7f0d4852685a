"""The recorder: ``CompileRecorder`` attaches to the sources, stamps each event with rank,
context and device, and owns its log. Imports sources, log, events, setup."""
