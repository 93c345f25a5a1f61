"""Workflow support: config and sheet validation, the library, cache keys, paths, targets, script helpers."""
