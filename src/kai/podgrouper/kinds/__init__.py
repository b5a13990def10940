"""One module per family of owner kinds; each exports plain grouper functions (Request → Draft).

Adding a kind = a function here (usually the default draft plus a few changes) and one row in
``kai.podgrouper._registry.REGISTRY``.
"""
