"""Generators over the message tables: the typed stubs of ``protocol/messages`` (``typegen.py``)."""
