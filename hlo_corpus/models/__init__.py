"""The nine workload families, one module each; each exposes ``workloads()``."""
