"""Analyses of ICTD transformers: each module a set of pure metrics on models, caches and tasks."""
