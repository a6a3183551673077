"""Operator tools that talk to a broker or read its files: health, dump-log, a blocking wire client."""
