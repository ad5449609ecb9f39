"""memnet: bAbI-style stories and End-to-End Memory Networks with a stopping rule and visited-memory masking.

The Python API (memnet.api, docs/api.md): generate, load_tasks, train, load; each loads
torch only when called, so `import memnet` and `memnet --help` stay quick.
"""

__version__ = "0.1.0"

__all__ = ["generate", "load_tasks", "train", "load", "Model", "Answer", "Run"]


def __getattr__(name: str):
    if name in __all__:
        from memnet import api

        return getattr(api, name)
    raise AttributeError(f"module 'memnet' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
