"""gmpscope: see what the Go runtime really does."""

__version__ = "0.1.0"
