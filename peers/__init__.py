"""Peer tests: TRL's and verl's own code on the app's numbers (`make peers`, docs/how-to/peer-tests.md)."""
