"""The client side of kcoord: Kafka-protocol wire clients (blocking and trio, ``wire_client``), an
admin client (``admin_client``) and the command-line tools built on them (``kcoord health``,
``kcoord groups`` with its history and doctor, ``kcoord dump-log`` over a data dir's files).
Clients of the broker: they use ``protocol`` (and ``storage``'s file layout, ``doctor``), nothing
of ``broker``."""
