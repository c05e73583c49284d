"""One suite of scheduling scenarios, run against the reference model and every store."""
