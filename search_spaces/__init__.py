"""The shipped search spaces: YAML files installed as package data (``sweep/space/model.py`` finds them)."""
