"""Benchmarks: peer baselines (:mod:`bench.peers`) and the results page (:mod:`bench.results`)."""
