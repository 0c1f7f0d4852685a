"""Where the project's files are, for tests in any folder."""
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]          # the repository
SAMPLE_LOG = ROOT / "notebooks" / "data" / "sample_compile_log.jsonl"
