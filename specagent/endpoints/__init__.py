"""Talking to served models: an OpenAI-compatible chat-completions client, its on-disk cache, and the
shadow verification behind `specagent acceptance measure`.

A layer of its own between kernels and reports: it reads traces (the recorded trajectories it
teacher-forces) and the airline service of `kernels` (the live runner drives it), and nothing below
imports it. It is the only place that does network I/O.
"""
