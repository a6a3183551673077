"""KIP-932 share groups inside the group coordinator: membership, the share assignor, their
``__consumer_offsets`` records and how they are replayed."""
