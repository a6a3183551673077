"""The one runtime that owns every partition log: appends, group commit, flush policy, retention."""
