"""Workload traces: loaders (``alibaba``) and the fill-up placement benchmark (``fillup``)."""
