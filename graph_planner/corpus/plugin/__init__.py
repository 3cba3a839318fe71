"""The pytest plugin the corpus loads into sandboxed test runs (its folder goes on PYTHONPATH)."""
