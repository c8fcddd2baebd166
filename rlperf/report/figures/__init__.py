"""The report's figures: the registry (:mod:`.registry`), the drawing helpers (:mod:`.plot`)
and one module per subject."""
