"""memnet: bAbI-style stories and End-to-End Memory Networks with a stopping rule and visited-memory masking."""

__version__ = "0.1.0"
