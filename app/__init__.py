"""The gmpscope explorer UI: a Dash app on the Flask server that also serves the ingest API."""
