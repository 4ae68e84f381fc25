"""Native collectors: the Go execution trace decoder, OS-side recorders, workloads.

Pure code: nothing under this package imports Flask, Dash or SQLAlchemy.
"""
