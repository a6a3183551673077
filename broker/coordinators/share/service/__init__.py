"""The share coordinator on the coordinator runtime (``coordinator.py``)."""
