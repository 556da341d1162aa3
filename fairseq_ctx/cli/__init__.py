"""Console scripts (see setup.py)."""
