"""The protocol's data: call plans and phases, workloads reduced to episodes, SpecAgent's decisions, settings."""
