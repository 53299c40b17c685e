"""Programs run as child processes by the Subprocess adapter tests (not test modules)."""

collect_ignore = ["model.py"]
