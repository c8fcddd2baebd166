"""rlperf: adds a user's ./conf folder to the config search path (docs/configuration.md)."""
