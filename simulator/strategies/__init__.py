"""The strategies of SPEC §1 (catalog.py, with their registry) and SpecAgent planned in lockstep."""
