"""The shipped search spaces: YAML files installed as package data (``sweep/space.py`` finds them)."""
