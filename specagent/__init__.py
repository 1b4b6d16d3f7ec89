"""specagent: predict, measure and plan the cost of weak-strong speculative tool-using agents."""

__version__ = "0.1.0"
