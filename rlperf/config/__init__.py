"""Configuration: structured schemas of every config group, and validation."""
