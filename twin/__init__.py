"""LLM serving digital twin."""

__version__ = "0.1.0"
