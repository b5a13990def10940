"""The embedded cluster and ``kai sim``."""
