"""Benchmarks, each run as a module from the checkout root: `python -m bench.<name> --help`."""
