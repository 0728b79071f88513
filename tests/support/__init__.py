"""Helpers shared by the tiers of one topic's tests (each module named after its test files)."""
