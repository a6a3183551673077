"""KIP-848 consumer groups: the group model, member reconciliation and the server-side assignors."""
