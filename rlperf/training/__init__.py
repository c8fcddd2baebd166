"""The training stage: RLlib PPO with per-iteration phase timing."""
