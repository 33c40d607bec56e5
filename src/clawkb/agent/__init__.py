"""Ready-made agent instructions shipped with clawkb (``clawkb skill``)."""
