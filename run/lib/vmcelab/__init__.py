"""vmcelab: boot vmce test guests, talk to them, run vmced.

Used by the run/ commands, the end-to-end tests and the benchmarks. Only
the Python standard library: it must work on a fresh Debian 12 host.
"""
