"""The strategies compared by Wang et al., arXiv:2610.21463 (catalog.py, with their registry) and SpecAgent planned in lockstep."""
