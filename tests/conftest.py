"""Shared test helpers: small manifests built in code, so tests need no external data."""
