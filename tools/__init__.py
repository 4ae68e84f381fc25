"""Developer and CI tooling for gmpscope (not imported by the app)."""
