"""Measurements of one model: parameters, FLOPs, peak memory, throughput and κ.

Each probe is a small function whose docstring states exactly what it measures.
"""
