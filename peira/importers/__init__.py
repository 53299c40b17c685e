"""Importers and exporters for the reference formats (SPEC §9)."""
