"""The versioned object store and its change feed."""

from kai.store._store import Change, Key, Store, key_of

__all__ = ["Change", "Key", "Store", "key_of"]
