"""Jobs that drive served models over the network (`acceptance measure`, `bench serve`, `live` on endpoints).

They live here, beside the chat-completions client they drive, because the import layers put the network above the
simulator (tests/test_import_layers.py): a job under simulator/jobs/ may not import specagent.endpoints. Each is a
Request (simulator/jobs/base.py) run into a Result, as every job is; `simulator.jobs.JOBS` names them.
"""
