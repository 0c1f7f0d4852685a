"""Helpers shared by the tests (import them as ``from helpers.x import y``: tests/ is on sys.path)."""
