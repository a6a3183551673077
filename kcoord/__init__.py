"""The kcoord command line, above the broker and the analysis."""
