"""Spark analysis of the ``__consumer_offsets`` log: the ``kafka_offsets_log`` data source
(``source``), the tables (``tables``) and their rules (``rules``), the report, and the
``kcoord analyze`` command (``cli``, ``job``). Needs the ``analysis`` extra."""
