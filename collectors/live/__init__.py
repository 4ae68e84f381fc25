"""Live collection: pull back-to-back execution-trace windows from a running Go
service's net/http/pprof endpoint and send each to the ingest API (docs/live.md).

Pure: the standard library only (urllib), no web framework or database code.
"""
