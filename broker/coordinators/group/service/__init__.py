"""The group coordinator's shell: shards around the pure coordinator, their timers and replay."""
