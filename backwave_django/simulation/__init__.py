"""The deterministic simulator: a whole cluster of real Node Drivers against one MemoryStore, on virtual time,
with every fault decided by a seed. ``python -m backwave_django.simulation --help`` runs it.

Like the Core it is pure: no Django, no threads, no clock, no sleeping, and no randomness but the
``random.Random`` streams each run seeds for itself, so a seed replays exactly, on any machine.
"""
