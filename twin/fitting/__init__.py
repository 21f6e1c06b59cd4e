"""Fitting the cost model to a real server's benchmark results.

``measured_run`` holds what one benchmark run tells (its load, lengths, prefix sharing and measured metrics),
one reader per result format turns a file into ``MeasuredRun`` values, ``replay`` rebuilds each run's traffic and
simulates it, and ``fit`` finds the cost parameters that make the simulated metrics match the measured ones.
"""
