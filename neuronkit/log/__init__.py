"""The log: ``CompileLog`` (events mirrored to an append-only JSONL file), its reader, the hold on
the file it writes (one file, one writer), per-rank logs and their merge, and ``open_log`` (a
file, a folder of rank logs or a TORCH_TRACE folder). Imports events and sources (for
TORCH_TRACE), setup (the process rank)."""
