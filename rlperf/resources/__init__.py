"""Resources: GPU fractions, CPU affinity, feasibility, and starting Ray."""
