"""Keeping a knowledge base healthy: `clawkb doctor`, `backup` and `restore`."""
