"""Helpers shared by the test suites (fake provider servers)."""
