"""Figure builders: pure functions from plain data to Plotly figures.

Modules with exportable diagrams define ``DIAGRAMS`` (name -> builder taking a
:class:`app.figures.source.DiagramSource`, a trace id and options); the export
registry (:mod:`app.figures.registry`) collects them for ``gmpscope export`` and
the export API.
"""
