"""A user env module whose import fails (a dependency it needs is missing)."""

raise ImportError("this env needs the package 'gridworld_physics', which is not installed")
