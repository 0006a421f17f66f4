"""Workload generators and stored HLO modules (filled in by the corpus issue)."""
