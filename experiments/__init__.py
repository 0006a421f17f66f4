"""Experiment scripts reproducing the GO paper's results (see ``experiments/README.md``)."""
