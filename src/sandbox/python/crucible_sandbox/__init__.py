"""crucible\x27s sandbox: the fork-server and everything that runs inside it."""
