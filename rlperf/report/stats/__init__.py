"""Statistics on cells: intervals and ranks, robust return statistics, the Universal
Scalability Law fit, repeats pooling, objectives and time to target."""
